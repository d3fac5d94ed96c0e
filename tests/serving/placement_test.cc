// Placement in the serving core (issue 43): workers with a memory budget
// hold only some models; the core loads a model where it costs least,
// evicts the least demanded idle ones, and never dispatches a model's batch
// to a worker that does not hold it. Hand-derived, on the simulated clock.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "serving/serving_core.h"
#include "tests/baselines_registered.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

using testing::FakeChannel;
using testing::FakeHandle;

using testing::OkOutcome;

// Models named as given, 60 bytes each (so one fits a 100-byte worker),
// loading in `load`; the "hand" profile (fastest subnet 1 ms at batch 1).
class PlacementTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& models, Nanos load, int workers,
             int64_t budget = 100, int32_t replicate_queue = 0) {
    ServingOptions o;
    o.missed_heartbeats = 0;
    o.batch_grace = Millis(20);
    o.replicate_queue = replicate_queue;  // 0 here but in the replica test
    core_ = std::make_unique<ServingCore>(o, &clock_);
    for (const std::string& name : models) {
      ModelProfile p = testing::ThreeSubnetProfile();
      p.model = name;
      p.memory_bytes = 60;
      p.load_time = load;
      ASSERT_TRUE(core_->AddModel(p, *MakePolicy("fixed-subnet", p, PolicyConfig())).ok());
    }
    for (int i = 0; i < workers; ++i) {
      auto c = std::make_shared<FakeChannel>();
      c->budgeted = true;
      WorkerRegistration r;
      r.name = "w";
      r.models = models;
      r.memory_bytes = budget;
      c->id = *core_->RegisterWorker(r, c);
      channels_.push_back(c);
    }
  }
  FakeHandle& Submit(const std::string& model, Nanos slo) {
    handles_.push_back(std::make_unique<FakeHandle>());
    QueryRequest r;
    r.model = model;
    r.deadline = clock_.Now() + slo;
    core_->Submit(handles_.back().get(), r);
    return *handles_.back();
  }
  void Loaded(int w, const std::string& model) {
    ASSERT_TRUE(channels_[w]->FinishLoad(model)) << model;
    core_->OnModelLoaded(channels_[w]->id, model, absl::OkStatus());
  }
  void Answer(int w) {
    ASSERT_FALSE(channels_[w]->sent.empty());
    BatchPlan b = std::move(channels_[w]->sent.front());
    channels_[w]->sent.pop_front();
    core_->OnBatchResult(channels_[w]->id, OkOutcome(b));
  }
  void Advance(Nanos d) { ASSERT_TRUE(clock_.Advance(d).ok()); }
  void TearDown() override {
    for (const auto& c : channels_) {
      EXPECT_EQ(c->sent_not_resident, 0) << c->name;
      EXPECT_EQ(c->unloaded_in_flight, 0) << c->name;
      EXPECT_EQ(c->unloaded_not_held, 0) << c->name;
    }
  }

  SimulatedClock clock_{Seconds(1)};
  std::vector<std::shared_ptr<FakeChannel>> channels_;
  std::vector<std::unique_ptr<FakeHandle>> handles_;  // outlive the core
  std::unique_ptr<ServingCore> core_;
};

TEST_F(PlacementTest, AQueryWaitsForTheLoadAndRunsOnlyWhereTheModelIsResident) {
  Start({"a", "b"}, Millis(20), 2);
  FakeHandle& q = Submit("a", Millis(100));
  // Resident nowhere: worker 0 (both empty, lowest id) loads it in 20 ms.
  ASSERT_EQ(channels_[0]->loads.size(), 1u);
  EXPECT_EQ(channels_[0]->loads[0].first, "a");
  EXPECT_EQ(channels_[0]->loads[0].second, Millis(20));
  EXPECT_TRUE(channels_[1]->loads.empty());
  EXPECT_TRUE(channels_[0]->sent.empty() && channels_[1]->sent.empty()) << "nothing resident";
  EXPECT_EQ(q.answers, 0);
  // A second query for "a" waits for the same load.
  FakeHandle& q2 = Submit("a", Millis(100));
  EXPECT_EQ(core_->Stats().loads, 1);
  Advance(Millis(20));
  Loaded(0, "a");
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  EXPECT_EQ(channels_[0]->sent[0].model, "a");
  EXPECT_EQ(channels_[0]->sent[0].queries.size(), 2u);
  // "b" does not fit beside "a" (60 + 60 > 100): worker 1, which is empty,
  // loads it rather than worker 0 evicting "a" (busy anyway).
  FakeHandle& q3 = Submit("b", Millis(100));
  ASSERT_EQ(channels_[1]->loads.size(), 1u);
  EXPECT_EQ(channels_[1]->loads[0].first, "b");
  EXPECT_TRUE(channels_[0]->unloads.empty());
  Answer(0);
  EXPECT_TRUE(q.in_slo() || (q.answers == 1 && q.status.ok()));
  EXPECT_EQ(q2.answers, 1);
  // Worker 0 is free but does not hold "b": q3 waits for worker 1's load.
  EXPECT_TRUE(channels_[0]->sent.empty());
  EXPECT_EQ(q3.answers, 0);
  Advance(Millis(20));
  Loaded(1, "b");
  ASSERT_EQ(channels_[1]->sent.size(), 1u);
  Answer(1);
  EXPECT_EQ(q3.answers, 1);
  EXPECT_TRUE(q3.status.ok());
  // Both resident now: later queries run at once, each on its own holder.
  Submit("a", Millis(100));
  Submit("b", Millis(100));
  EXPECT_EQ(channels_[0]->sent.size(), 1u);
  EXPECT_EQ(channels_[1]->sent.size(), 1u);
  EXPECT_EQ(core_->Stats().loads, 2);
  EXPECT_EQ(core_->Stats().unloads, 0);
}

TEST_F(PlacementTest, ALoadThatCompletesTooLateAnswersDeadlineExceededAtOnce) {
  Start({"a"}, Millis(50), 2);
  // Load ready at 50 ms, fastest subnet 1 ms: a 30 ms SLO cannot be met.
  FakeHandle& early = Submit("a", Millis(30));
  EXPECT_EQ(early.answers, 1);
  EXPECT_EQ(early.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(core_->Stats().loads, 1) << "the load starts anyway: demand is there";
  FakeHandle& ok = Submit("a", Millis(100));      // due at 100 ms
  FakeHandle& tight = Submit("a", Millis(58));    // due at 58: fits (50 + 1)
  FakeHandle& hopeless = Submit("a", Millis(50)); // due at 50: 50 + 1 > 50
  EXPECT_EQ(ok.answers, 0);
  EXPECT_EQ(tight.answers, 0);
  EXPECT_EQ(hopeless.answers, 1);
  EXPECT_EQ(hopeless.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(core_->Stats().load_too_late, 2);
  // Worker 0 dies mid-load at 10 ms: worker 1 loads it, ready at 60 ms.
  // "tight" (due at 58) can no longer make it: answered at once; "ok" waits.
  Advance(Millis(10));
  core_->OnWorkerGone(channels_[0]->id, absl::UnavailableError("gone"));
  EXPECT_EQ(tight.answers, 1);
  EXPECT_EQ(tight.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ok.answers, 0);
  ASSERT_EQ(channels_[1]->loads.size(), 1u);
  EXPECT_EQ(core_->Stats().load_too_late, 3);
  // Its late report of the load is ignored (the worker is gone).
  channels_[0]->FinishLoad("a");
  core_->OnModelLoaded(channels_[0]->id, "a", absl::OkStatus());
  EXPECT_TRUE(channels_[0]->sent.empty());
  Advance(Millis(50));
  Loaded(1, "a");
  Answer(1);
  EXPECT_EQ(ok.answers, 1);
  EXPECT_TRUE(ok.status.ok());
  const ServingStats s = core_->Stats();
  EXPECT_EQ(s.pending, 0);
  EXPECT_EQ(s.accepted, s.answered);
}

TEST_F(PlacementTest, EvictionPassesOverAModelWithABatchInFlight) {
  Start({"a", "b", "c"}, Millis(10), 2);
  // "a" on worker 0 (one query), "c" on worker 1 (three queries).
  Submit("a", Millis(100));
  Advance(Millis(10));
  Loaded(0, "a");
  ASSERT_EQ(channels_[0]->sent.size(), 1u);  // a's batch stays in flight
  for (int i = 0; i < 3; ++i) Submit("c", Millis(100));
  ASSERT_EQ(channels_[1]->loads.size(), 1u);
  Advance(Millis(10));
  Loaded(1, "c");
  Answer(1);
  // "b" needs a victim. "a" has less demand (1 < 3) but a batch in flight:
  // "c" on worker 1 is evicted instead.
  FakeHandle& b = Submit("b", Millis(100));
  EXPECT_TRUE(channels_[0]->unloads.empty());
  ASSERT_EQ(channels_[1]->unloads, std::vector<std::string>{"c"});
  ASSERT_EQ(channels_[1]->loads.size(), 2u);
  EXPECT_EQ(channels_[1]->loads[1].first, "b");
  // The in-flight batch of "a" is answered as usual.
  Answer(0);
  Advance(Millis(10));
  Loaded(1, "b");
  Answer(1);
  EXPECT_TRUE(b.status.ok());
  // A query for "c" now: resident nowhere, and "a" (idle, demand ~1) is the
  // least demanded victim: evicted from worker 0.
  Submit("c", Millis(100));
  EXPECT_EQ(channels_[0]->unloads, std::vector<std::string>{"a"});
  EXPECT_EQ(core_->Stats().unloads, 2);
}

TEST_F(PlacementTest, NoRoomAnywhereWaitsForTheBatchInFlightThenEvicts) {
  Start({"a", "b"}, Millis(10), 1);
  FakeHandle& a = Submit("a", Millis(100));
  Advance(Millis(10));
  Loaded(0, "a");
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  // The only worker holds "a", busy: "b" cannot be loaded now, but can once
  // a's batch ends (0 + 10 ms load + 1 ms run fit b's 100 ms).
  FakeHandle& b = Submit("b", Millis(100));
  EXPECT_EQ(b.answers, 0) << b.status;
  EXPECT_TRUE(channels_[0]->unloads.empty());
  ASSERT_EQ(channels_[0]->loads.size(), 1u);
  Advance(Millis(1));
  Answer(0);
  EXPECT_TRUE(a.status.ok());
  // "a" is idle with nothing queued: evicted for "b".
  EXPECT_EQ(channels_[0]->unloads, std::vector<std::string>{"a"});
  ASSERT_EQ(channels_[0]->loads.size(), 2u);
  EXPECT_EQ(channels_[0]->loads[1].first, "b");
  Advance(Millis(10));
  Loaded(0, "b");
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  Answer(0);
  EXPECT_EQ(b.answers, 1);
  EXPECT_TRUE(b.status.ok()) << b.status;
}

TEST_F(PlacementTest, AQueryWaitingForRoomExpiresIfNoneFreesInTime) {
  Start({"a", "b"}, Millis(10), 1);
  Submit("a", Millis(500));
  Advance(Millis(10));
  Loaded(0, "a");
  FakeHandle& b = Submit("b", Millis(50));
  EXPECT_EQ(b.answers, 0);
  Advance(Millis(51));  // a's batch still runs
  core_->Tick();
  EXPECT_EQ(b.answers, 1);
  EXPECT_EQ(b.status.code(), absl::StatusCode::kDeadlineExceeded) << b.status;
  EXPECT_TRUE(channels_[0]->unloads.empty());
}

TEST_F(PlacementTest, AModelNoBudgetCanHoldIsUnavailableAtOnce) {
  Start({"a"}, Millis(10), 2, /*budget=*/50);  // 60 bytes fit neither worker
  FakeHandle& q = Submit("a", Millis(100));
  EXPECT_EQ(q.answers, 1);
  EXPECT_EQ(q.status.code(), absl::StatusCode::kUnavailable) << q.status;
  EXPECT_TRUE(channels_[0]->loads.empty() && channels_[1]->loads.empty());
}

TEST_F(PlacementTest, AFailedLoadIsRetriedElsewhereOrAnswered) {
  Start({"a"}, Millis(10), 2);
  FakeHandle& q = Submit("a", Millis(100));
  ASSERT_EQ(channels_[0]->loads.size(), 1u);
  core_->OnModelLoaded(channels_[0]->id, "a", absl::InternalError("out of memory"));
  channels_[0]->loading.clear();
  // Retried at once, the query still waiting: worker 0's engine is busy
  // until the failed load's planned end (10 ms), so worker 1 loads it.
  EXPECT_EQ(channels_[0]->loads.size(), 1u);
  ASSERT_EQ(channels_[1]->loads.size(), 1u);
  EXPECT_EQ(q.answers, 0);
  Advance(Millis(10));
  Loaded(1, "a");
  Answer(1);
  EXPECT_TRUE(q.status.ok());
  // No live worker left to load it: UNAVAILABLE at once.
  core_->OnWorkerGone(channels_[0]->id, absl::UnavailableError("gone"));
  core_->OnWorkerGone(channels_[1]->id, absl::UnavailableError("gone"));
  FakeHandle& none = Submit("a", Millis(100));
  EXPECT_EQ(none.status.code(), absl::StatusCode::kUnavailable);
}

TEST_F(PlacementTest, ADeepQueueLoadsASecondReplicaThatEvictsOnlyColderModels) {
  Start({"a", "b"}, Millis(10), 2, 100, /*replicate_queue=*/4);
  // "b" on worker 0, demand 10, all answered.
  for (int i = 0; i < 10; ++i) Submit("b", Millis(1000));
  Advance(Millis(10));
  Loaded(0, "b");
  while (!channels_[0]->sent.empty()) Answer(0);
  // "a" on worker 1; its first batch stays in flight while queries queue.
  Submit("a", Millis(1000));
  Advance(Millis(10));
  Loaded(1, "a");
  ASSERT_EQ(channels_[1]->sent.size(), 1u);
  // 5 queued > 4 per replica, but a replica would have to evict "b"
  // (demand ~10) for "a" (demand ~6): no load.
  for (int i = 0; i < 5; ++i) Submit("a", Millis(1000));
  EXPECT_EQ(channels_[0]->loads.size(), 1u);
  EXPECT_TRUE(channels_[0]->unloads.empty());
  // Six more: "a" (~12) is now warmer than "b": worker 0 swaps it in.
  for (int i = 0; i < 6; ++i) Submit("a", Millis(1000));
  ASSERT_EQ(channels_[0]->loads.size(), 2u);
  EXPECT_EQ(channels_[0]->loads[1].first, "a");
  EXPECT_EQ(channels_[0]->unloads, std::vector<std::string>{"b"});
  Advance(Millis(10));
  Loaded(0, "a");
  EXPECT_EQ(channels_[0]->sent.size(), 1u) << "the replica takes queued queries at once";
  EXPECT_EQ(core_->Stats().loads, 3);
}

TEST_F(PlacementTest, WorkersWithoutABudgetKeepEveryModelAsBefore) {
  Start({"a", "b"}, Millis(20), 0);
  auto c = std::make_shared<FakeChannel>();
  WorkerRegistration r;
  r.models = {"a", "b"};
  const int32_t id = *core_->RegisterWorker(r, c);
  FakeHandle& q = Submit("b", Millis(100));
  EXPECT_TRUE(c->loads.empty());
  ASSERT_EQ(c->sent.size(), 1u);
  core_->OnBatchResult(id, OkOutcome(c->sent.front()));
  EXPECT_TRUE(q.status.ok());
  EXPECT_EQ(core_->Stats().loads, 0);
}

}  // namespace
}  // namespace superserve
