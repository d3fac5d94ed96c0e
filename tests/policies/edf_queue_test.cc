#include "policies/edf_queue.h"

#include <algorithm>
#include <random>
#include <set>

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

TEST(EdfQueueTest, CountDeadlinesBeforeMatchesSortedPrefix) {
  std::mt19937_64 rng(11);
  EdfQueue q;
  std::vector<Nanos> deadlines;
  for (QueryId i = 0; i < 3000; ++i) {
    Nanos d = static_cast<Nanos>(rng() % 5000);
    deadlines.push_back(d);
    q.Push({i, 0, 0, d});
  }
  std::sort(deadlines.begin(), deadlines.end());
  for (Nanos t : {Nanos{-1}, Nanos{0}, Nanos{1}, Nanos{777}, Nanos{2500}, Nanos{4999},
                  Nanos{6000}}) {
    Nanos next = 0;
    size_t n = q.CountDeadlinesBefore(t, &next);
    size_t expect = std::lower_bound(deadlines.begin(), deadlines.end(), t) - deadlines.begin();
    EXPECT_EQ(n, expect) << t;
    if (expect < deadlines.size()) {
      EXPECT_EQ(next, deadlines[expect]) << t;
    } else {
      EXPECT_EQ(next, INT64_MAX);
    }
  }
  EdfQueue empty;
  Nanos next = 0;
  EXPECT_EQ(empty.CountDeadlinesBefore(10, &next), 0u);
  EXPECT_EQ(next, INT64_MAX);
}

TEST(EdfQueueTest, CountDeadlinesBeforeStopsAtTheLimit) {
  EdfQueue q;
  for (QueryId id = 1; id <= 200; ++id) q.Push({id, 0, 0, static_cast<Nanos>((id * 37) % 200)});
  Nanos next = 0;
  EXPECT_EQ(q.CountDeadlinesBefore(150, &next), 150u);
  EXPECT_EQ(next, 150);
  EXPECT_EQ(q.CountDeadlinesBefore(150, &next, 64), 64u);
  EXPECT_EQ(next, INT64_MIN);  // more may follow
  EXPECT_EQ(q.CountDeadlinesBefore(150, &next, 151), 150u);  // under the limit: exact
  EXPECT_EQ(next, 150);
}

TEST(EdfQueueTest, TakeIdsRemovesExactlyThoseAndKeepsEdfOrder) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 50; ++trial) {
    EdfQueue q;
    std::vector<Query> all;
    const int n = 1 + static_cast<int>(rng() % 300);
    for (int i = 1; i <= n; ++i) {
      Query x{static_cast<QueryId>(i), 0, 0, static_cast<Nanos>(rng() % 50)};
      q.Push(x);
      all.push_back(x);
    }
    std::vector<QueryId> take;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 20); ++k) {
      take.push_back(1 + rng() % (n + 5));  // some not queued, some repeated
    }
    std::vector<Query> out;
    q.TakeIds(take, &out);
    std::vector<QueryId> want;
    for (QueryId id : take) {
      if (id <= static_cast<QueryId>(n) &&
          std::find(want.begin(), want.end(), id) == want.end()) {
        want.push_back(id);
      }
    }
    std::vector<QueryId> got;
    for (const Query& x : out) got.push_back(x.id);
    ASSERT_EQ(got, want) << "trial " << trial;
    for (const Query& x : out) ASSERT_EQ(x.deadline, all[x.id - 1].deadline);
    std::vector<Query> rest;
    for (const Query& x : all) {
      if (std::find(want.begin(), want.end(), x.id) == want.end()) rest.push_back(x);
    }
    std::sort(rest.begin(), rest.end(), [](const Query& a, const Query& b) {
      return a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id);
    });
    ASSERT_EQ(q.size(), rest.size());
    for (const Query& x : rest) ASSERT_EQ(q.Pop().id, x.id);
  }
}

TEST(EdfQueueTest, IndexedQueueMatchesASetUnderEveryOperation) {
  // After the first TakeIds the queue keeps an id index through every later
  // operation; a reference ordered set checks each of them.
  std::mt19937_64 rng(23);
  auto before = [](const Query& a, const Query& b) {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id);
  };
  std::set<Query, decltype(before)> ref(before);
  EdfQueue q;
  QueryId next_id = 1;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t op = rng() % 100;
    if (op < 50 || ref.empty()) {
      Query x{next_id++, 0, 0, static_cast<Nanos>(rng() % 1000)};
      q.Push(x);
      ref.insert(x);
    } else if (op < 70) {
      ASSERT_EQ(q.Pop().id, ref.begin()->id) << "step " << step;
      ref.erase(ref.begin());
    } else if (op < 95) {
      std::vector<QueryId> take;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k) {
        take.push_back(1 + rng() % next_id);  // queued, taken before, or repeated
      }
      std::vector<Query> out;
      q.TakeIds(take, &out);
      std::vector<QueryId> want;
      for (QueryId id : take) {
        const auto it = std::find_if(ref.begin(), ref.end(),
                                     [id](const Query& x) { return x.id == id; });
        if (it != ref.end()) {
          want.push_back(id);
          ref.erase(it);
        }
      }
      std::vector<QueryId> got;
      for (const Query& x : out) got.push_back(x.id);
      ASSERT_EQ(got, want) << "step " << step;
    } else if (op < 99) {
      const uint64_t m = 2 + rng() % 5;
      q.RemoveIf([m](const Query& x) { return x.id % m == 0; });
      for (auto it = ref.begin(); it != ref.end();) {
        it = it->id % m == 0 ? ref.erase(it) : std::next(it);
      }
    } else {
      q.Clear();
      ref.clear();
    }
    ASSERT_EQ(q.size(), ref.size()) << "step " << step;
    if (!ref.empty()) {
      ASSERT_EQ(q.Head().id, ref.begin()->id) << "step " << step;
    }
  }
  for (const Query& x : ref) ASSERT_EQ(q.Pop().id, x.id);
  EXPECT_TRUE(q.empty());
}

}  // namespace
TEST(EdfQueueTest, RemoveIfKeepsEdfOrderOnRandomWorkload) {
  std::mt19937_64 rng(11);
  EdfQueue q;
  std::vector<Query> kept;
  for (QueryId i = 0; i < 3000; ++i) {
    Query x{i, 0, 0, static_cast<Nanos>(rng() % 500)};
    q.Push(x);
    if (i % 3 != 0) kept.push_back(x);
  }
  size_t seen = 0;
  q.RemoveIf([&](const Query& x) {
    ++seen;
    return x.id % 3 == 0;
  });
  EXPECT_EQ(seen, 3000u);  // each query offered exactly once
  std::sort(kept.begin(), kept.end(), [](const Query& a, const Query& b) {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id);
  });
  ASSERT_EQ(q.size(), kept.size());
  for (const Query& want : kept) ASSERT_EQ(q.Pop().id, want.id);
}

}  // namespace superserve
