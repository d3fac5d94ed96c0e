#include "serving/model_scheduler.h"

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"
#include "tests/baselines_registered.h"

namespace superserve {
namespace {

// Answers with a scripted list of decisions, then idles.
class ScriptedPolicy final : public Policy {
 public:
  explicit ScriptedPolicy(std::vector<Decision> script) : script_(std::move(script)) {}
  std::string_view name() const override { return "scripted"; }
  Decision Decide(const SchedulingContext& ctx) override {
    seen_free.push_back(static_cast<int32_t>(ctx.free_workers.size()));
    if (next_ >= script_.size()) return Decision::Idle();
    return script_[next_++];
  }
  std::vector<int32_t> seen_free;

 private:
  std::vector<Decision> script_;
  size_t next_ = 0;
};

Decision Dispatch(int32_t take, int32_t batch, int32_t subnet, int32_t worker, int32_t drop = 0) {
  Decision d;
  d.kind = Decision::Kind::kDispatch;
  d.take = take;
  d.batch_size = batch;
  d.subnet_index = subnet;
  d.worker = worker;
  d.drop = drop;
  return d;
}

class ModelSchedulerTest : public ::testing::Test {
 protected:
  ModelScheduler& Make(std::vector<Decision> script) {
    auto p = std::make_unique<ScriptedPolicy>(std::move(script));
    policy_ = p.get();
    s_ = std::make_unique<ModelScheduler>(&profile_, std::move(p));
    s_->AddWorker(3);
    s_->AddWorker(1);
    return *s_;
  }
  void Push(QueryId id, Nanos deadline) { s_->Push({id, 0, 0, deadline}, 0); }

  ModelProfile profile_ = testing::ThreeSubnetProfile();  // fastest: 1 ms
  ScriptedPolicy* policy_ = nullptr;
  std::unique_ptr<ModelScheduler> s_;
};

// The overload plan's probes run under the core's lock: the first plan asks
// the policy at all 64 slacks at once, a refresh 250 ms later asks 8 per
// PlanFor call, and the complete set before it answers until the refresh
// is done. The scripted policy runs batch 1 for the first 64 questions and
// batch 2 after, so the plan shows which set answered.
TEST_F(ModelSchedulerTest, ProbeRefreshesAskThePolicyEightSlacksAtATime) {
  std::vector<Decision> script(64, Dispatch(1, 1, 0, 3));
  script.insert(script.end(), 64, Dispatch(2, 2, 0, 3));
  ModelScheduler& s = Make(script);
  auto asked = [&] { return policy_->seen_free.size(); };
  EXPECT_EQ(s.PlanFor(Seconds(1), 0).take, 1);
  EXPECT_EQ(asked(), 64u);
  EXPECT_EQ(s.PlanFor(Seconds(1), Millis(249)).take, 1);
  EXPECT_EQ(asked(), 64u) << "no refresh before 250 ms";
  for (int step = 1; step <= 7; ++step) {
    EXPECT_EQ(s.PlanFor(Seconds(1), Millis(250) + step).take, 1) << "step " << step;
    EXPECT_EQ(asked(), 64u + 8u * step);
  }
  EXPECT_EQ(s.PlanFor(Seconds(1), Millis(251)).take, 2) << "the 8th step completes the set";
  EXPECT_EQ(asked(), 128u);
  // The next refresh starts 250 ms after this one started (250 ms + 1 ns).
  EXPECT_EQ(s.PlanFor(Seconds(1), Millis(500)).take, 2);
  EXPECT_EQ(asked(), 128u);
  s.PlanFor(Seconds(1), Millis(500) + 1);
  EXPECT_EQ(asked(), 136u);
  // A worker joining invalidates the plan: every slack at once again.
  s.AddWorker(5);
  s.PlanFor(Seconds(1), Millis(501));
  EXPECT_EQ(asked(), 200u);
}

TEST_F(ModelSchedulerTest, AppliesDropThenTakeAndSkipsCancelled) {
  ModelScheduler& s = Make({Dispatch(3, 4, 1, 3, /*drop=*/1), Dispatch(2, 2, 0, 1)});
  EXPECT_EQ(s.workers(), (std::vector<int32_t>{1, 3}));
  for (QueryId id = 1; id <= 6; ++id) Push(id, Millis(10 * id));
  s.MarkCancelled(3);
  EXPECT_EQ(s.queued(), 5u);
  std::vector<FreeSlot> slots = {{1, 1}, {3, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 2);
  EXPECT_EQ(r.dropped, std::vector<QueryId>{1});
  EXPECT_EQ(r.cancelled, std::vector<QueryId>{3});
  ASSERT_EQ(r.batches.size(), 2u);
  EXPECT_EQ(r.batches[0].worker, 3);
  EXPECT_EQ(r.batches[0].subnet_index, 1);
  ASSERT_EQ(r.batches[0].queries.size(), 2u) << "took 3 but one was cancelled";
  EXPECT_EQ(r.batches[0].queries[0].id, 2u);
  EXPECT_EQ(r.batches[0].queries[1].id, 4u);
  EXPECT_EQ(r.batches[1].worker, 1);
  EXPECT_EQ(r.batches[1].queries.size(), 2u);
  EXPECT_TRUE(slots.empty());
  EXPECT_EQ(policy_->seen_free, (std::vector<int32_t>{2, 1}));
  EXPECT_TRUE(s.empty());
}

TEST_F(ModelSchedulerTest, RejectsAnInvalidDispatch) {
  ModelScheduler& s = Make({Dispatch(1, 3, 0, 1)});  // 3 is no profiled batch size
  Push(1, Millis(10));
  std::vector<FreeSlot> slots = {{1, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  EXPECT_NE(r.invalid.find("invalid dispatch"), std::string::npos) << r.invalid;
  EXPECT_TRUE(r.batches.empty());
  ModelScheduler& t = Make({Dispatch(1, 1, 0, /*worker=*/7)});  // not offered
  Push(1, Millis(10));
  slots = {{1, 1}};
  EXPECT_FALSE(t.Schedule(0, &slots, 1).invalid.empty());
}

TEST_F(ModelSchedulerTest, TakeIdsTakesExactlyThoseQueriesAnywhereInTheQueue) {
  Decision d = Dispatch(0, 4, 2, 1);
  d.take_ids = {5, 2, 99, 6};  // 99 is not queued (stale view): skipped
  ModelScheduler& s = Make({d});
  for (QueryId id = 1; id <= 6; ++id) Push(id, Millis(10 * id));
  s.MarkCancelled(6);
  std::vector<FreeSlot> slots = {{1, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  ASSERT_TRUE(r.invalid.empty()) << r.invalid;
  ASSERT_EQ(r.batches.size(), 1u);
  ASSERT_EQ(r.batches[0].queries.size(), 2u);
  EXPECT_EQ(r.batches[0].queries[0].id, 5u);
  EXPECT_EQ(r.batches[0].queries[1].id, 2u);
  EXPECT_EQ(r.cancelled, std::vector<QueryId>{6});
  EXPECT_EQ(s.queued(), 3u);
  EXPECT_EQ(s.head_deadline(), Millis(10)) << "the rest keeps its EDF order";
  EXPECT_EQ(s.TakeAll(), (std::vector<QueryId>{1, 3, 4}));
}

TEST_F(ModelSchedulerTest, DynamicModelsDispatchWithoutASubnet) {
  profile_.subnets.clear();
  profile_.is_dynamic = true;
  profile_.dynamic.batch_overhead_us = 500;
  profile_.dynamic.per_request_factor = 0.5;
  profile_.dynamic.applications.push_back({"a", {3000, 4000}, {1}});
  profile_.dynamic.applications.push_back({"b", {1000, 9000}, {1}});
  ModelScheduler& s = Make({Dispatch(1, 1, /*subnet=*/0, 1), Dispatch(1, 1, -1, 1)});
  EXPECT_EQ(s.fastest(), Micros(500 + 0.5 * 1000));
  Push(1, Millis(10));
  std::vector<FreeSlot> slots = {{1, 1}};
  EXPECT_FALSE(s.Schedule(0, &slots, 1).invalid.empty()) << "no subnet 0 to run";
  ScheduleResult r = s.Schedule(0, &slots, 1);
  ASSERT_TRUE(r.invalid.empty()) << r.invalid;
  ASSERT_EQ(r.batches.size(), 1u);
  EXPECT_EQ(r.batches[0].subnet_index, -1);
}

TEST_F(ModelSchedulerTest, WakeAtIsRemembered) {
  ModelScheduler& s = Make({Decision::WakeAt(Millis(3))});
  Push(1, Millis(10));
  std::vector<FreeSlot> slots = {{1, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  EXPECT_TRUE(r.batches.empty());
  EXPECT_EQ(s.wake_at(), Millis(3));
  s.clear_wake();
  EXPECT_EQ(s.wake_at(), 0);
}

TEST_F(ModelSchedulerTest, RequeueRule) {
  ModelScheduler& s = Make({});
  EXPECT_EQ(s.fastest(), Millis(1));
  EXPECT_EQ(s.TryRequeue({1, 0, 0, Millis(10)}, Millis(9)), ModelScheduler::Requeue::kQueued);
  EXPECT_EQ(s.TryRequeue({2, 0, 0, Millis(10)}, Millis(9) + 1), ModelScheduler::Requeue::kTooLate);
  s.RemoveWorker(1);
  s.RemoveWorker(3);
  EXPECT_EQ(s.TryRequeue({3, 0, 0, Millis(10)}, 0), ModelScheduler::Requeue::kNoWorker);
  EXPECT_EQ(s.queued(), 1u);
}

TEST_F(ModelSchedulerTest, SweepTakesExpiredPrefixAndCancelledAnywhere) {
  ModelScheduler& s = Make({});
  for (QueryId id = 1; id <= 8; ++id) Push(id, Millis(id));
  s.MarkCancelled(2);  // expired too: counted once, as cancelled
  s.MarkCancelled(6);
  s.MarkCancelled(8);
  std::vector<QueryId> expired, cancelled;
  s.Sweep(Millis(3), &expired, &cancelled);
  EXPECT_EQ(expired, (std::vector<QueryId>{1, 3}));
  EXPECT_EQ(cancelled, (std::vector<QueryId>{2, 6, 8}));
  EXPECT_EQ(s.queued(), 3u);
  EXPECT_EQ(s.TakeAll(), (std::vector<QueryId>{4, 5, 7}));
}

// --- action windows and overload shedding, with the profile's own policies.
// INFaaS on ThreeSubnetProfile runs subnet 0 (1 / 1.5 / 2.5 / 4.5 ms at
// batch 1 / 2 / 4 / 8) with a 0.5 ms overhead estimate: its peak tuple is
// batch 8, c(8) = 5 ms, and a head needs 1.25 x 5 = 6.25 ms to be worth it.
class OverloadTest : public ::testing::Test {
 protected:
  ModelScheduler& Make(const std::string& policy, int workers, bool shed = true) {
    s_ = std::make_unique<ModelScheduler>(&profile_, *MakePolicy(policy, profile_, PolicyConfig()));
    OverloadOptions o;
    o.shed = shed;
    s_->set_overload(o);
    for (int w = 0; w < workers; ++w) s_->AddWorker(w);
    return *s_;
  }
  void Push(QueryId id, Nanos deadline) { s_->Push({id, 0, 0, deadline}, 0); }

  ModelProfile profile_ = testing::ThreeSubnetProfile();
  std::unique_ptr<ModelScheduler> s_;
};

TEST_F(OverloadTest, EveryBatchCarriesTheLatestStartThatMeetsItsFirstDeadline) {
  ModelScheduler& s = Make("infaas", 1);
  EXPECT_EQ(s.EstimatedLatency(0, 8), Millis(5));
  Push(1, Millis(30));
  Push(2, Millis(12));
  Push(3, Millis(40));
  std::vector<FreeSlot> slots{{0, 1}};
  ScheduleResult r = s.Schedule(Millis(2), &slots, 1);
  ASSERT_EQ(r.batches.size(), 1u);
  const TakenBatch& b = r.batches[0];
  ASSERT_EQ(b.queries.size(), 3u);
  // First deadline 12 ms minus the estimate of the chosen tuple (batch 4:
  // 2.5 ms + 0.5 ms overhead).
  EXPECT_EQ(b.batch_size, 4);
  EXPECT_EQ(b.latest, Millis(12) - Millis(3));
}

TEST_F(OverloadTest, EveryPolicysBatchesCarryAWindow) {
  for (const std::string& name : PolicyNames()) {
    ModelScheduler& s = Make(name, 2);
    for (QueryId id = 1; id <= 12; ++id) Push(id, Millis(20 + static_cast<Nanos>(id)));
    std::vector<FreeSlot> slots{{0, 1}, {1, 1}};
    ScheduleResult r = s.Schedule(0, &slots, 2);
    ASSERT_FALSE(r.batches.empty()) << name;
    for (const TakenBatch& b : r.batches) {
      EXPECT_GT(b.latest, 0) << name;
      EXPECT_LE(b.latest, b.queries.front().deadline -
                              profile_.subnets[b.subnet_index].latency[profile_.BatchIndex(
                                  b.batch_size)])
          << name << ": the window must leave the profiled latency at least";
    }
  }
}

TEST_F(OverloadTest, ThePlanIsThePolicysBestBatchAtTheLeastSlack) {
  ModelScheduler& s = Make("infaas", 2);
  Push(1, Millis(20));  // the probes reach the longest budget queued
  // INFaaS runs batch 8 (5 ms with the overhead) from 5 ms of slack on; the
  // probes are 20 / 64 ms apart.
  const ModelScheduler::Plan& plan = s.PlanFor(Millis(20), 0);
  EXPECT_EQ(plan.take, 8);
  EXPECT_GE(plan.target, Millis(5));
  EXPECT_LT(plan.target, Millis(5) + Millis(20) / 64 + 1);
  EXPECT_NEAR(plan.qps, 2 * 8 / 0.005, 1e-6);
  // A budget below 5 ms: the best that fits it (batch 4 from 3 ms).
  const ModelScheduler::Plan& tight = s.PlanFor(Millis(4), 0);
  EXPECT_EQ(tight.take, 4);
  EXPECT_NEAR(tight.qps, 2 * 4 / 0.003, 1e-6);
}

TEST_F(OverloadTest, AdmissionRejectsWhatTheQueueAheadLeavesNoTimeFor) {
  ModelScheduler& s = Make("infaas", 1);
  Push(1, Millis(20));
  const ModelScheduler::Plan plan = s.PlanFor(Millis(20), 0);
  // Queries ahead drain at 4x the plan's rate (the admission headroom) in
  // the 20 ms minus the plan's target.
  const int64_t most =
      1 + static_cast<int64_t>(ToSeconds(Millis(20) - plan.target) * plan.qps * 4);
  ASSERT_GT(most, 8);
  for (QueryId id = 2; id < static_cast<QueryId>(most); ++id) Push(id, Millis(20));
  EXPECT_TRUE(s.Admit(Millis(20), 0));
  Push(most, Millis(20));
  EXPECT_FALSE(s.Admit(Millis(20), 0));
  EXPECT_TRUE(s.Admit(Millis(30), 0)) << "more time";
  // Only queries due no later are ahead: an urgent arrival jumps the queue.
  EXPECT_TRUE(s.Admit(Millis(19), 0));
  // Two workers drain twice as fast.
  s.AddWorker(1);
  EXPECT_TRUE(s.Admit(Millis(20), 0));
  Make("infaas", 1, /*shed=*/false);
  for (QueryId id = 1; id <= 1000; ++id) Push(id, Millis(20));
  EXPECT_TRUE(s_->Admit(Millis(20), 0)) << "shedding off";
}

TEST_F(OverloadTest, ABackloggedQueueShedsAHeadTooLateForThePlansBatch) {
  ModelScheduler& s = Make("infaas", 1);
  // A head of the same 20 ms budget with 3 ms left (a batch of 4 at most),
  // 60 queries behind it: more than one batch of 8 every 5 ms drains by
  // their deadline.
  s.Push({1, 0, -Millis(17), Millis(3)}, 0);
  for (QueryId id = 2; id <= 61; ++id) Push(id, Millis(20));
  std::vector<FreeSlot> slots{{0, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  EXPECT_TRUE(r.shed.empty()) << "no query lost yet: the policy serves the head";
  EXPECT_EQ(r.batches[0].queries.front().id, 1u);
  // Once one has expired, the model is losing queries: the next late head
  // is shed for a batch of 8.
  s.Push({62, 0, -Millis(20), 0}, 0);
  std::vector<QueryId> expired, cancelled;
  s.Sweep(0, &expired, &cancelled);
  ASSERT_EQ(expired, (std::vector<QueryId>{62}));
  s.Push({1, 0, -Millis(17), Millis(3)}, 0);
  slots = {{0, 1}};
  r = s.Schedule(0, &slots, 1);
  EXPECT_EQ(r.shed, (std::vector<QueryId>{1}));
  ASSERT_EQ(r.batches.size(), 1u);
  EXPECT_EQ(r.batches[0].batch_size, 8);
  EXPECT_EQ(r.batches[0].queries.size(), 8u);
}

// A rate-driven policy (ratefit) picks its subnet from the measured arrival
// rate, so a probe with a synthetic full queue would read its light-load
// choice (the most accurate subnet, the fewest queries per second) as its
// plan and shed under normal load. The probe asks with assume_overload: the
// plan is ratefit's answer past the peak (the fastest subnet's batch 8),
// while the real decision at the same moment still runs the accurate subnet.
TEST_F(OverloadTest, ARateDrivenPolicyIsPlannedAtItsAnswerPastThePeak) {
  ModelScheduler& s = Make("ratefit", 2);
  Push(1, Millis(30));
  const ModelScheduler::Plan plan = s.PlanFor(Millis(30), 0);
  EXPECT_EQ(plan.take, 8);
  EXPECT_NEAR(plan.qps, 2 * 8 / ToSeconds(s.EstimatedLatency(0, 8)), 1e-6);
  std::vector<FreeSlot> slots{{0, 1}, {1, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 2);
  EXPECT_TRUE(r.shed.empty());
  ASSERT_EQ(r.batches.size(), 1u);
  EXPECT_EQ(r.batches[0].subnet_index, 2) << "one arrival in 100 ms: the most accurate subnet";
  // Admission with the peak plan: 150 queued for 30 ms is within 4x what
  // batches of 8 at ~5 ms drain on two workers (planned at the accurate
  // subnet's batch of 8, 18.5 ms, it would be refused).
  for (QueryId id = 2; id <= 151; ++id) Push(id, Millis(30));
  EXPECT_TRUE(s.Admit(Millis(30), 0));
}

TEST_F(OverloadTest, AShortQueueServesALateHeadInASmallBatch) {
  for (bool shed : {true, false}) {
    ModelScheduler& s = Make("infaas", 1, shed);
    s.Push({1, 0, -Millis(17), Millis(3)}, 0);
    for (QueryId id = 2; id <= 4; ++id) Push(id, Millis(20));
    std::vector<FreeSlot> slots{{0, 1}};
    ScheduleResult r = s.Schedule(0, &slots, 1);
    EXPECT_TRUE(r.shed.empty());
    ASSERT_EQ(r.batches.size(), 1u);
    EXPECT_EQ(r.batches[0].queries.front().id, 1u);
    EXPECT_EQ(r.batches[0].batch_size, 4);
  }
  // The backlog above without shedding: the head is served, in a batch of
  // 4 (the EDF spiral's first step).
  ModelScheduler& s = Make("infaas", 1, /*shed=*/false);
  s.Push({1, 0, -Millis(17), Millis(3)}, 0);
  for (QueryId id = 2; id <= 31; ++id) Push(id, Millis(20));
  std::vector<FreeSlot> slots{{0, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  EXPECT_TRUE(r.shed.empty());
  ASSERT_EQ(r.batches.size(), 1u);
  EXPECT_EQ(r.batches[0].batch_size, 4);
}

TEST_F(OverloadTest, AFixedSubnetPolicyPlansWithItsOwnSubnet) {
  Make("clipper+", 1);
  EXPECT_EQ(s_->peak_subnet_index(), 2);  // the most accurate, not the fastest
  Make("maxbatch", 1);
  EXPECT_EQ(s_->peak_subnet_index(), 0);
  EXPECT_EQ(s_->peak_batch_size(), 8);
}

}  // namespace
}  // namespace superserve
