// The serving core with in-memory channels and handles on a simulated clock:
// hung workers, late results, and a randomized check that every query gets
// exactly one answer whatever the workers and clients do.
#include "serving/serving_core.h"

#include <atomic>
#include <deque>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/baselines_registered.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

using testing::FakeChannel;
using testing::FakeHandle;

std::unique_ptr<Policy> Clipper(const ModelProfile& p) {
  return *MakePolicy("fixed-subnet", p, PolicyConfig());
}

using testing::OkOutcome;

class ServingCoreTest : public ::testing::Test {
 protected:
  void SetUp() override { SetUpCore(true); }
  void SetUpCore(bool shed) {
    ServingOptions o;
    o.missed_heartbeats = 0;
    o.batch_grace = Millis(20);
    o.overload.shed = shed;
    core_ = std::make_unique<ServingCore>(o, &clock_);
    ASSERT_TRUE(core_->AddModel(profile_, Clipper(profile_)).ok());
  }
  int32_t AddWorker(std::shared_ptr<FakeChannel> c) {
    WorkerRegistration r;
    r.name = "w";
    r.models = {"hand"};
    return *core_->RegisterWorker(r, std::move(c));
  }
  FakeHandle& Submit(Nanos slo) {
    handles_.push_back(std::make_unique<FakeHandle>());
    QueryRequest r;
    r.model = "hand";
    r.deadline = clock_.Now() + slo;
    core_->Submit(handles_.back().get(), r);
    return *handles_.back();
  }

  SimulatedClock clock_{Seconds(1)};
  ModelProfile profile_ = testing::ThreeSubnetProfile();
  std::vector<std::unique_ptr<FakeHandle>> handles_;  // outlive the core
  std::unique_ptr<ServingCore> core_;
};

TEST_F(ServingCoreTest, AHungWorkerIsDeclaredDeadByItsBatchDeadlineAndItsLateResultIgnored) {
  auto c0 = std::make_shared<FakeChannel>(), c1 = std::make_shared<FakeChannel>();
  const int32_t w0 = AddWorker(c0);
  EXPECT_EQ(c0->name, "w#0");
  FakeHandle& q = Submit(Millis(100));
  ASSERT_EQ(c0->sent.size(), 1u);
  const int32_t w1 = AddWorker(c1);
  // w0 never answers (it still "heartbeats": heartbeats are off here). Past
  // the query's deadline plus the grace, the batch is overdue.
  ASSERT_TRUE(clock_.Advance(Millis(110)).ok());
  core_->Tick();
  EXPECT_FALSE(c0->closed) << "within the grace";
  ASSERT_TRUE(clock_.Advance(Millis(15)).ok());
  core_->Tick();
  EXPECT_TRUE(c0->closed);
  ASSERT_EQ(q.answers, 1) << "too late to re-queue: answered";
  EXPECT_EQ(q.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(core_->Stats().workers_alive, 1);
  // The hung worker wakes up and answers: ignored.
  core_->OnBatchResult(w0, OkOutcome(c0->sent.front()));
  EXPECT_EQ(q.answers, 1);
  // The other worker serves on.
  FakeHandle& next = Submit(Millis(100));
  ASSERT_EQ(c1->sent.size(), 1u);
  core_->OnBatchResult(w1, OkOutcome(c1->sent.front()));
  EXPECT_TRUE(next.status.ok());
}

// Two registrations whose effects apply out of order (the first one's
// observer call is held up until the second registration is done): the
// gauge must end at 2, not at the first one's stale 1. It did end at 1, and
// scripts/main-job then waited 60 s for a second worker that had registered.
TEST_F(ServingCoreTest, TheLiveWorkerCountReportedLastIsTheNewest) {
  struct Alive : ServingObserver {
    void OnWorkersAlive(int32_t alive) override {
      if (alive == 1 && !first_in.HasBeenNotified()) {
        first_in.Notify();
        // With the fix the second registration waits for this call, so
        // this wait times out; without it the second one overtakes.
        second_done.WaitForNotificationWithTimeout(absl::Milliseconds(300));
      }
      last = alive;
    }
    absl::Notification first_in, second_done;
    std::atomic<int32_t> last{-1};
  } alive;
  ServingCore core(ServingOptions(), &clock_, &alive);
  ASSERT_TRUE(core.AddModel(profile_, Clipper(profile_)).ok());
  WorkerRegistration reg;
  reg.models = {"hand"};
  std::thread first(
      [&] { ASSERT_TRUE(core.RegisterWorker(reg, std::make_shared<FakeChannel>()).ok()); });
  alive.first_in.WaitForNotification();
  ASSERT_TRUE(core.RegisterWorker(reg, std::make_shared<FakeChannel>()).ok());
  alive.second_done.Notify();
  first.join();
  EXPECT_EQ(core.Stats().workers_alive, 2);
  EXPECT_EQ(alive.last.load(), 2);
}

TEST_F(ServingCoreTest, ObserverSeesEveryAnswerAndBatch) {
  struct Counter : ServingObserver {
    void OnQueryDone(const QueryDone& d) override { ++outcomes[static_cast<int>(d.outcome)]; }
    void OnBatchSent(const BatchPlan& b) override { queries_sent += b.queries.size(); }
    int outcomes[7] = {0};
    size_t queries_sent = 0;
  } counter;
  ServingCore core(ServingOptions(), &clock_, &counter);
  ASSERT_TRUE(core.AddModel(profile_, Clipper(profile_)).ok());
  FakeHandle unknown, ok;
  QueryRequest r;
  r.model = "nope";
  r.deadline = clock_.Now() + Millis(50);
  core.Submit(&unknown, r);
  auto c = std::make_shared<FakeChannel>();
  WorkerRegistration reg;
  reg.models = {"hand"};
  const int32_t w = *core.RegisterWorker(reg, c);
  r.model = "hand";
  core.Submit(&ok, r);
  ASSERT_EQ(c->sent.size(), 1u);
  core.OnBatchResult(w, OkOutcome(c->sent.front()));
  EXPECT_EQ(counter.outcomes[static_cast<int>(QueryOutcome::kInvalidArgument)], 1);
  EXPECT_EQ(counter.outcomes[static_cast<int>(QueryOutcome::kOk)], 1);
  EXPECT_EQ(counter.queries_sent, 1u);
  EXPECT_EQ(unknown.answers, 1);
  EXPECT_EQ(ok.answers, 1);
}

TEST_F(ServingCoreTest, ARefusedBatchIsRequeuedWhileItCanMakeItThenAnswered) {
  struct Refusals : ServingObserver {
    void OnBatchRefused(const std::string& model, const std::string& worker) override {
      seen.push_back(model + "@" + worker);
    }
    std::vector<std::string> seen;
  } refusals;
  ServingOptions o;
  o.missed_heartbeats = 0;
  ServingCore core(o, &clock_, &refusals);
  ASSERT_TRUE(core.AddModel(profile_, Clipper(profile_)).ok());
  auto c = std::make_shared<FakeChannel>();
  WorkerRegistration reg;
  reg.name = "w";
  reg.models = {"hand"};
  const int32_t w = *core.RegisterWorker(reg, c);
  FakeHandle q;
  QueryRequest r;
  r.model = "hand";
  r.deadline = clock_.Now() + Millis(30);
  core.Submit(&q, r);
  ASSERT_EQ(c->sent.size(), 1u);
  // Clipper+ runs the 80 % subnet: 4 ms at batch 1, plus the 0.5 ms overhead
  // estimate. The window closes when that no longer fits before the deadline.
  EXPECT_EQ(c->sent[0].latest, r.deadline - Millis(4) - Micros(500));
  auto refuse = [&](const BatchPlan& b) {
    BatchOutcome out;
    out.batch_id = b.batch_id;
    out.status = absl::DeadlineExceededError("window closed");
    core.OnBatchResult(w, std::move(out));
  };
  ASSERT_TRUE(clock_.Advance(Millis(20)).ok());
  refuse(c->sent[0]);
  EXPECT_EQ(q.answers, 0) << "10 ms left: re-queued";
  ASSERT_EQ(c->sent.size(), 2u) << "and sent again";
  EXPECT_EQ(c->sent[1].queries, c->sent[0].queries);
  EXPECT_EQ(c->sent[1].latest, r.deadline - Millis(4) - Micros(500));
  ASSERT_TRUE(clock_.Advance(Millis(9) + Micros(500)).ok());
  refuse(c->sent[1]);
  ASSERT_EQ(q.answers, 1) << "0.5 ms left, below the fastest subnet: answered";
  EXPECT_EQ(q.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(c->sent.size(), 2u);
  EXPECT_EQ(core.Stats().refused, 2);
  EXPECT_EQ(core.Stats().requeued, 1);
  EXPECT_EQ(refusals.seen, (std::vector<std::string>{"hand@w#0", "hand@w#0"}));
}

TEST_F(ServingCoreTest, HopelessArrivalsAreAnsweredAtOnceOnlyWithShedding) {
  // One worker, a burst of 400 queries due in 40 ms: fixed-subnet's subnet runs
  // at most 8 in 18.5 ms, so most of the burst cannot be served; admission
  // answers the hopeless tail at once (the queue ahead only grows).
  for (bool shed : {true, false}) {
    SetUpCore(shed);
    auto c = std::make_shared<FakeChannel>();
    AddWorker(c);
    std::vector<FakeHandle*> qs;
    for (int i = 0; i < 400; ++i) qs.push_back(&Submit(Millis(40)));
    int first_rejected = -1;
    for (int i = 0; i < 400; ++i) {
      if (qs[i]->answers == 0) {
        EXPECT_EQ(first_rejected, -1) << "answered at once, then queued again at " << i;
        continue;
      }
      EXPECT_EQ(qs[i]->status.code(), absl::StatusCode::kDeadlineExceeded);
      EXPECT_NE(qs[i]->status.message().find("overloaded"), absl::string_view::npos);
      if (first_rejected < 0) first_rejected = i;
    }
    if (shed) {
      EXPECT_GT(first_rejected, 8) << "a batch's worth is admitted";
      EXPECT_LT(first_rejected, 200);
      EXPECT_EQ(core_->Stats().shed, 400 - first_rejected);
    } else {
      EXPECT_EQ(first_rejected, -1);
      EXPECT_EQ(core_->Stats().shed, 0);
    }
  }
}

TEST_F(ServingCoreTest, DrainRefusesNewQueriesAndServesQueuedOnes) {
  auto c = std::make_shared<FakeChannel>();
  const int32_t w = AddWorker(c);
  FakeHandle& running = Submit(Millis(100));
  FakeHandle& queued = Submit(Millis(100));
  core_->Drain();
  FakeHandle& late = Submit(Millis(100));
  ASSERT_EQ(late.answers, 1);
  EXPECT_EQ(late.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(late.status.message().find("draining"), absl::string_view::npos) << late.status;
  ASSERT_EQ(c->sent.size(), 1u);
  core_->OnBatchResult(w, OkOutcome(c->sent.front()));
  ASSERT_EQ(c->sent.size(), 2u) << "the queued query is still scheduled";
  core_->OnBatchResult(w, OkOutcome(c->sent.back()));
  EXPECT_TRUE(running.status.ok());
  EXPECT_TRUE(queued.status.ok());
  EXPECT_EQ(core_->Stats().pending, 0);
}

// The router-wide drain as an event (Drain's on_idle), as the model drain:
// run once, after the last accepted query's answer is delivered, with no
// thread waiting; at once for a core with nothing left.
TEST_F(ServingCoreTest, ADrainReportsIdleOnceAfterTheLastAnswer) {
  auto c = std::make_shared<FakeChannel>();
  const int32_t w = AddWorker(c);
  FakeHandle& running = Submit(Millis(100));
  FakeHandle& queued = Submit(Millis(100));
  std::vector<std::string> events;
  core_->Drain([&] {
    events.push_back(absl::StrCat("idle after ", running.answers + queued.answers, " answers"));
  });
  EXPECT_TRUE(events.empty()) << "one query queued, one batch on the worker";
  FakeHandle& late = Submit(Millis(100));
  EXPECT_EQ(late.status.code(), absl::StatusCode::kUnavailable) << "refused: not waited for";
  core_->OnBatchResult(w, OkOutcome(c->sent.front()));
  EXPECT_TRUE(events.empty()) << "the queued query is on the worker now";
  ASSERT_EQ(c->sent.size(), 2u);
  core_->OnBatchResult(w, OkOutcome(c->sent.back()));
  EXPECT_EQ(events, std::vector<std::string>{"idle after 2 answers"});
  core_->Tick();
  core_->Drain();
  EXPECT_EQ(events.size(), 1u) << "once";
  core_->Drain([&] { events.push_back("idle at once"); });
  EXPECT_EQ(events.back(), "idle at once") << "nothing left: at once";
  EXPECT_EQ(events.size(), 2u);
}

// The drain as an event (CloseModel's on_drained): reported once, after the
// last answer is delivered, with no thread waiting; at once for a model with
// nothing left; and by RemoveModel for a model removed before it drained.
TEST_F(ServingCoreTest, AClosedModelReportsDrainedOnceAfterItsLastAnswer) {
  auto c = std::make_shared<FakeChannel>();
  const int32_t w = AddWorker(c);
  FakeHandle& running = Submit(Millis(100));
  FakeHandle& queued = Submit(Millis(100));
  std::vector<std::string> events;
  ASSERT_TRUE(core_->CloseModel("hand", [&] {
    events.push_back(absl::StrCat("drained after ", running.answers + queued.answers, " answers"));
  }).ok());
  EXPECT_TRUE(events.empty()) << "one query queued, one batch on the worker";
  core_->OnBatchResult(w, OkOutcome(c->sent.front()));
  EXPECT_TRUE(events.empty()) << "the queued query is on the worker now";
  ASSERT_EQ(c->sent.size(), 2u);
  core_->OnBatchResult(w, OkOutcome(c->sent.back()));
  EXPECT_EQ(events, std::vector<std::string>{"drained after 2 answers"});
  core_->Tick();
  EXPECT_EQ(events.size(), 1u) << "once";

  ModelProfile idle = profile_;
  idle.model = "idle";
  ASSERT_TRUE(core_->AddModel(idle, Clipper(idle)).ok());
  ASSERT_TRUE(core_->CloseModel("idle", [&] { events.push_back("idle drained"); }).ok());
  EXPECT_EQ(events.back(), "idle drained") << "nothing to drain: at once";

  ModelProfile busy = profile_;
  busy.model = "busy";
  ASSERT_TRUE(core_->AddModel(busy, Clipper(busy)).ok());
  ASSERT_TRUE(core_->AttachWorker(w, "busy").ok());
  handles_.push_back(std::make_unique<FakeHandle>());
  QueryRequest r;
  r.model = "busy";
  r.deadline = clock_.Now() + Millis(100);
  core_->Submit(handles_.back().get(), r);
  ASSERT_TRUE(core_->CloseModel("busy", [&] { events.push_back("busy drained"); }).ok());
  EXPECT_EQ(events.back(), "idle drained");
  ASSERT_TRUE(core_->RemoveModel("busy").ok());
  EXPECT_EQ(events.back(), "busy drained") << "removed: nothing left to drain";
  EXPECT_EQ(handles_.back()->answers, 1);
  EXPECT_EQ(events.size(), 3u);
}

// A removed model is freed on its workers (the lifecycle unloads it there):
// added again (registered anew), it serves on a worker only once that
// worker reports it loaded, not on the worker's earlier declaration.
TEST_F(ServingCoreTest, AModelAddedAgainServesOnlyOnWorkersThatLoadItAgain) {
  const int32_t w = AddWorker(std::make_shared<FakeChannel>());
  ASSERT_EQ(core_->ListModels().at(0).workers, 1);
  ASSERT_TRUE(core_->RemoveModel("hand").ok());
  ASSERT_TRUE(core_->AddModel(profile_, Clipper(profile_)).ok());
  EXPECT_EQ(core_->ListModels().at(0).workers, 0) << "worker " << w << " freed it";
  ASSERT_TRUE(core_->AttachWorker(w, "hand").ok());
  EXPECT_EQ(core_->ListModels().at(0).workers, 1);
}

}  // namespace

// Whether the core's lock is free (TryLock fails on a mutex the caller holds).
class ServingCoreTestPeer {
 public:
  static bool LockFree(ServingCore& core) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!core.mu_.TryLock()) return false;
    core.mu_.Unlock();
    return true;
  }
};

namespace {

// Records each line and whether the core's lock was free when it was written.
class LockProbingSink final : public LogSink {
 public:
  explicit LockProbingSink(ServingCore* core) : core_(core) { SetLogSink(this); }
  ~LockProbingSink() override { SetLogSink(nullptr); }
  void Write(LogLevel, const std::string& line) override {
    lines.push_back(line);
    if (!ServingCoreTestPeer::LockFree(*core_)) under_lock.push_back(line);
  }
  std::vector<std::string> lines, under_lock;

 private:
  ServingCore* core_;
};

// A worker can make the core log at will (an unknown batch id, a result
// count that does not match, reconnecting), and a registration adds a
// model: those lines are written after the core's lock is released, never
// on stderr while every query waits.
TEST_F(ServingCoreTest, LinesAWorkerTriggersAreLoggedOutsideTheLock) {
  LockProbingSink sink(core_.get());
  ModelProfile added = profile_;
  added.model = "added";
  ASSERT_TRUE(core_->AddModel(added, Clipper(added)).ok());
  auto c = std::make_shared<FakeChannel>();
  const int32_t w = AddWorker(c);
  FakeHandle& q = Submit(Millis(100));
  ASSERT_EQ(c->sent.size(), 1u);
  BatchOutcome unknown = OkOutcome(c->sent.front());
  unknown.batch_id += 1000;
  core_->OnBatchResult(w, unknown);
  BatchOutcome extra = OkOutcome(c->sent.front());
  extra.outputs.emplace_back(QueryId{987654}, nullptr);  // a foreign id
  core_->OnBatchResult(w, extra);
  EXPECT_TRUE(q.status.ok()) << q.status;
  core_->OnWorkerGone(w, absl::UnavailableError("stream ended"));
  std::string all;
  for (const std::string& l : sink.lines) all += l;
  for (const char* expected :
       {"serving model added", "registered", "answered unknown batch", "1 foreign", "gone"}) {
    EXPECT_NE(all.find(expected), std::string::npos) << expected << " not logged in:\n" << all;
  }
  EXPECT_TRUE(sink.under_lock.empty()) << "logged under the lock: " << sink.under_lock.front();
}

// Answers every question with a wake-up at `*wake` (a deferring policy, as
// Symphony's, moves its wake-up on most arrivals).
class WakeScriptPolicy final : public Policy {
 public:
  explicit WakeScriptPolicy(const Nanos* wake) : wake_(wake) {}
  std::string_view name() const override { return "wake-script"; }
  Decision Decide(const SchedulingContext&) override { return Decision::WakeAt(*wake_); }

 private:
  const Nanos* wake_;
};

TEST(ServingCoreWakeTest, ASupersededWakeUpCostsNoTick) {
  SimulatedClock clock(Seconds(1));
  ServingOptions o;
  o.missed_heartbeats = 0;
  o.overload.shed = false;
  ServingCore core(o, &clock);
  const ModelProfile profile = testing::ThreeSubnetProfile();
  Nanos wake = clock.Now() + Millis(2);
  ASSERT_TRUE(core.AddModel(profile, std::make_unique<WakeScriptPolicy>(&wake)).ok());
  WorkerRegistration r;
  r.name = "w";
  r.models = {profile.model};
  ASSERT_TRUE(core.RegisterWorker(r, std::make_shared<FakeChannel>()).ok());
  std::vector<std::unique_ptr<FakeHandle>> handles;
  auto submit = [&] {
    handles.push_back(std::make_unique<FakeHandle>());
    QueryRequest q;
    q.model = profile.model;
    q.deadline = clock.Now() + Millis(100);
    core.Submit(handles.back().get(), q);
  };
  submit();  // lists a wake-up at +2 ms
  wake = clock.Now() + Millis(5);
  submit();  // moves it to +5 ms: the +2 ms entry is superseded
  // The next tick is the current wake-up, not the superseded one (nor the
  // 10-ms housekeeping interval).
  EXPECT_EQ(core.Tick(), clock.Now() + Millis(5));
  ASSERT_TRUE(clock.AdvanceTo(clock.Now() + Millis(5)).ok());
  // Fired at +5 ms, the policy asks again for +7 ms; nothing stale remains.
  wake = clock.Now() + Millis(2);
  EXPECT_EQ(core.Tick(), clock.Now() + Millis(2));
  for (const auto& h : handles) EXPECT_EQ(h->answers, 0) << "still queued, not lost";
  core.Shutdown();
  for (const auto& h : handles) EXPECT_EQ(h->answers, 1);
}

// Random clients, workers and operators; at the end every handle has exactly
// one answer and nothing is left pending.
TEST(ServingCoreRandomTest, EveryQueryGetsExactlyOneAnswer) {
  // Seeds 21-40: placement too. Workers hold 100 bytes, models "hand" and
  // "hand2" take 60 each (one at a time), so queries trigger loads and
  // evictions; workers finish or fail loads in any order, and die mid-load.
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const bool placed = seed > 20;
    std::mt19937_64 rng(seed);
    SimulatedClock clock(Seconds(1));
    ServingOptions o;
    o.heartbeat_interval = Millis(5);
    o.missed_heartbeats = 3;
    o.batch_grace = Millis(5);
    o.max_queue = 8;
    o.lookahead = 1 + static_cast<int32_t>(seed % 2);
    std::vector<std::unique_ptr<FakeHandle>> handles;
    ServingCore core(o, &clock);
    ModelProfile p = testing::ThreeSubnetProfile();
    p.memory_bytes = 60;
    p.load_time = Millis(2);
    ModelProfile p2 = p;
    p2.model = "hand2";
    const std::vector<std::string> policies = PolicyNames();
    ASSERT_TRUE(core.AddModel(p, *MakePolicy(policies[seed % policies.size()], p, {})).ok());
    if (placed) {
      ASSERT_TRUE(core.AddModel(p2, *MakePolicy("slackfit", p2, {})).ok());
    }
    std::vector<std::pair<int32_t, std::shared_ptr<FakeChannel>>> workers;
    for (int step = 0; step < 600; ++step) {
      const int op = static_cast<int>(rng() % 100);
      if (placed && op >= 95 && !workers.empty() && rng() % 2 == 0) {
        // A worker reports a load: done (usually) or failed.
        auto& [id, c] = workers[rng() % workers.size()];
        // A closed channel's worker is gone (its id may name a newer one).
        if (c->loading.empty() || c->closed) continue;
        const std::string model = *c->loading.begin();
        if (rng() % 4 == 0) {
          c->loading.erase(model);
          core.OnModelLoaded(id, model, absl::InternalError("load failed"));
        } else {
          c->FinishLoad(model);
          core.OnModelLoaded(id, model, absl::OkStatus());
        }
        continue;
      }
      if (op < 40) {
        handles.push_back(std::make_unique<FakeHandle>());
        QueryRequest r;
        r.model = rng() % 20 == 0 ? "other" : placed && rng() % 2 == 0 ? "hand2" : "hand";
        r.deadline = clock.Now() + Millis(static_cast<double>(rng() % 30));
        core.Submit(handles.back().get(), r);
      } else if (op < 45) {
        auto c = std::make_shared<FakeChannel>();
        WorkerRegistration reg;
        reg.models = {"hand"};
        if (placed) {
          reg.models.push_back("hand2");
          reg.memory_bytes = 100;
          c->budgeted = true;
        }
        auto id = core.RegisterWorker(reg, c);
        if (id.ok()) workers.emplace_back(*id, c);
      } else if (op < 70 && !workers.empty()) {
        // A worker answers one batch: correctly, with garbage ids, with an
        // error, or "could not start in time".
        auto& [id, c] = workers[rng() % workers.size()];
        if (c->sent.empty()) continue;
        BatchPlan b = std::move(c->sent.front());
        c->sent.pop_front();
        BatchOutcome out = OkOutcome(b);
        switch (rng() % 5) {
          case 0:
            out.outputs.emplace_back(rng() % 50, nullptr);  // foreign or duplicate
            break;
          case 1:
            if (!out.outputs.empty()) out.outputs.pop_back();  // missing
            break;
          case 2: out.status = absl::InternalError("boom"); break;
          case 3: out.status = absl::DeadlineExceededError("late start"); break;
          default: break;
        }
        core.OnBatchResult(id, std::move(out));
      } else if (op < 74 && !workers.empty()) {
        core.OnWorkerGone(workers[rng() % workers.size()].first, absl::UnavailableError("gone"));
      } else if (op < 80 && !handles.empty()) {
        core.OnCancelled(handles[rng() % handles.size()].get());
      } else if (op < 82) {
        if (core.RemoveModel("hand").ok()) {
          ASSERT_TRUE(core.AddModel(p, *MakePolicy("slackfit", p, {})).ok());
        }
      } else if (op < 95) {
        ASSERT_TRUE(clock.Advance(Micros(static_cast<double>(rng() % 4000))).ok());
        core.Tick();
      } else if (!workers.empty()) {
        core.OnHeartbeat(workers[rng() % workers.size()].first);
      }
    }
    core.Shutdown();
    for (size_t i = 0; i < handles.size(); ++i) {
      ASSERT_EQ(handles[i]->answers, 1) << "seed " << seed << " query " << i;
    }
    ServingStats s = core.Stats();
    EXPECT_EQ(s.pending, 0) << "seed " << seed;
    EXPECT_EQ(s.accepted, s.answered) << "seed " << seed;
    for (const auto& [id, c] : workers) {
      EXPECT_EQ(c->sent_not_resident, 0) << "seed " << seed;
      // Evictions never unload a model with a batch in flight ("hand2" is
      // never removed; a removed model's unload follows its last batch).
      EXPECT_EQ(c->unloaded_in_flight_of["hand2"], 0) << "seed " << seed;
    }
    if (placed) {
      EXPECT_GT(s.loads, 0) << "seed " << seed;
    }
  }
}

// Application tags are state kept forever: their number and length are capped.
TEST(ServingCoreApplicationsTest, NewTagsBeyondTheCapAndLongTagsAreRefused) {
  SimulatedClock clock{Seconds(1)};
  ModelProfile profile = testing::ThreeSubnetProfile();
  ServingOptions o;
  o.missed_heartbeats = 0;
  o.max_applications = 2;
  o.max_application_bytes = 8;
  ServingCore core(o, &clock);
  ASSERT_TRUE(core.AddModel(profile, Clipper(profile)).ok());
  WorkerRegistration reg;
  reg.models = {"hand"};
  ASSERT_TRUE(core.RegisterWorker(reg, std::make_shared<FakeChannel>()).ok());
  std::deque<FakeHandle> handles;  // outlive the core's references
  auto submit = [&](absl::string_view tag) -> FakeHandle& {
    QueryRequest r;
    r.model = "hand";
    r.application = tag;
    r.deadline = clock.Now() + Seconds(10);
    handles.emplace_back();
    core.Submit(&handles.back(), r);
    return handles.back();
  };
  EXPECT_EQ(submit("a").answers, 0);  // queued
  EXPECT_EQ(submit("b").answers, 0);
  FakeHandle& third = submit("c");
  EXPECT_EQ(third.answers, 1);
  EXPECT_EQ(third.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(third.status.message().find("maximum of 2 tags (--max_applications)"),
            std::string::npos)
      << third.status;
  EXPECT_EQ(submit("a").answers, 0) << "a known tag is still accepted";
  FakeHandle& long_tag = submit("123456789");
  EXPECT_EQ(long_tag.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_tag.status.message().find("exceeds the limit of 8 bytes"), std::string::npos)
      << long_tag.status;
  core.Shutdown();
}

// Runs `on_registered` inside OnRegistered; records the order of the
// registration and the batches.
class ProbingChannel final : public WorkerChannel {
 public:
  void OnRegistered(const std::string&, Nanos) override {
    events.push_back("registered");
    if (on_registered) on_registered();
  }
  void Send(BatchPlan b) override { events.push_back("batch"); }
  void Close(const absl::Status&) override {}
  std::function<void()> on_registered;
  std::vector<std::string> events;
};

// The registration (a gRPC write, in the router) is announced outside the
// core's lock, and still before any batch reaches the worker: a query that
// arrives while the worker is being told it is registered waits for it.
TEST(ServingCoreRegistrationTest, TheWorkerIsToldOutsideTheLockAndBeforeAnyBatch) {
  SimulatedClock clock(Seconds(1));
  ServingOptions o;
  o.missed_heartbeats = 0;
  o.overload.shed = false;
  ServingCore core(o, &clock);
  const ModelProfile profile = testing::ThreeSubnetProfile();
  ASSERT_TRUE(core.AddModel(profile, Clipper(profile)).ok());
  auto channel = std::make_shared<ProbingChannel>();
  FakeHandle query;
  std::atomic<bool> stats_returned{false};
  std::thread other;
  bool lock_held = false;
  size_t events_on_return = 0;
  channel->on_registered = [&] {
    // Another thread needs the core's lock: it must get it while the worker
    // is being told.
    other = std::thread([&] {
      core.Stats();
      stats_returned = true;
    });
    for (int i = 0; i < 200 && !stats_returned; ++i) absl::SleepFor(absl::Milliseconds(10));
    lock_held = !stats_returned;
    if (lock_held) return;  // `other` gets the lock once this returns
    QueryRequest q;
    q.model = profile.model;
    q.deadline = clock.Now() + Millis(100);
    core.Submit(&query, q);
    events_on_return = channel->events.size();
  };
  WorkerRegistration r;
  r.name = "w";
  r.models = {profile.model};
  ASSERT_TRUE(core.RegisterWorker(r, channel).ok());
  other.join();
  EXPECT_FALSE(lock_held) << "OnRegistered ran under the core's lock";
  EXPECT_EQ(events_on_return, 1u) << "a batch reached the worker before its registration ended";
  EXPECT_EQ(channel->events, (std::vector<std::string>{"registered", "batch"}));
  EXPECT_EQ(query.answers, 0) << "dispatched, not answered";
  core.Shutdown();  // answers `query` while it is still alive
}

// A worker that reconnects 10,000 times leaves no trail: the record of a
// worker its owner reported gone is recycled (ids index the records, so
// they stay small too), and a tick walks the workers alive only.
TEST(ServingCoreRegistrationTest, ReconnectingWorkersLeaveABoundedNumberOfRecords) {
  SimulatedClock clock(Seconds(1));
  ServingOptions o;
  o.missed_heartbeats = 0;
  ServingCore core(o, &clock);
  const ModelProfile profile = testing::ThreeSubnetProfile();
  ASSERT_TRUE(core.AddModel(profile, Clipper(profile)).ok());
  WorkerRegistration r;
  r.name = "w";
  r.models = {profile.model};
  auto steady = core.RegisterWorker(r, std::make_shared<FakeChannel>());
  ASSERT_TRUE(steady.ok());
  int32_t max_id = *steady;
  for (int i = 0; i < 10000; ++i) {
    auto id = core.RegisterWorker(r, std::make_shared<FakeChannel>());
    ASSERT_TRUE(id.ok());
    max_id = std::max(max_id, *id);
    core.OnWorkerGone(*id, absl::UnavailableError("stream ended"));
  }
  EXPECT_LE(max_id, 2) << "10,000 reconnects left a record each";
  EXPECT_LE(core.Stats().worker_records, 2);
  EXPECT_EQ(core.Stats().workers_alive, 1);
  // The steady worker still serves.
  FakeHandle query;
  QueryRequest q;
  q.model = profile.model;
  q.deadline = clock.Now() + Millis(100);
  core.Submit(&query, q);
  EXPECT_EQ(core.Stats().batches, 1);
  core.Shutdown();  // answers `query` while it is still alive
}

// A worker the core declared dead keeps its id until its owner reports it
// gone: the owner's late calls for that id must not reach a new worker.
TEST(ServingCoreRegistrationTest, ADeadWorkersIdIsNotReusedBeforeItsOwnerReportsItGone) {
  SimulatedClock clock(Seconds(1));
  ServingOptions o;
  o.heartbeat_interval = Millis(100);
  o.missed_heartbeats = 2;
  ServingCore core(o, &clock);
  const ModelProfile profile = testing::ThreeSubnetProfile();
  ASSERT_TRUE(core.AddModel(profile, Clipper(profile)).ok());
  WorkerRegistration r;
  r.name = "w";
  r.models = {profile.model};
  auto silent = core.RegisterWorker(r, std::make_shared<FakeChannel>());
  ASSERT_TRUE(silent.ok());
  ASSERT_TRUE(clock.Advance(Millis(300)).ok());
  core.Tick();  // declares it dead: silent for 3 intervals
  ASSERT_EQ(core.Stats().workers_alive, 0);
  auto next = core.RegisterWorker(r, std::make_shared<FakeChannel>());
  ASSERT_TRUE(next.ok());
  EXPECT_NE(*next, *silent) << "reused while the old stream may still report on it";
  core.OnWorkerGone(*silent, absl::UnavailableError("stream ended"));  // the owner's last call
  EXPECT_EQ(core.Stats().workers_alive, 1) << "the owner's late call reached the new worker";
  auto third = core.RegisterWorker(r, std::make_shared<FakeChannel>());
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, *silent) << "released: its record is recycled";
}

// An idle core (nothing queued, nothing on a worker) asks for no periodic
// ticks: the owner's timer sleeps until a query, a worker's liveness
// deadline or an idle refresh (ServingOptions::idle_tick_interval).
TEST(ServingCoreIdleTest, AnIdleCoreAsksForFewTicks) {
  SimulatedClock clock(Seconds(1));
  ServingOptions o;
  o.heartbeat_interval = Millis(500);
  o.missed_heartbeats = 2;
  ServingCore core(o, &clock);
  const ModelProfile profile = testing::ThreeSubnetProfile();
  ASSERT_TRUE(core.AddModel(profile, Clipper(profile)).ok());
  WorkerRegistration r;
  r.name = "w";
  r.models = {profile.model};
  auto worker = core.RegisterWorker(r, std::make_shared<FakeChannel>());
  ASSERT_TRUE(worker.ok());
  const Nanos start = clock.Now();
  Nanos next_heartbeat = start + o.heartbeat_interval;
  Nanos next = core.Tick();
  int ticks = 1;
  while (true) {
    const Nanos t = std::min(next, next_heartbeat);
    if (t >= start + Seconds(1)) break;
    ASSERT_TRUE(clock.AdvanceTo(t).ok());
    if (t == next_heartbeat) {  // the worker heartbeats on time
      core.OnHeartbeat(*worker);
      next_heartbeat += o.heartbeat_interval;
    }
    if (t >= next) {
      next = core.Tick();
      ++ticks;
      ASSERT_GT(next, clock.Now());
    }
  }
  EXPECT_LT(ticks, 20) << "an idle second cost " << ticks << " ticks";
  EXPECT_EQ(core.Stats().workers_alive, 1);
  // A query makes it busy again: the sweep runs every tick interval.
  FakeHandle query;
  QueryRequest q;
  q.model = profile.model;
  q.deadline = clock.Now() + Millis(100);
  core.Submit(&query, q);
  EXPECT_LE(core.Tick(), clock.Now() + o.tick_interval);
  core.Shutdown();  // answers `query` while it is still alive
}

}  // namespace
}  // namespace superserve
