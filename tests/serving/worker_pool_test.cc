#include "serving/worker_pool.h"

#include "gtest/gtest.h"

namespace superserve {
namespace {

InflightBatch Batch(uint64_t id, Nanos deadline, std::vector<QueryId> queries) {
  InflightBatch b;
  b.id = id;
  b.deadline = deadline;
  b.queries = std::move(queries);
  return b;
}

TEST(WorkerPoolTest, SlotsLivenessAndLostBatches) {
  WorkerPool pool;
  const int32_t a = pool.Add("a", false, {"m"}, nullptr, 0);
  const int32_t b = pool.Add("", true, {"m"}, nullptr, 0);
  EXPECT_EQ(*pool.Get(a)->name, "a#0");
  EXPECT_EQ(*pool.Get(b)->name, "worker-1");
  EXPECT_EQ(pool.alive(), 2);
  EXPECT_EQ(pool.FreeSlots(a, 2), 2);
  pool.AddInflight(a, Batch(7, Millis(50), {1, 2}));
  EXPECT_EQ(pool.FreeSlots(a, 2), 1);
  EXPECT_EQ(pool.FreeSlots(a, 1), 0);
  EXPECT_FALSE(pool.TakeInflight(a, 8).has_value()) << "not its batch";
  EXPECT_FALSE(pool.TakeInflight(b, 7).has_value());

  EXPECT_TRUE(pool.Overdue(Millis(50)).empty());
  EXPECT_EQ(pool.Overdue(Millis(51)), std::vector<int32_t>{a});
  pool.Heard(b, Millis(90));
  EXPECT_EQ(pool.Silent(Millis(100), Millis(50)), std::vector<int32_t>{a});

  auto lost = pool.MarkDead(a);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].queries, (std::vector<QueryId>{1, 2}));
  EXPECT_TRUE(pool.MarkDead(a).empty()) << "idempotent";
  EXPECT_EQ(pool.alive(), 1);
  EXPECT_EQ(pool.GetAlive(a), nullptr);
  EXPECT_NE(pool.Get(a), nullptr);
  EXPECT_EQ(pool.FreeSlots(a, 4), 0);
  EXPECT_TRUE(pool.Overdue(Seconds(10)).empty()) << "dead workers are not checked";
  EXPECT_EQ(pool.Get(5), nullptr);
}

}  // namespace
}  // namespace superserve
