#include "policies/edf_queue.h"

#include <algorithm>
#include <random>

#include "gtest/gtest.h"

namespace superserve {
namespace {

TEST(EdfQueueTest, PopsInDeadlineOrderTiesById) {
  EdfQueue q;
  q.Push({5, 0, 0, 300});
  q.Push({2, 0, 0, 100});
  q.Push({9, 0, 0, 100});
  q.Push({1, 0, 0, 200});
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q.Head().id, 2u);
  std::vector<Query> out;
  q.PopFront(3, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].id, 2u);
  EXPECT_EQ(out[1].id, 9u);
  EXPECT_EQ(out[2].id, 1u);
  EXPECT_EQ(q.Head().id, 5u);
  q.PopFront(10, &out);  // more than left: takes what there is
  EXPECT_EQ(out.size(), 4u);
  EXPECT_TRUE(q.empty());
}

TEST(EdfQueueTest, MatchesSortOnRandomWorkloadAndPeekDoesNotRemove) {
  std::mt19937_64 rng(7);
  EdfQueue q;
  std::vector<Query> all;
  for (QueryId i = 0; i < 5000; ++i) {
    Query x{i, 0, 0, static_cast<Nanos>(rng() % 1000)};
    all.push_back(x);
    q.Push(x);
  }
  std::sort(all.begin(), all.end(), [](const Query& a, const Query& b) {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id);
  });
  std::vector<Query> peek;
  q.PeekFront(50, &peek);
  ASSERT_EQ(peek.size(), 50u);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(peek[i].id, all[i].id);
  EXPECT_EQ(q.size(), 5000u);
  std::vector<Query> out;
  while (!q.empty()) out.push_back(q.Pop());
  ASSERT_EQ(out.size(), all.size());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i].id, all[i].id) << i;
}

}  // namespace
}  // namespace superserve
