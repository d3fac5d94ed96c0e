#include "serving/residency.h"

#include "gtest/gtest.h"

namespace superserve {
namespace {

using State = Residency::State;

auto Anyone() {
  return [](int32_t) { return true; };
}
auto NonePinned() {
  return [](int32_t, ModelId) { return false; };
}

TEST(ResidencyTest, LoadsWhereMemoryIsFreeAndQueuesLoadsOnOneWorker) {
  Residency r;
  r.AddWorker(0, 100);
  r.AddWorker(1, 100);
  r.AddModel(1, 60, Millis(10));
  r.AddModel(2, 60, Millis(10));
  r.AddModel(3, 30, Millis(20));
  auto p1 = r.Plan(1, Millis(0), Anyone(), NonePinned());
  ASSERT_EQ(p1.worker, 0) << "both free: the lowest id";
  EXPECT_EQ(p1.ready, Millis(10));
  EXPECT_TRUE(p1.evict.empty());
  r.StartLoad(1, p1);
  EXPECT_EQ(r.StateOf(0, 1), State::kLoading);
  EXPECT_EQ(r.PendingReady(1), Millis(10));
  EXPECT_EQ(r.used(0), 60);
  // Model 2 does not fit next to 1 without evicting; worker 1 is empty.
  auto p2 = r.Plan(2, Millis(1), Anyone(), NonePinned());
  EXPECT_EQ(p2.worker, 1);
  r.StartLoad(2, p2);
  // Model 3 (30) fits on both; both loading engines are busy until 10 and
  // 11 ms: worker 0's completes first (10 + 20).
  auto p3 = r.Plan(3, Millis(2), Anyone(), NonePinned());
  EXPECT_EQ(p3.worker, 0);
  EXPECT_EQ(p3.ready, Millis(30));
  EXPECT_TRUE(r.FinishLoad(0, 1));
  EXPECT_EQ(r.StateOf(0, 1), State::kResident);
  EXPECT_EQ(r.PendingReady(1), -1);
  EXPECT_FALSE(r.FinishLoad(0, 1)) << "already resident: a stale report";
  EXPECT_FALSE(r.FinishLoad(1, 1)) << "never loading there";
}

TEST(ResidencyTest, EvictsTheLeastDemandedUnpinnedModels) {
  Residency r(Seconds(10));
  r.AddWorker(0, 100);
  for (ModelId m = 1; m <= 4; ++m) r.AddModel(m, 25, Millis(5));
  r.AddModel(5, 50, Millis(5));
  Nanos now = 0;
  for (ModelId m = 1; m <= 4; ++m) {
    auto p = r.Plan(m, now, Anyone(), NonePinned());
    ASSERT_EQ(p.worker, 0);
    r.StartLoad(m, p);
    ASSERT_TRUE(r.FinishLoad(0, m));
  }
  // Demand: model 1 three arrivals, 2 one, 3 none, 4 two.
  for (int i = 0; i < 3; ++i) r.NoteDemand(1, now);
  r.NoteDemand(2, now);
  r.NoteDemand(4, now);
  r.NoteDemand(4, now);
  EXPECT_DOUBLE_EQ(r.Demand(1, now), 3);
  EXPECT_NEAR(r.Demand(1, now + Seconds(10)), 1.5, 1e-9) << "one half-life later";
  // Room for 50 = two victims: 3 (0) then 2 (1), never 1 or 4.
  auto p = r.Plan(5, now, Anyone(), NonePinned());
  ASSERT_EQ(p.worker, 0);
  EXPECT_EQ(p.evict, (std::vector<ModelId>{3, 2}));
  EXPECT_DOUBLE_EQ(p.evicted_demand, 1);
  // Model 3 pinned (a batch in flight): 2 then 4 instead.
  auto pinned3 = [](int32_t, ModelId m) { return m == 3; };
  p = r.Plan(5, now, Anyone(), pinned3);
  EXPECT_EQ(p.evict, (std::vector<ModelId>{2, 4}));
  // Everything pinned: no room anywhere.
  auto all = [](int32_t, ModelId) { return true; };
  EXPECT_EQ(r.Plan(5, now, Anyone(), all).worker, -1);
  // Victims only below a demand: 3 (0) and 2 (1) are below 1.5, 4 is not.
  EXPECT_EQ(r.Plan(5, now, Anyone(), pinned3, 1.5).worker, -1);
  p = r.Plan(5, now, Anyone(), NonePinned(), 1.5);
  r.StartLoad(5, p);
  EXPECT_EQ(r.StateOf(0, 3), State::kNone);
  EXPECT_EQ(r.StateOf(0, 2), State::kNone);
  EXPECT_EQ(r.used(0), 100);
  EXPECT_EQ(r.Replicas(2), 0);
}

TEST(ResidencyTest, PrefersTheSoonestLoadThenTheLeastEvictedDemand) {
  Residency r;
  r.AddWorker(0, 100);
  r.AddWorker(1, 100);
  r.AddWorker(2, 10);  // too small for anything
  r.AddModel(1, 100, Millis(10));
  r.AddModel(2, 100, Millis(10));
  r.AddModel(3, 100, Millis(10));
  r.StartLoad(1, r.Plan(1, 0, Anyone(), NonePinned()));
  r.StartLoad(2, r.Plan(2, 0, Anyone(), NonePinned()));
  ASSERT_TRUE(r.FinishLoad(0, 1));
  ASSERT_TRUE(r.FinishLoad(1, 2));
  r.NoteDemand(1, Millis(10));
  r.NoteDemand(1, Millis(10));
  r.NoteDemand(2, Millis(10));
  auto p = r.Plan(3, Millis(10), Anyone(), NonePinned());
  EXPECT_EQ(p.worker, 1) << "evicts model 2 (demand 1), not model 1 (2)";
  EXPECT_EQ(p.evict, (std::vector<ModelId>{2}));
  // Worker 1 ineligible (the model is not declared there): worker 0.
  p = r.Plan(3, Millis(10), [](int32_t w) { return w != 1; }, NonePinned());
  EXPECT_EQ(p.worker, 0);
  // A busy loading engine loses, whatever it would evict: worker 1 loads
  // model 4 until 200 ms, so worker 0 (idle) takes model 3 although it
  // evicts more demand.
  r.AddModel(4, 0, Millis(190));
  r.StartLoad(4, r.Plan(4, Millis(10), [](int32_t w) { return w == 1; },
                        NonePinned()));
  p = r.Plan(3, Millis(10), Anyone(), NonePinned());
  EXPECT_EQ(p.worker, 0);
  EXPECT_EQ(p.ready, Millis(20));
}

TEST(ResidencyTest, RemovingAWorkerOrAModelForgetsTheirReplicas) {
  Residency r;
  r.AddWorker(0, 100);
  r.AddWorker(1, 100);
  r.AddModel(1, 50, Millis(10));
  r.AddModel(2, 50, Millis(10));
  auto on = [](int32_t want) { return [want](int32_t w) { return w == want; }; };
  r.StartLoad(1, r.Plan(1, 0, on(0), NonePinned()));
  r.StartLoad(2, r.Plan(2, 0, on(0), NonePinned()));
  r.StartLoad(1, r.Plan(1, 0, on(1), NonePinned()));
  ASSERT_TRUE(r.FinishLoad(0, 1));
  EXPECT_EQ(r.Replicas(1), 2);
  EXPECT_EQ(r.RemoveWorker(0), (std::vector<ModelId>{1, 2}));
  EXPECT_FALSE(r.Tracks(0));
  EXPECT_EQ(r.Replicas(1), 1);
  EXPECT_EQ(r.Replicas(2), 0);
  EXPECT_EQ(r.PendingReady(2), -1);
  EXPECT_EQ(r.RemoveModel(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(r.used(1), 0);
  r.FailLoad(1, 2);  // not loading there: nothing happens
  EXPECT_EQ(r.used(1), 0);
}

// A worker's measured footprint replaces the profile's figure: every
// worker holding or loading the model counts the new figure, and the next
// plan fits models by it.
TEST(ResidencyTest, AMeasuredFootprintReplacesTheProfilesFigure) {
  Residency r;
  r.AddWorker(0, 100);
  r.AddWorker(1, 100);
  r.AddModel(1, 60, Millis(10));
  r.AddModel(2, 60, Millis(10));
  auto p = r.Plan(1, 0, Anyone(), NonePinned());
  ASSERT_EQ(p.worker, 0);
  r.StartLoad(1, p);
  ASSERT_TRUE(r.FinishLoad(0, 1));
  EXPECT_EQ(r.used(0), 60);
  r.SetFootprint(1, 30);
  EXPECT_EQ(r.Footprint(1), 30);
  EXPECT_EQ(r.used(0), 30);
  // 30 + 60 fits on worker 0 now, without evicting (ids tie-break to 0).
  auto q = r.Plan(2, Millis(20), [](int32_t w) { return w == 0; }, NonePinned());
  ASSERT_EQ(q.worker, 0);
  EXPECT_TRUE(q.evict.empty());
  r.SetFootprint(1, -1);  // ignored
  r.SetFootprint(9, 10);  // unknown model: ignored
  EXPECT_EQ(r.Footprint(1), 30);
  EXPECT_EQ(r.used(0), 30);
  // Larger than measured before: the worker is over budget, and a plan
  // there evicts it.
  r.SetFootprint(1, 90);
  EXPECT_EQ(r.used(0), 90);
  q = r.Plan(2, Millis(20), [](int32_t w) { return w == 0; }, NonePinned());
  ASSERT_EQ(q.worker, 0);
  EXPECT_EQ(q.evict, std::vector<ModelId>{1});
  r.StartLoad(2, q);
  EXPECT_EQ(r.used(0), 60) << "the evicted model's measured 90 freed";
}

}  // namespace
}  // namespace superserve
