// The list of models with queued queries against a std::set, under random
// additions (repeated ones among them) and removals, and the removal of
// the entry a walk by index stands on.
#include "serving/active_models.h"

#include <memory>
#include <random>
#include <set>

#include "gtest/gtest.h"

namespace superserve {
namespace {

struct ListedModel {
  int32_t active_slot = -1;
};

TEST(ActiveModelsTest, MatchesASetUnderRandomAddsAndRemoves) {
  std::mt19937_64 rng(7);
  std::vector<std::unique_ptr<ListedModel>> models;
  for (int i = 0; i < 30; ++i) models.push_back(std::make_unique<ListedModel>());
  ActiveModels<ListedModel> active;
  std::set<ListedModel*> ref;
  for (int step = 0; step < 2000; ++step) {
    ListedModel* m = models[rng() % models.size()].get();
    if (rng() % 2 == 0) {
      active.Add(m);
      ref.insert(m);
    } else {
      active.Remove(m);
      ref.erase(m);
    }
    ASSERT_EQ(active.size(), ref.size());
    std::set<ListedModel*> listed;
    for (size_t i = 0; i < active.size(); ++i) {
      ASSERT_EQ(active[i]->active_slot, static_cast<int32_t>(i));
      listed.insert(active[i]);
    }
    ASSERT_EQ(listed, ref);
    for (const auto& other : models) {
      if (ref.count(other.get()) == 0) ASSERT_EQ(other->active_slot, -1);
    }
  }
}

// The core's sweep walks by index and removes the models it emptied: the
// last entry moves into the position, which the walk visits again.
TEST(ActiveModelsTest, AWalkThatRemovesVisitsEveryEntryOnce) {
  ListedModel a, b, c, d;
  ActiveModels<ListedModel> active;
  for (ListedModel* m : {&a, &b, &c, &d}) active.Add(m);
  active.Add(&b);  // idempotent
  EXPECT_EQ(active.size(), 4u);
  std::set<ListedModel*> visited;
  for (size_t i = 0; i < active.size();) {
    ListedModel* m = active[i];
    EXPECT_TRUE(visited.insert(m).second) << "visited twice";
    if (m == &a || m == &c) {
      active.Remove(m);
      continue;
    }
    ++i;
  }
  EXPECT_EQ(visited.size(), 4u);
  EXPECT_EQ(active.size(), 2u);
  EXPECT_EQ(a.active_slot, -1);
  EXPECT_EQ(c.active_slot, -1);
  while (!active.empty()) active.Remove(active.back());
  EXPECT_EQ(b.active_slot, -1);
  EXPECT_EQ(d.active_slot, -1);
}

}  // namespace
}  // namespace superserve
