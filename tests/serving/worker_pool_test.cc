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

// AnsweringBatches counts a model's batches that still have queries to
// answer, through every way a batch leaves: its result, its worker's death,
// its model's removal (the batch keeps its slot, its queries go).
TEST(WorkerPoolTest, AnsweringBatchesFollowsEveryWayABatchLeaves) {
  WorkerPool pool;
  const int32_t a = pool.Add("a", false, {"m", "n"}, nullptr, 0);
  const int32_t b = pool.Add("b", false, {"m", "n"}, nullptr, 0);
  auto of = [](uint64_t id, ModelId model, std::vector<QueryId> queries) {
    InflightBatch batch = Batch(id, Seconds(1), std::move(queries));
    batch.model = model;
    return batch;
  };
  constexpr ModelId kM = 1, kN = 2;
  pool.AddInflight(a, of(1, kM, {1}));
  pool.AddInflight(a, of(2, kM, {2, 3}));
  pool.AddInflight(b, of(3, kM, {4}));
  pool.AddInflight(b, of(4, kN, {5}));
  pool.AddInflight(b, of(5, kN, {}));  // nothing to answer: not counted
  EXPECT_EQ(pool.AnsweringBatches(kM), 3);
  EXPECT_EQ(pool.AnsweringBatches(kN), 1);
  EXPECT_EQ(pool.AnsweringBatches(99), 0);

  ASSERT_TRUE(pool.TakeInflight(a, 1).has_value());  // a result
  EXPECT_EQ(pool.AnsweringBatches(kM), 2);
  EXPECT_FALSE(pool.TakeInflight(a, 1).has_value());
  EXPECT_EQ(pool.AnsweringBatches(kM), 2) << "a duplicate result changes nothing";

  EXPECT_EQ(pool.MarkDead(a).size(), 1u);  // batch 2 goes back to the core
  EXPECT_EQ(pool.AnsweringBatches(kM), 1);

  EXPECT_EQ(pool.TakeQueriesOf(kN), (std::vector<QueryId>{5}));
  EXPECT_EQ(pool.AnsweringBatches(kN), 0);
  EXPECT_EQ(pool.FreeSlots(b, 4), 1) << "batches 3, 4, 5 keep their slots";
  ASSERT_TRUE(pool.TakeInflight(b, 4).has_value());  // the removed model's late result
  EXPECT_EQ(pool.AnsweringBatches(kN), 0);
  EXPECT_EQ(pool.AnsweringBatches(kM), 1);
  ASSERT_TRUE(pool.TakeInflight(b, 3).has_value());
  EXPECT_EQ(pool.AnsweringBatches(kM), 0);
}

// A dead worker's record is recycled once its owner released the id; until
// then it is kept (the owner may still report on it).
TEST(WorkerPoolTest, ReleasedDeadRecordsAreRecycled) {
  WorkerPool pool;
  const int32_t steady = pool.Add("steady", false, {"m"}, nullptr, 0);
  for (int i = 0; i < 10000; ++i) {
    const int32_t id = pool.Add("flaky", false, {"m"}, nullptr, i);
    ASSERT_NE(id, steady);
    pool.MarkDead(id);
    pool.Release(id);
  }
  EXPECT_LE(pool.records().size(), 2u);
  EXPECT_EQ(pool.alive(), 1);

  const int32_t dead = pool.Add("dead", false, {"m"}, nullptr, 0);
  pool.AddInflight(dead, Batch(1, Millis(50), {7}));
  pool.MarkDead(dead);
  const int32_t other = pool.Add("other", false, {"m"}, nullptr, 0);
  EXPECT_NE(other, dead) << "not released yet";
  pool.Release(dead);
  const int32_t reused = pool.Add("new", true, {"n"}, nullptr, Millis(5));
  EXPECT_EQ(reused, dead);
  const WorkerRecord& w = *pool.Get(reused);
  EXPECT_TRUE(w.alive);
  EXPECT_TRUE(w.inflight.empty()) << "a fresh record";
  EXPECT_EQ(*w.name, "new#" + std::to_string(reused));
  EXPECT_EQ(w.last_heard, Millis(5));
  EXPECT_EQ(w.speed.samples(), 0);
  pool.Release(reused);  // alive: released once it dies
  pool.MarkDead(reused);
  EXPECT_EQ(pool.Add("again", false, {"m"}, nullptr, 0), reused);
}

// Hand-derived: four batches at 3x the profile give the straggler a factor
// of e^(ln 2 + (ln 3 - ln 2)(1 - 0.75^3)) = 2.528 (the first sample clipped
// to 2x, then a weight of 0.25 per sample, in log space); the normal
// worker's is 1, the fleet's lower median of {1, 2.528} is 1.
TEST(WorkerPool, RecordSpeedSetsEachWorkersSpeedRelativeToTheFleet) {
  WorkerPool pool;
  const int32_t normal = pool.Add("normal", true, {"m"}, nullptr, 0);
  const int32_t straggler = pool.Add("straggler", true, {"m"}, nullptr, 0);
  for (int i = 0; i < 4; ++i) pool.RecordSpeed(normal, Millis(10), Millis(10));
  for (int i = 0; i < 3; ++i) pool.RecordSpeed(straggler, Millis(30), Millis(10));
  EXPECT_EQ(pool.Get(straggler)->relative_speed, 1.0) << "3 samples: not measured yet";
  pool.RecordSpeed(straggler, Millis(30), Millis(10));
  EXPECT_NEAR(pool.Get(straggler)->relative_speed, 2.528, 0.001);
  EXPECT_EQ(pool.Get(normal)->relative_speed, 1.0);
  // A batch without a profiled latency (a dynamic model) and a dead
  // worker's late result change nothing.
  pool.RecordSpeed(normal, Millis(10), 0);
  EXPECT_EQ(pool.Get(normal)->speed.samples(), 4);
  pool.MarkDead(straggler);
  pool.RecordSpeed(straggler, Millis(90), Millis(10));
  EXPECT_EQ(pool.Get(straggler)->speed.samples(), 4);
}

// The free-slot index is the pool's own: every call that changes a worker's
// free slots (a batch sent or answered, registration, death, a recycled id)
// keeps it equal to FreeSlots(id) > 0.
TEST(WorkerPoolTest, FreeSlotIndexFollowsEveryChange) {
  WorkerPool pool(/*lookahead=*/2);
  const auto free_ids = [&pool] {
    std::vector<int32_t> out;
    FreeSlotIndex::Walk walk = pool.free_slots().Free();
    for (int32_t id = walk.Next(); id >= 0; id = walk.Next()) out.push_back(id);
    for (size_t id = 0; id < pool.records().size(); ++id) {
      const int32_t w = static_cast<int32_t>(id);
      EXPECT_EQ(pool.free_slots().Contains(w), pool.FreeSlots(w) > 0) << "worker " << w;
    }
    return out;
  };
  const int32_t a = pool.Add("a", false, {"m"}, nullptr, 0);
  const int32_t b = pool.Add("b", false, {"m"}, nullptr, 0);
  EXPECT_EQ(free_ids(), (std::vector<int32_t>{a, b}));
  pool.SetRegistering(b, true);
  EXPECT_EQ(free_ids(), std::vector<int32_t>{a}) << "a registering worker takes no batch";
  pool.SetRegistering(b, false);
  pool.AddInflight(a, Batch(1, Millis(50), {1}));
  EXPECT_EQ(pool.FreeSlots(a), 1);
  EXPECT_EQ(free_ids(), (std::vector<int32_t>{a, b})) << "one of two slots taken";
  pool.AddInflight(a, Batch(2, Millis(50), {2}));
  EXPECT_EQ(free_ids(), std::vector<int32_t>{b});
  ASSERT_TRUE(pool.TakeInflight(a, 1).has_value());
  EXPECT_EQ(free_ids(), (std::vector<int32_t>{a, b}));
  pool.MarkDead(b);
  EXPECT_EQ(free_ids(), std::vector<int32_t>{a});
  pool.Release(b);
  const int32_t c = pool.Add("c", false, {"m"}, nullptr, 0);
  EXPECT_EQ(c, b) << "the record is recycled";
  EXPECT_EQ(free_ids(), (std::vector<int32_t>{a, c}));
  pool.TakeQueriesOf(0);  // a removed model's batches keep their slots
  pool.AddInflight(a, Batch(3, Millis(50), {3}));
  EXPECT_EQ(free_ids(), std::vector<int32_t>{c});
}

// Busy fractions: each live worker's summed execution time over a window
// of at least the given length, capped at 1; a taken window restarts.
TEST(WorkerPoolTest, GaugesReportBusyFractionsPerWindow) {
  WorkerPool pool;
  const int32_t a = pool.Add("a", false, {"m"}, nullptr, 0);
  const int32_t b = pool.Add("b", false, {"m"}, nullptr, Millis(200));
  const int32_t c = pool.Add("c", false, {"m"}, nullptr, 0);
  pool.AddBusy(a, Millis(250));
  pool.AddBusy(b, Millis(100));
  pool.AddBusy(c, Millis(900));
  pool.MarkDead(c);
  pool.AddBusy(c, Millis(900));  // dead: not counted
  EXPECT_TRUE(pool.TakeGauges(Millis(400), Millis(500)).empty()) << "no window is long enough";
  auto gauges = pool.TakeGauges(Millis(1000), Millis(500));
  ASSERT_EQ(gauges.size(), 2u) << "a and b; c is dead";
  EXPECT_EQ(*gauges[0].name, "a#0");
  EXPECT_DOUBLE_EQ(gauges[0].busy_fraction, 0.25);
  EXPECT_DOUBLE_EQ(gauges[0].relative_speed, 1.0);
  EXPECT_DOUBLE_EQ(gauges[1].busy_fraction, 0.125) << "b's window began at its registration";
  pool.AddBusy(a, Millis(2000));
  EXPECT_TRUE(pool.TakeGauges(Millis(1400), Millis(500)).empty()) << "windows restarted at 1 s";
  gauges = pool.TakeGauges(Millis(1500), Millis(500));
  ASSERT_EQ(gauges.size(), 2u);
  EXPECT_DOUBLE_EQ(gauges[0].busy_fraction, 1.0) << "capped";
  EXPECT_DOUBLE_EQ(gauges[1].busy_fraction, 0.0);
}

}  // namespace
}  // namespace superserve
