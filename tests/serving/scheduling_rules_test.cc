// The serving core's scheduling and answer rules, driven directly: queue
// bound, lookahead, worker loss and liveness, cancellation, the sweep,
// result ids, model removal, shutdown. They were tested through the router's
// Dispatcher (tests/router/dispatcher_test.cc), which keeps what is its own:
// the gRPC messages, input validation, metrics, the drain's wait and timer.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
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

// Every query of `b` answered OK.
BatchOutcome OkResult(const BatchPlan& b) {
  BatchOutcome o;
  o.batch_id = b.batch_id;
  o.exec = Millis(1);
  for (QueryId id : b.queries) o.outputs.emplace_back(id, nullptr);
  return o;
}

class SchedulingRulesTest : public ::testing::Test {
 protected:
  void Make(const std::string& policy, int lookahead = 1, size_t max_queue = 1000) {
    ServingOptions o;
    o.lookahead = lookahead;
    o.max_queue = max_queue;
    o.heartbeat_interval = Millis(100);
    o.missed_heartbeats = 3;
    core_ = std::make_unique<ServingCore>(o, &clock_);
    AddModel(policy);
  }
  void AddModel(const std::string& policy) {
    auto p = MakePolicy(policy, testing::TwoSubnetProfile(), PolicyConfig());
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(core_->AddModel(testing::TwoSubnetProfile(), *std::move(p)).ok());
  }
  int32_t AddWorker(FakeChannel** channel_out) {
    auto c = std::make_shared<FakeChannel>();
    WorkerRegistration r;
    r.name = "w";
    r.models = {"m"};
    auto id = core_->RegisterWorker(r, c);
    EXPECT_TRUE(id.ok()) << id.status();
    channels_.push_back(c);
    *channel_out = c.get();
    return id.ok() ? *id : -1;
  }
  // The next batch the core sent to `c`, if any.
  static std::optional<BatchPlan> NextBatch(FakeChannel* c) {
    if (c->sent.empty()) return std::nullopt;
    BatchPlan b = std::move(c->sent.front());
    c->sent.pop_front();
    return b;
  }
  // A query that outlives the core (which answers what is pending when it
  // is destroyed).
  FakeHandle& Q() {
    handles_.push_back(std::make_unique<FakeHandle>());
    return *handles_.back();
  }
  void Submit(FakeHandle* q, Nanos deadline) {
    QueryRequest r;
    r.model = "m";
    r.deadline = deadline;
    core_->Submit(q, r);
  }

  SimulatedClock clock_{Seconds(1)};
  std::vector<std::unique_ptr<FakeHandle>> handles_;  // declared before core_: destroyed after it
  std::unique_ptr<ServingCore> core_;
  std::vector<std::shared_ptr<FakeChannel>> channels_;
};

TEST_F(SchedulingRulesTest, QueueFullIsResourceExhausted) {
  Make("fixed-subnet", /*lookahead=*/1, /*max_queue=*/2);
  FakeChannel* c;
  AddWorker(&c);
  std::vector<FakeHandle*> qs;
  for (int i = 0; i < 4; ++i) {
    qs.push_back(&Q());
    Submit(qs.back(), clock_.Now() + Millis(500));
  }
  // The first goes to the worker, two wait, the fourth finds the queue full.
  EXPECT_EQ(qs[0]->answers + qs[1]->answers + qs[2]->answers, 0);
  EXPECT_EQ(qs[3]->answers, 1);
  EXPECT_EQ(qs[3]->status.code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(SchedulingRulesTest, WorkerLossRequeuesFeasibleAndFailsTheRest) {
  Make("fixed-subnet");
  FakeChannel *c0, *c1;
  int32_t w0 = AddWorker(&c0);
  FakeHandle &far = Q(), &near = Q();
  Submit(&far, clock_.Now() + Millis(500));
  auto b0 = NextBatch(c0);
  ASSERT_TRUE(b0.has_value());
  Submit(&near, clock_.Now() + Millis(3));  // worker busy: waits in the queue
  int32_t w1 = AddWorker(&c1);              // takes `near` at once
  auto b1 = NextBatch(c1);
  ASSERT_TRUE(b1.has_value());
  EXPECT_EQ(b1->queries[0], 2u);
  // w0 dies with `far` in flight: re-queued, and w1 gets it when it frees up.
  core_->OnWorkerGone(w0, absl::UnavailableError("test"));
  EXPECT_TRUE(c0->closed);
  EXPECT_EQ(far.answers, 0);
  ASSERT_TRUE(clock_.Advance(Millis(2)).ok());
  core_->OnBatchResult(w1, OkResult(*b1));
  EXPECT_EQ(near.answers, 1);
  auto again = NextBatch(c1);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->queries[0], 1u);
  // Now w1 dies too while `far` is in flight: nobody is left.
  core_->OnWorkerGone(w1, absl::UnavailableError("test"));
  ASSERT_EQ(far.answers, 1);
  EXPECT_EQ(far.status.code(), absl::StatusCode::kUnavailable);
  auto stats = core_->Stats();
  EXPECT_EQ(stats.accepted, stats.answered);
  EXPECT_EQ(stats.requeued, 1);
}

TEST_F(SchedulingRulesTest, InflightQueryPastItsDeadlineIsDeadlineExceededOnWorkerLoss) {
  Make("fixed-subnet");
  FakeChannel *c0, *c1;
  int32_t w0 = AddWorker(&c0);
  AddWorker(&c1);
  FakeHandle& q = Q();
  Submit(&q, clock_.Now() + Millis(5));
  ASSERT_TRUE(NextBatch(c0).has_value());
  ASSERT_TRUE(clock_.Advance(Millis(4)).ok());  // 1 ms left < fastest subnet (2 ms)
  core_->OnWorkerGone(w0, absl::UnavailableError("test"));
  ASSERT_EQ(q.answers, 1);
  EXPECT_EQ(q.status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(SchedulingRulesTest, MissedHeartbeatsMarkAWorkerDead) {
  Make("slackfit");
  FakeChannel *c0, *c1;
  AddWorker(&c0);
  int32_t w1 = AddWorker(&c1);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(clock_.Advance(Millis(100)).ok());
    core_->OnHeartbeat(w1);  // only w1 keeps talking
    core_->Tick();
  }
  EXPECT_TRUE(c0->closed);
  EXPECT_FALSE(c1->closed);
  EXPECT_EQ(core_->Stats().workers_alive, 1);
}

TEST_F(SchedulingRulesTest, LookaheadKeepsKBatchesInFlight) {
  Make("fixed-subnet", /*lookahead=*/2);
  FakeChannel* c;
  AddWorker(&c);
  FakeHandle &a = Q(), &b = Q(), &x = Q();
  Submit(&a, clock_.Now() + Millis(100));
  Submit(&b, clock_.Now() + Millis(100));
  Submit(&x, clock_.Now() + Millis(100));
  int batches = 0;
  while (NextBatch(c).has_value()) ++batches;
  EXPECT_EQ(batches, 2);  // the third waits for a free slot
  EXPECT_EQ(core_->Stats().pending, 3);
}

TEST_F(SchedulingRulesTest, AFailedBatchFailsItsQueriesWithItsStatusAndTheWorkerStaysUsable) {
  Make("fixed-subnet");
  FakeChannel* c;
  int32_t w = AddWorker(&c);
  FakeHandle &q1 = Q(), &q2 = Q();
  Submit(&q1, clock_.Now() + Millis(100));
  auto b = NextBatch(c);
  ASSERT_TRUE(b.has_value());
  BatchOutcome bad;
  bad.batch_id = b->batch_id;
  bad.status = absl::InvalidArgumentError("boom");
  core_->OnBatchResult(w, bad);
  ASSERT_EQ(q1.answers, 1);
  EXPECT_EQ(q1.status.code(), absl::StatusCode::kInvalidArgument);
  Submit(&q2, clock_.Now() + Millis(100));
  auto b2 = NextBatch(c);
  ASSERT_TRUE(b2.has_value());
  core_->OnBatchResult(w, OkResult(*b2));
  EXPECT_TRUE(q2.status.ok());
}

TEST_F(SchedulingRulesTest, InfeasibleQueriesAreDroppedByThePolicy) {
  Make("slackfit");
  FakeChannel* c;
  int32_t w = AddWorker(&c);
  FakeHandle &busy = Q(), &hopeless = Q();
  Submit(&busy, clock_.Now() + Millis(100));
  auto b = NextBatch(c);
  ASSERT_TRUE(b.has_value());
  Submit(&hopeless, clock_.Now() + Millis(2));  // waits: the only worker is busy
  ASSERT_TRUE(clock_.Advance(Millis(2)).ok());
  core_->OnBatchResult(w, OkResult(*b));
  ASSERT_EQ(hopeless.answers, 1);
  EXPECT_EQ(hopeless.status.code(), absl::StatusCode::kDeadlineExceeded);
}

// Past the router's peak queries reach the core late; one with less time
// left than the fastest batch of one (1 ms here) is answered at once and
// counted, instead of waiting in the queue to be dropped or swept.
TEST_F(SchedulingRulesTest, TooLittleSlackOnArrivalIsDeadlineExceededAtOnce) {
  Make("slackfit");
  FakeChannel* c;
  AddWorker(&c);
  FakeHandle &busy = Q(), &late = Q(), &just = Q();
  Submit(&busy, clock_.Now() + Millis(100));
  ASSERT_TRUE(NextBatch(c).has_value());     // the only worker is busy from here on
  Submit(&late, clock_.Now() + Micros(999));  // fastest: subnet 10 at batch 1, 1 ms
  ASSERT_EQ(late.answers, 1);
  EXPECT_EQ(late.status.code(), absl::StatusCode::kDeadlineExceeded) << late.status;
  EXPECT_THAT(std::string(late.status.message()), ::testing::HasSubstr("fastest batch"));
  Submit(&just, clock_.Now() + Millis(1));  // fits exactly: queued
  EXPECT_EQ(just.answers, 0);
  const ServingStats s = core_->Stats();
  EXPECT_EQ(s.late_on_arrival, 1);
  EXPECT_EQ(s.accepted, 2);
  EXPECT_EQ(s.pending, 2);
}

TEST_F(SchedulingRulesTest, CancelledQueuedQueryIsAnsweredAndNeverDispatched) {
  Make("fixed-subnet");
  FakeChannel* c;
  int32_t w = AddWorker(&c);
  FakeHandle &running = Q(), &gone = Q(), &next = Q();
  Submit(&running, clock_.Now() + Millis(100));
  auto b = NextBatch(c);
  ASSERT_TRUE(b.has_value());
  Submit(&gone, clock_.Now() + Millis(100));
  Submit(&next, clock_.Now() + Millis(100));
  core_->OnCancelled(&gone);
  EXPECT_EQ(gone.answers, 0) << "answered when its turn comes, not inside OnCancel";
  core_->OnCancelled(&running);  // on a worker: answered when its batch returns
  EXPECT_EQ(running.answers, 0);
  core_->OnBatchResult(w, OkResult(*b));
  EXPECT_EQ(running.answers, 1);
  auto b2 = NextBatch(c);
  ASSERT_TRUE(b2.has_value());
  ASSERT_EQ(b2->queries.size(), 1u);
  EXPECT_EQ(b2->queries[0], next.query_id) << "the cancelled query was skipped";
  ASSERT_EQ(gone.answers, 1);
  EXPECT_EQ(gone.status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(SchedulingRulesTest, ShutdownAnswersEveryPendingQuery) {
  Make("fixed-subnet");
  FakeChannel* c;
  AddWorker(&c);
  FakeHandle &a = Q(), &b = Q();
  Submit(&a, clock_.Now() + Millis(100));
  Submit(&b, clock_.Now() + Millis(100));
  core_->Shutdown();
  EXPECT_EQ(a.answers, 1);
  EXPECT_EQ(b.answers, 1);
  EXPECT_EQ(b.status.code(), absl::StatusCode::kUnavailable);
}

// --- Hot-path defects (issue 13); each of these failed on the dispatcher
// that preceded the serving core.

TEST_F(SchedulingRulesTest, ResultIdsAreMatchedToTheBatch) {
  Make("fixed-subnet");
  FakeChannel* c;
  int32_t w = AddWorker(&c);
  FakeHandle &first = Q(), &a = Q(), &b = Q(), &later = Q();
  Submit(&first, clock_.Now() + Millis(100));
  auto b0 = NextBatch(c);
  ASSERT_TRUE(b0.has_value());
  Submit(&a, clock_.Now() + Millis(100));
  Submit(&b, clock_.Now() + Millis(100));
  core_->OnBatchResult(w, OkResult(*b0));
  auto b1 = NextBatch(c);  // a and b together
  ASSERT_TRUE(b1.has_value());
  ASSERT_EQ(b1->queries.size(), 2u);
  Submit(&later, clock_.Now() + Millis(100));  // queued: the worker is busy
  // The worker answers a twice, never b, and sends an output for `later`,
  // which is not in this batch.
  BatchOutcome r;
  r.batch_id = b1->batch_id;
  r.exec = Millis(1);
  for (QueryId id : {a.query_id, a.query_id, later.query_id}) r.outputs.emplace_back(id, nullptr);
  core_->OnBatchResult(w, std::move(r));
  ASSERT_EQ(a.answers, 1);
  EXPECT_TRUE(a.status.ok()) << a.status;
  ASSERT_EQ(b.answers, 1) << "a query of the batch without a result still gets its answer";
  EXPECT_EQ(b.status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(b.status.message()), ::testing::HasSubstr("no result"));
  EXPECT_EQ(later.answers, 0) << "a foreign id must not answer a query of another batch";
  auto b2 = NextBatch(c);
  ASSERT_TRUE(b2.has_value());
  EXPECT_EQ(b2->queries[0], later.query_id);
  core_->OnBatchResult(w, OkResult(*b2));
  ASSERT_EQ(later.answers, 1);
  EXPECT_TRUE(later.status.ok());
  auto s = core_->Stats();
  EXPECT_EQ(s.accepted, s.answered);
}

TEST_F(SchedulingRulesTest, ExpiredQueuedQueriesAreAnsweredOnTheTimerWithoutAFreeWorker) {
  Make("fixed-subnet");
  FakeChannel* c;
  AddWorker(&c);
  FakeHandle &running = Q(), &x = Q(), &y = Q();
  Submit(&running, clock_.Now() + Seconds(1));
  ASSERT_TRUE(NextBatch(c).has_value());  // the only worker is now busy for good
  Submit(&x, clock_.Now() + Millis(5));
  Submit(&y, clock_.Now() + Millis(50));
  ASSERT_TRUE(clock_.Advance(Millis(10)).ok());
  core_->Tick();
  ASSERT_EQ(x.answers, 1) << "expired while queued: answered by the sweep";
  EXPECT_EQ(x.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(y.answers, 0);
  EXPECT_EQ(running.answers, 0);
  EXPECT_EQ(core_->Stats().pending, 2);
}

TEST_F(SchedulingRulesTest, DeadQueriesDoNotHoldPlacesInAFullQueue) {
  Make("fixed-subnet", /*lookahead=*/1, /*max_queue=*/2);
  FakeChannel* c;
  AddWorker(&c);
  FakeHandle &running = Q(), &cancelled = Q(), &x = Q(), &y = Q(), &fresh = Q();
  Submit(&running, clock_.Now() + Seconds(1));
  ASSERT_TRUE(NextBatch(c).has_value());  // the only worker is now busy
  Submit(&cancelled, clock_.Now() + Millis(500));
  core_->OnCancelled(&cancelled);
  Submit(&x, clock_.Now() + Millis(5));
  Submit(&y, clock_.Now() + Millis(5));
  EXPECT_EQ(x.answers + y.answers, 0) << "a cancelled entry holds no place";
  ASSERT_TRUE(clock_.Advance(Millis(10)).ok());
  // No Tick in between: three entries in the queue, none alive.
  Submit(&fresh, clock_.Now() + Millis(500));
  EXPECT_EQ(fresh.answers, 0) << fresh.status;
  for (FakeHandle* q : {&cancelled, &x, &y}) {
    ASSERT_EQ(q->answers, 1);
    EXPECT_EQ(q->status.code(), absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_EQ(running.answers, 0);
}

TEST_F(SchedulingRulesTest, CancelledQueuedQueriesAreAnsweredOnTheTimer) {
  Make("fixed-subnet");
  FakeChannel* c;
  AddWorker(&c);
  FakeHandle &running = Q(), &gone = Q();
  Submit(&running, clock_.Now() + Seconds(1));
  ASSERT_TRUE(NextBatch(c).has_value());
  Submit(&gone, clock_.Now() + Seconds(1));
  core_->OnCancelled(&gone);
  EXPECT_EQ(gone.answers, 0) << "never inside OnCancelled";
  ASSERT_TRUE(clock_.Advance(Millis(1)).ok());
  core_->Tick();
  ASSERT_EQ(gone.answers, 1) << "answered by the sweep, not when a worker frees up";
  EXPECT_EQ(gone.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(core_->Stats().cancelled, 1);
}

TEST_F(SchedulingRulesTest, RemovingAModelAnswersQueuedAndInflightUnavailableAndFreesIt) {
  Make("fixed-subnet");
  FakeChannel* c;
  int32_t w = AddWorker(&c);
  FakeHandle &inflight = Q(), &queued = Q();
  Submit(&inflight, clock_.Now() + Seconds(1));
  auto b0 = NextBatch(c);
  ASSERT_TRUE(b0.has_value());
  Submit(&queued, clock_.Now() + Seconds(1));
  ASSERT_TRUE(core_->RemoveModel("m").ok());
  ASSERT_EQ(inflight.answers, 1) << "answered at removal, not when the worker returns";
  EXPECT_EQ(inflight.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(inflight.status.message()), ::testing::HasSubstr("unregistered"));
  ASSERT_EQ(queued.answers, 1);
  EXPECT_EQ(queued.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(core_->ListModels().empty());
  EXPECT_EQ(core_->Stats().pending, 0);
  EXPECT_EQ(core_->RemoveModel("m").code(), absl::StatusCode::kNotFound);
  // Served again: the worker attaches once it reports it loaded anew, but it
  // is still busy with the orphaned batch until that returns (its result is
  // ignored).
  AddModel("fixed-subnet");
  ASSERT_TRUE(core_->AttachWorker(w, "m").ok());
  FakeHandle& again = Q();
  Submit(&again, clock_.Now() + Seconds(1));
  EXPECT_FALSE(NextBatch(c).has_value());
  core_->OnBatchResult(w, OkResult(*b0));
  EXPECT_EQ(inflight.answers, 1);
  auto b1 = NextBatch(c);
  ASSERT_TRUE(b1.has_value());
  core_->OnBatchResult(w, OkResult(*b1));
  ASSERT_EQ(again.answers, 1);
  EXPECT_TRUE(again.status.ok()) << again.status;
}

}  // namespace
}  // namespace superserve
