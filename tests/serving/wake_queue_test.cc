// The wake-up queue against an ordered set of (time, id), under random
// lists, moves (earlier and later), erases and pops.
#include "serving/wake_queue.h"

#include <memory>
#include <random>
#include <set>

#include "gtest/gtest.h"

namespace superserve {
namespace {

struct Entry {
  uint64_t id = 0;
  Nanos wake_listed = 0;
  int32_t wake_slot = -1;
};

TEST(WakeQueueTest, MatchesAnOrderedSetUnderRandomMoves) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<std::unique_ptr<Entry>> entries;
    for (int i = 0; i < n; ++i) {
      entries.push_back(std::make_unique<Entry>());
      entries.back()->id = static_cast<uint64_t>(i) + 1;
    }
    WakeQueue<Entry> q;
    std::set<std::pair<Nanos, uint64_t>> ref;
    for (int step = 0; step < 2000; ++step) {
      Entry* e = entries[rng() % entries.size()].get();
      const int op = static_cast<int>(rng() % 10);
      if (op < 6) {  // list or move, times with ties
        if (e->wake_listed > 0) ref.erase({e->wake_listed, e->id});
        e->wake_listed = 1 + static_cast<Nanos>(rng() % 50);
        ref.insert({e->wake_listed, e->id});
        q.Update(e);
      } else if (op < 8) {
        if (e->wake_listed > 0) ref.erase({e->wake_listed, e->id});
        q.Erase(e);
        EXPECT_EQ(e->wake_listed, 0);
        EXPECT_EQ(e->wake_slot, -1);
      } else if (!ref.empty()) {
        ASSERT_FALSE(q.empty());
        Entry* t = q.top();
        EXPECT_EQ(std::make_pair(t->wake_listed, t->id), *ref.begin());
        ref.erase(ref.begin());
        q.Pop();
        EXPECT_EQ(t->wake_listed, 0);
      }
      ASSERT_EQ(q.size(), ref.size()) << "seed " << seed << " step " << step;
      if (!ref.empty()) {
        EXPECT_EQ(std::make_pair(q.top()->wake_listed, q.top()->id), *ref.begin())
            << "seed " << seed << " step " << step;
      }
    }
  }
}

// An entry whose owner may have moved or withdrawn its wake-up (`asked`)
// since it was listed: PopDue fires only those still asked for, DropStale
// clears stale ones off the top.
struct AskingEntry {
  uint64_t id = 0;
  Nanos wake_listed = 0;
  int32_t wake_slot = -1;
  Nanos asked = 0;  // what the owner asks for now (0: nothing)
};

TEST(WakeQueueTest, PopDueFiresOnlyWakeUpsStillAskedFor) {
  AskingEntry a, b, c, d;
  a.id = 1, b.id = 2, c.id = 3, d.id = 4;
  WakeQueue<AskingEntry> q;
  const auto current = [](const AskingEntry* e) { return e->asked == e->wake_listed; };
  const std::vector<std::pair<AskingEntry*, Nanos>> listed = {
      {&a, 10}, {&b, 20}, {&c, 15}, {&d, 40}};
  for (const auto& [e, at] : listed) {
    e->asked = at;
    q.List(e, at);
  }
  q.List(&a, 10);  // listed there already: no change
  q.List(&d, 0);   // nothing asked: no change
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(d.wake_listed, 40);
  b.asked = 0;  // b's wake-up was answered otherwise
  std::vector<AskingEntry*> due;
  q.PopDue(20, current, &due);
  EXPECT_EQ(due, (std::vector<AskingEntry*>{&a, &c})) << "earliest first, stale b dropped";
  EXPECT_EQ(b.wake_slot, -1);
  EXPECT_EQ(b.wake_listed, 0);
  EXPECT_EQ(q.size(), 1u);

  b.asked = 30;
  q.List(&b, 30);
  d.asked = 50;  // moved, but still listed at 40
  q.DropStale(current);
  EXPECT_EQ(q.top(), &b) << "b is current: nothing dropped";
  b.asked = 0;
  q.DropStale(current);
  EXPECT_TRUE(q.empty()) << "b, then d (listed at 40, asked at 50): both stale";
}

}  // namespace
}  // namespace superserve
