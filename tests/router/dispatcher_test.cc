// The Dispatcher with in-memory queries and worker connections on a simulated
// clock: every status code, exactly-once answers, re-queueing on worker loss.
#include "router/dispatcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/tensor_codec.h"
#include "google/protobuf/unknown_field_set.h"
#include "policies/policy.h"
#include "policies/policy_factory.h"
#include "tests/baselines_registered.h"
#include "tests/policies/policy_test_util.h"
#include "tests/router/engine_test_util.h"
#include "tests/test_util/router_fakes.h"

namespace superserve {
namespace {

using testing::FakeConnection;
using testing::FakeQuery;

v1::BatchResult OkResult(const v1::Batch& b, int64_t exec_us = 1000) {
  v1::BatchResult r;
  r.set_batch_id(b.batch_id());
  r.set_exec_us(exec_us);
  for (const auto& q : b.queries()) {
    auto* qr = r.add_results();
    qr->set_query_id(q.query_id());
    EncodeTensor(MakeFloatTensor({3}, std::vector<float>{0, 1, 0}), qr->mutable_output());
  }
  return r;
}

class DispatcherTest : public ::testing::Test {
 protected:
  void Make(const std::string& policy, int lookahead = 1, size_t max_queue = 1000) {
    DispatcherOptions o;
    o.policy = policy;
    o.serving.lookahead = lookahead;
    o.serving.max_queue = max_queue;
    o.run_timer_thread = false;
    o.serving.heartbeat_interval = Millis(100);
    o.serving.missed_heartbeats = 3;
    d_ = std::make_unique<Dispatcher>(o, &clock_, &metrics_);
    ASSERT_TRUE(d_->AddModel(testing::TwoSubnetProfile()).ok());
  }
  int32_t AddWorker(FakeConnection** conn_out) {
    auto conn = std::make_shared<FakeConnection>();
    v1::RegisterWorker hello;
    hello.set_worker_id("w");
    hello.add_models("m");
    auto id = d_->RegisterWorker(hello, conn);
    EXPECT_TRUE(id.ok());
    EXPECT_FALSE(conn->sent.empty());
    EXPECT_TRUE(conn->sent.front()->has_ack()) << "the ack must precede any batch";
    conns_.push_back(conn);
    *conn_out = conn.get();
    return *id;
  }

  void Result(int32_t worker, v1::BatchResult r) { d_->OnBatchResult(worker, &r); }

  // A query that outlives the dispatcher (which answers what is pending when
  // it is destroyed).
  FakeQuery& Q(std::string model = "m", std::vector<int64_t> shape = {2}) {
    queries_.push_back(std::make_unique<FakeQuery>(model, shape));
    return *queries_.back();
  }

  SimulatedClock clock_{Seconds(1)};
  RouterMetrics metrics_;
  std::vector<std::unique_ptr<FakeQuery>> queries_;  // declared before d_: destroyed after it
  std::unique_ptr<Dispatcher> d_;
  std::vector<std::shared_ptr<FakeConnection>> conns_;
};

TEST_F(DispatcherTest, RejectsUnknownModelBadShapeAndNoWorker) {
  Make("slackfit");
  FakeQuery &unknown = Q("nope"), &bad_shape = Q("m", {3}), &no_worker = Q();
  d_->Submit(&unknown, clock_.Now() + Millis(50));
  d_->Submit(&bad_shape, clock_.Now() + Millis(50));
  d_->Submit(&no_worker, clock_.Now() + Millis(50));
  EXPECT_EQ(unknown.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_shape.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_shape.status.message()), ::testing::HasSubstr("shape"));
  EXPECT_EQ(no_worker.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(unknown.answers + bad_shape.answers + no_worker.answers, 3);
}

TEST_F(DispatcherTest, DispatchesWithControlTupleAndAnswersWithServingSubnet) {
  Make("fixed-subnet");  // fixed_subnet_id -1: the most accurate subnet (id 11)
  FakeConnection* conn;
  int32_t w = AddWorker(&conn);
  FakeQuery& q = Q();
  d_->Submit(&q, clock_.Now() + Millis(50));
  auto batch = conn->NextBatch();
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->batch().model(), "m");
  EXPECT_EQ(batch->batch().control().subnet_id(), 11);
  ASSERT_EQ(batch->batch().queries_size(), 1);
  EXPECT_EQ(batch->batch().queries(0).input().data(), q.request().input().data());
  EXPECT_EQ(q.answers, 0);
  ASSERT_TRUE(clock_.Advance(Millis(3)).ok());
  Result(w, OkResult(batch->batch(), 2500));
  ASSERT_EQ(q.answers, 1);
  EXPECT_TRUE(q.status.ok()) << q.status;
  EXPECT_EQ(q.response_.served_by().subnet_id(), 11);
  EXPECT_DOUBLE_EQ(q.response_.served_by().accuracy(), 80);
  EXPECT_EQ(q.response_.batch_size(), 1);
  EXPECT_EQ(q.response_.exec_us(), 2500);
  EXPECT_EQ(q.response_.output().data().size(), 12u);
  // A duplicate result (e.g. after a re-queue) must not answer twice.
  Result(w, OkResult(batch->batch()));
  EXPECT_EQ(q.answers, 1);
}

// Fields the router does not know are not validated: a client padded a
// valid input with 40 MiB of them, the Tensor went to the worker whole, and
// two such queries in one batch overflowed the worker link's 64 MiB message
// limit: the worker was dropped, with the other clients' queries in that
// batch (repro-9).
TEST_F(DispatcherTest, UnknownFieldsOfAnInputAreNotForwardedToTheWorker) {
  Make("fixed-subnet");
  FakeConnection* conn;
  int32_t w = AddWorker(&conn);
  FakeQuery& q = Q();
  v1::Tensor* input = q.request_.mutable_input();
  input->GetReflection()->MutableUnknownFields(input)->AddLengthDelimited(
      15, std::string(1 << 20, 'x'));
  ASSERT_GT(q.request_.ByteSizeLong(), 1u << 20);
  d_->Submit(&q, clock_.Now() + Millis(50));
  auto batch = conn->NextBatch();
  ASSERT_NE(batch, nullptr);
  ASSERT_EQ(batch->batch().queries_size(), 1);
  const v1::Tensor& sent = batch->batch().queries(0).input();
  EXPECT_TRUE(sent.GetReflection()->GetUnknownFields(sent).empty());
  EXPECT_LT(batch->ByteSizeLong(), 1024u);
  EXPECT_EQ(batch->batch().queries(0).input().data(), q.request().input().data());
  Result(w, OkResult(batch->batch()));
  EXPECT_EQ(q.answers, 1);
  EXPECT_TRUE(q.status.ok()) << q.status;
}

TEST_F(DispatcherTest, AModelWhoseBatchesCannotReachAWorkerIsRefused) {
  Make("slackfit");
  // 4 MiB inputs: a batch of 128 is 512 MiB, over the worker link's message
  // limit; before, such a batch broke the link and dropped the worker.
  ModelProfile big = testing::TwoSubnetProfile();
  big.model = "big";
  big.input_shape = {1, 1024, 1024};
  big.batch_sizes = {32, 64, 128};
  absl::Status s = d_->AddModel(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("the largest batch size that fits is 32"));
  EXPECT_TRUE(d_->ListModels().size() == 1) << "only the test model is served";
  big.batch_sizes = {8, 16, 32};
  EXPECT_TRUE(d_->AddModel(big).ok());
}

// The worker's error and its code become the queries' status (the rest of
// the rule, the worker staying usable, is the core's:
// tests/serving/scheduling_rules_test.cc).
TEST_F(DispatcherTest, AWorkersErrorAndItsCodeAreTheQueriesStatus) {
  Make("fixed-subnet");
  FakeConnection* c;
  int32_t w = AddWorker(&c);
  FakeQuery& q1 = Q();
  d_->Submit(&q1, clock_.Now() + Millis(100));
  auto b = c->NextBatch();
  ASSERT_NE(b, nullptr);
  v1::BatchResult bad;
  bad.set_batch_id(b->batch().batch_id());
  bad.set_error("boom");
  bad.set_error_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
  Result(w, bad);
  ASSERT_EQ(q1.answers, 1);
  EXPECT_EQ(q1.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(q1.status.message()), ::testing::HasSubstr("boom"));
}

// A drop as the router counts it in its metrics (the drop itself is the
// core's rule: tests/serving/scheduling_rules_test.cc).
TEST_F(DispatcherTest, InfeasibleQueriesAreDroppedByThePolicy) {
  Make("slackfit");
  FakeConnection* c;
  int32_t w = AddWorker(&c);
  FakeQuery &busy = Q(), &hopeless = Q();
  d_->Submit(&busy, clock_.Now() + Millis(100));
  auto b = c->NextBatch();
  d_->Submit(&hopeless, clock_.Now() + Millis(2));  // waits: the only worker is busy
  ASSERT_TRUE(clock_.Advance(Millis(2)).ok());
  Result(w, OkResult(b->batch()));
  ASSERT_EQ(hopeless.answers, 1);
  EXPECT_EQ(hopeless.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(metrics_.Scrape(),
              ::testing::HasSubstr("superserve_queries_total{model=\"m\",status=\"deadline_exceeded\"} 1"));
}

TEST_F(DispatcherTest, DrainServesWhatIsQueuedAndRefusesNewQueries) {
  Make("fixed-subnet");
  FakeConnection* c;
  int32_t w = AddWorker(&c);
  FakeQuery &running = Q(), &queued = Q(), &refused = Q();
  d_->Submit(&running, clock_.Now() + Seconds(10));
  d_->Submit(&queued, clock_.Now() + Seconds(10));
  auto b0 = c->NextBatch();
  ASSERT_NE(b0, nullptr);
  // The worker answers from another thread while Drain waits.
  std::thread worker([&] {
    absl::SleepFor(absl::Milliseconds(30));
    d_->Submit(&refused, clock_.Now() + Seconds(10));
    Result(w, OkResult(b0->batch()));
    auto b1 = c->NextBatch();
    if (b1 != nullptr) Result(w, OkResult(b1->batch()));
  });
  EXPECT_TRUE(d_->Drain(Seconds(5)));
  worker.join();
  EXPECT_TRUE(running.status.ok()) << running.status;
  EXPECT_TRUE(queued.status.ok()) << queued.status;
  ASSERT_EQ(refused.answers, 1);
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kUnavailable);
  // A query nobody answers: the drain gives up after its timeout.
  FakeQuery& stuck = Q();
  d_->Submit(&stuck, clock_.Now() + Seconds(10));  // refused: draining
  EXPECT_EQ(stuck.answers, 1);
}

TEST_F(DispatcherTest, DrainTimesOutWhenAWorkerNeverAnswers) {
  Make("fixed-subnet");
  FakeConnection* c;
  AddWorker(&c);
  FakeQuery& q = Q();
  d_->Submit(&q, clock_.Now() + Seconds(10));
  ASSERT_NE(c->NextBatch(), nullptr);
  EXPECT_FALSE(d_->Drain(Millis(30)));
  EXPECT_EQ(q.answers, 0);
  d_->Shutdown();
  ASSERT_EQ(q.answers, 1);
  EXPECT_EQ(q.status.code(), absl::StatusCode::kUnavailable);
}

// A removed model's series leave /metrics with it (what removal answers and
// frees is the core's rule: tests/serving/scheduling_rules_test.cc).
TEST_F(DispatcherTest, RemovingAModelRemovesItsSeries) {
  Make("fixed-subnet");
  FakeConnection* c;
  AddWorker(&c);
  FakeQuery &inflight = Q(), &queued = Q();
  d_->Submit(&inflight, clock_.Now() + Seconds(1));
  ASSERT_NE(c->NextBatch(), nullptr);
  d_->Submit(&queued, clock_.Now() + Seconds(1));
  EXPECT_THAT(metrics_.Scrape(),
              ::testing::HasSubstr("superserve_batch_size_count{model=\"m\"} 1"));
  ASSERT_TRUE(d_->RemoveModel("m").ok());
  // Its series leave /metrics with it, the answers given at removal included.
  EXPECT_THAT(metrics_.Scrape(), ::testing::Not(::testing::HasSubstr("model=\"m\"")));
  EXPECT_EQ(inflight.answers + queued.answers, 2);
}

// An unregister drains on the core's event (ServingCore::CloseModel's
// on_drained), unlisted meanwhile: the query on the worker is served, and the result that
// drains the model removes it and frees it on the worker, with the
// unregister's 60 s timeout far off.
TEST_F(DispatcherTest, UnregisterRemovesTheModelOnTheDrainedEvent) {
  Make("fixed-subnet");
  FakeConnection* c;
  const int32_t w = AddWorker(&c);
  FakeQuery& inflight = Q();
  d_->Submit(&inflight, clock_.Now() + Seconds(1));
  std::unique_ptr<v1::RouterMessage> batch = c->NextBatch();
  ASSERT_NE(batch, nullptr);
  absl::Status unregistered = absl::UnknownError("not returned");
  std::thread t([&] { unregistered = d_->lifecycle().Unregister("m", 0, Seconds(60)); });
  while (d_->lifecycle().StateOf("m") != ModelLifecycle::State::kDraining) {
    std::this_thread::yield();
  }
  // Draining: no longer listed or found as served (it takes no new query).
  EXPECT_TRUE(d_->ListModels().empty());
  EXPECT_EQ(d_->FindModel("m", 0).status().code(), absl::StatusCode::kNotFound);
  // Before or after the close: either way the model drains on this result.
  Result(w, OkResult(batch->batch()));
  t.join();
  EXPECT_TRUE(unregistered.ok()) << unregistered;
  EXPECT_TRUE(inflight.status.ok()) << inflight.status;
  EXPECT_TRUE(d_->ListModels().empty());
  EXPECT_EQ(d_->lifecycle().StateOf("m"), std::nullopt);
  bool unloaded = false;
  for (const auto& m : c->sent) {
    unloaded |= m->has_unload_model() && m->unload_model().model() == "m";
  }
  EXPECT_TRUE(unloaded);
}

// Every source's model gets the workers-needed advice's profile: one
// registered at run time (superserve-admin, the poller, a new version) had
// none, so its superserve_workers_needed series never appeared.
TEST_F(DispatcherTest, AModelRegisteredAtRunTimeGetsTheWorkersNeededAdvice) {
  Make("fixed-subnet");
  auto conn = std::make_shared<FakeConnection>();
  v1::RegisterWorker hello;
  hello.set_worker_id("w");
  auto w = d_->RegisterWorker(hello, conn);
  ASSERT_TRUE(w.ok()) << w.status();
  HotModels::Outcome out = d_->lifecycle().Register(
      testing::EmulatedRepo() + "/emu", "emu", /*timeout=*/0);
  ASSERT_TRUE(out.status.ok()) << out.status;
  v1::ModelLoaded loaded;
  loaded.set_model("emu");
  d_->OnModelLoaded(*w, loaded);
  ASSERT_EQ(d_->lifecycle().StateOf("emu"), ModelLifecycle::State::kServing);
  const std::string scrape = metrics_.Scrape();
  EXPECT_THAT(scrape, ::testing::HasSubstr("superserve_workers_needed{model=\"m\"}"));
  EXPECT_THAT(scrape, ::testing::HasSubstr("superserve_workers_needed{model=\"emu\"}"));
}

// Reads of a query's request block until the test lets each one through.
class GatedQuery : public FakeQuery {
 public:
  const v1::InferRequest& request() const override {
    absl::MutexLock lock(&mu_);
    ++waiting_;
    mu_.Await(absl::Condition(
        +[](int* permits) { return *permits > 0; }, &permits_));
    --permits_;
    --waiting_;
    return FakeQuery::request();
  }
  void Permit() {
    absl::MutexLock lock(&mu_);
    ++permits_;
  }
  bool WaitUntilBlocked(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(+[](int* waiting) { return *waiting > 0; }, &waiting_), timeout);
  }

 private:
  mutable absl::Mutex mu_;
  mutable int permits_ = 0;
  mutable int waiting_ = 0;
};

TEST_F(DispatcherTest, ReadingAQueryHoldsNoLockOtherQueriesNeed) {
  Make("fixed-subnet");
  FakeConnection* c;
  AddWorker(&c);
  queries_.push_back(std::make_unique<GatedQuery>());
  GatedQuery& slow = static_cast<GatedQuery&>(*queries_.back());
  std::thread client([&] { d_->Submit(&slow, clock_.Now() + Seconds(1)); });
  // Let the dispatcher read the request as often as it wants; every time it
  // is blocked inside a read, another client must still get through.
  for (int reads = 0; reads < 4; ++reads) {
    if (!slow.WaitUntilBlocked(absl::Milliseconds(500))) break;  // done reading
    std::atomic<bool> done{false};
    std::thread other([&] {
      d_->Stats();
      done = true;
    });
    for (int i = 0; i < 200 && !done; ++i) absl::SleepFor(absl::Milliseconds(10));
    EXPECT_TRUE(done) << "read " << reads + 1 << " of the request held the dispatcher's lock";
    slow.Permit();
    other.join();
  }
  client.join();
  auto b = c->NextBatch();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->batch().queries(0).input().data(), slow.request_.input().data());
}

// Holds each query for kHold after its arrival, then dispatches it alone: a
// deferred dispatch (Symphony's), which the core asks the timer to fire.
class HoldingPolicy final : public Policy {
 public:
  static constexpr Nanos kHold = Millis(1);
  std::string_view name() const override { return "test-hold"; }
  Decision Decide(const SchedulingContext& ctx) override {
    if (ctx.queue.empty()) return Decision::Idle();
    const Nanos due = ctx.queue.Head().arrival + kHold;
    if (ctx.now < due || ctx.free_workers.empty()) return Decision::WakeAt(due);
    Decision d;
    d.kind = Decision::Kind::kDispatch;
    d.take = 1;
    d.batch_size = 1;
    d.subnet_index = 0;
    d.worker = ctx.free_workers.front();
    return d;
  }
};

// Runs `on_batch` once, inside the Send of the first batch it gets: from the
// core's Apply, after the core released its lock and before its caller
// (Dispatcher::Tick) returns.
class HookedConnection : public FakeConnection {
 public:
  void Send(std::unique_ptr<v1::RouterMessage> m) override {
    const bool batch = m->has_batch();
    FakeConnection::Send(std::move(m));
    if (batch && on_batch) {
      auto run = std::move(on_batch);
      on_batch = nullptr;
      run();
    }
  }
  std::function<void()> on_batch;
};

// The lost wake-up: a wake-up asked for while Dispatcher::Tick is between
// the core's Tick and publishing its next tick must not be overwritten by
// that (later) next tick. Forced, not raced: the request comes from inside
// the tick, through a worker connection's Send.
TEST(DispatcherWakeUpTest, AWakeUpAskedForDuringATickIsNotLost) {
  RegisterPolicy(
      "test-hold",
      [](const ModelProfile&, const PolicyConfig&) -> absl::StatusOr<std::unique_ptr<Policy>> {
        return std::make_unique<HoldingPolicy>();
      });
  SimulatedClock clock{Seconds(1)};
  RouterMetrics metrics;
  FakeQuery held("a"), asked_in_tick("m");  // outlive the dispatcher
  DispatcherOptions o;
  o.policy = "test-hold";
  o.run_timer_thread = false;
  Dispatcher d(o, &clock, &metrics);
  ModelProfile a = testing::TwoSubnetProfile();
  a.model = "a";
  ASSERT_TRUE(d.AddModel(a).ok());
  ASSERT_TRUE(d.AddModel(testing::TwoSubnetProfile()).ok());
  auto serves_a = std::make_shared<HookedConnection>();
  auto serves_m = std::make_shared<FakeConnection>();
  v1::RegisterWorker hello;
  hello.add_models("a");
  ASSERT_TRUE(d.RegisterWorker(hello, serves_a).ok());
  hello.set_models(0, "m");
  ASSERT_TRUE(d.RegisterWorker(hello, serves_m).ok());

  const Nanos t0 = clock.Now();
  d.Submit(&held, t0 + Millis(50));
  ASSERT_EQ(d.next_tick(), t0 + HoldingPolicy::kHold) << "the hold asks for a tick";
  serves_a->on_batch = [&] { d.Submit(&asked_in_tick, clock.Now() + Millis(50)); };
  ASSERT_TRUE(clock.AdvanceTo(d.next_tick()).ok());
  d.Tick();  // dispatches `held`; its Send submits `asked_in_tick`, held until t0 + 2 kHold
  ASSERT_NE(serves_a->NextBatch(), nullptr);
  EXPECT_EQ(serves_m->NextBatch(), nullptr) << "held until t0 + 2 kHold";
  EXPECT_LE(d.next_tick(), t0 + 2 * HoldingPolicy::kHold)
      << "the wake-up asked for during the tick was lost: the next tick is "
      << ToMillis(d.next_tick() - t0) << " ms after t0";
  ASSERT_TRUE(clock.AdvanceTo(std::max(clock.Now(), d.next_tick())).ok());
  d.Tick();
  EXPECT_NE(serves_m->NextBatch(), nullptr) << "dispatched at its wake-up";
  EXPECT_LE(clock.Now(), t0 + 2 * HoldingPolicy::kHold);
}

}  // namespace
}  // namespace superserve
