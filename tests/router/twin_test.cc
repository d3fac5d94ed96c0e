// The twin test: the router's scheduling path (Dispatcher with in-memory
// queries and worker connections on a simulated clock) and the simulator
// (bench/sim) are fed the same arrivals and the same execution times, with a
// worker lost half-way, and must make the same decisions step by step for
// every policy: which queries each batch takes, on which worker, with which
// subnet, and how every query ends (served, late, dropped, unavailable), at
// the same instants.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/sim/simulator.h"
#include "bench/sim/trace_generators.h"
#include "common/tensor_codec.h"
#include "policies/policy_factory.h"
#include "router/dispatcher.h"
#include "tests/policies/policy_test_util.h"
#include "tests/baselines_registered.h"

namespace superserve {
namespace {

constexpr int32_t kWorkers = 3;
constexpr Nanos kSlo = Millis(25);
constexpr Nanos kOverhead = Micros(400);
const Nanos kFailAt = Millis(1500);

ModelProfile TwinProfile() {
  ModelProfile p = testing::HandProfile({1, 2, 4, 8, 16}, {70, 74, 78, 81},
                                        {{1, 1.4, 2.2, 3.8, 7},
                                         {1.6, 2.2, 3.6, 6.4, 12},
                                         {2.5, 3.5, 6, 11, 21},
                                         {4, 6, 10, 18, 34}});
  p.input_shape = {2};
  return p;
}

// Both sides run batches for the same time: the profiled latency of the
// smallest profiled batch >= the queries taken, times 1.25 (so that online
// latency correction has something to correct), whole microseconds (the wire
// carries microseconds).
Nanos ExecTime(const ModelProfile& p, int32_t subnet_id, int32_t queries) {
  const SubnetProfile& s = p.subnets[p.SubnetIndex(subnet_id)];
  size_t bi = 0;
  while (bi + 1 < p.batch_sizes.size() && p.batch_sizes[bi] < queries) ++bi;
  return (static_cast<Nanos>(static_cast<double>(s.latency[bi]) * 1.25) / kNanosPerMicro) *
         kNanosPerMicro;
}

std::string BatchEvent(Nanos t, int32_t worker, int32_t subnet_id,
                       const std::vector<QueryId>& ids) {
  return absl::StrCat("t=", t, " batch w", worker, " subnet ", subnet_id, " [",
                      absl::StrJoin(ids, ","), "]");
}
std::string DoneEvent(Nanos t, QueryId id, QueryOutcome o) {
  return absl::StrCat("t=", t, " q", id, " ", QueryOutcomeName(o));
}

// The simulator's side, from its trace observer.
class SimTrace final : public ServingObserver {
 public:
  void OnBatchSent(const BatchPlan& b) override {
    events.push_back(BatchEvent(b.sent_at, b.worker, b.subnet_id, b.queries));
  }
  void OnQueryDone(const QueryDone& d) override {
    events.push_back(DoneEvent(d.now, d.id, d.outcome));
  }
  std::vector<std::string> events;
};

// The router's side: what reaches the fake clients and worker streams.
class RouterTwin {
 public:
  RouterTwin(const ModelProfile& profile, const std::string& policy) : profile_(profile) {
    DispatcherOptions o;
    o.policy = policy;
    o.run_timer_thread = false;
    o.serving.missed_heartbeats = 0;  // as the simulator: no heartbeats
    o.serving.max_queue = std::numeric_limits<size_t>::max();
    o.serving.log_lifecycle = false;
    dispatcher_ = std::make_unique<Dispatcher>(o, &clock_, nullptr);
    status_ = dispatcher_->AddModel(profile_);
    for (int32_t w = 0; w < kWorkers; ++w) {
      auto conn = std::make_shared<Connection>(this, w);
      v1::RegisterWorker hello;
      hello.set_worker_id("sim");
      hello.set_emulated(true);
      hello.add_models(profile_.model);
      auto id = dispatcher_->RegisterWorker(hello, conn);
      if (!id.ok()) status_ = id.status();
      live_.push_back(w);
    }
  }

  absl::Status Run(const std::vector<Nanos>& arrivals) {
    if (!status_.ok()) return status_;
    const Nanos kNever = std::numeric_limits<Nanos>::max();
    size_t next_arrival = 0;
    bool failed = false;
    while (true) {
      const Nanos t_arrival = next_arrival < arrivals.size() ? arrivals[next_arrival] : kNever;
      const Nanos t_done = completions_.empty() ? kNever : completions_.top().time;
      const Nanos t_fail = failed ? kNever : kFailAt;
      const Nanos t_tick =
          outstanding_ > 0 ? std::max(dispatcher_->next_tick(), clock_.Now()) : kNever;
      const Nanos t = std::min({t_arrival, t_done, t_fail, t_tick});
      if (t == kNever) break;
      if (auto s = clock_.AdvanceTo(std::max(t, clock_.Now())); !s.ok()) return s;
      if (t_done == t) {
        Completion c = completions_.top();
        completions_.pop();
        v1::BatchResult r;
        r.set_batch_id(c.batch_id);
        r.set_exec_us(c.exec / kNanosPerMicro);
        for (QueryId id : c.queries) {
          auto* qr = r.add_results();
          qr->set_query_id(id);
          EncodeTensor(MakeFloatTensor({1}, std::vector<float>{1}), qr->mutable_output());
        }
        dispatcher_->OnBatchResult(c.worker, &r);
      } else if (t_fail == t) {
        failed = true;
        const int32_t w = live_.back();
        live_.pop_back();
        dispatcher_->OnWorkerGone(w, absl::UnavailableError("simulated failure"));
      } else if (t_arrival == t) {
        ++next_arrival;
        queries_.push_back(std::make_unique<Query>(this, t + kSlo));
        ++outstanding_;
        dispatcher_->Submit(queries_.back().get(), t + kSlo);
      } else {
        dispatcher_->Tick();
      }
    }
    dispatcher_->Shutdown();
    return absl::OkStatus();
  }

  std::vector<std::string> events;

 private:
  class Query final : public QueryResponder {
   public:
    Query(RouterTwin* twin, Nanos deadline) : twin_(twin), deadline_(deadline) {
      EncodeTensor(MakeFloatTensor({2}, std::vector<float>{0.5f, 0.5f}), request_.mutable_input());
      request_.set_model("hand");
    }
    const v1::InferRequest& request() const override { return request_; }
    v1::InferResponse* response() override { return &response_; }
    void Answer(const absl::Status& s) override {
      const Nanos now = twin_->clock_.Now();
      QueryOutcome o = QueryOutcome::kError;
      switch (s.code()) {
        case absl::StatusCode::kOk:
          o = now > deadline_ ? QueryOutcome::kLate : QueryOutcome::kOk;
          break;
        case absl::StatusCode::kDeadlineExceeded: o = QueryOutcome::kDeadlineExceeded; break;
        case absl::StatusCode::kUnavailable: o = QueryOutcome::kUnavailable; break;
        case absl::StatusCode::kResourceExhausted: o = QueryOutcome::kResourceExhausted; break;
        case absl::StatusCode::kInvalidArgument: o = QueryOutcome::kInvalidArgument; break;
        default: break;
      }
      twin_->events.push_back(DoneEvent(now, query_id, o));
      --twin_->outstanding_;
    }

   private:
    RouterTwin* const twin_;
    const Nanos deadline_;
    v1::InferRequest request_;
    v1::InferResponse response_;
  };
  struct Completion {
    Nanos time;
    int32_t worker;
    uint64_t batch_id;
    Nanos exec;
    std::vector<QueryId> queries;
    bool operator>(const Completion& o) const {
      return time > o.time || (time == o.time && batch_id > o.batch_id);
    }
  };
  class Connection final : public WorkerConnection {
   public:
    Connection(RouterTwin* twin, int32_t worker) : twin_(twin), worker_(worker) {}
    void Send(std::unique_ptr<v1::RouterMessage> m) override {
      if (!m->has_batch()) return;
      const v1::Batch& b = m->batch();
      std::vector<QueryId> ids;
      for (const auto& q : b.queries()) ids.push_back(q.query_id());
      const Nanos now = twin_->clock_.Now();
      twin_->events.push_back(BatchEvent(now, worker_, b.control().subnet_id(), ids));
      const Nanos exec = ExecTime(twin_->profile_, b.control().subnet_id(),
                                  static_cast<int32_t>(ids.size()));
      const Nanos start = now + b.earliest_us() * kNanosPerMicro;
      twin_->completions_.push({start + kOverhead + exec, worker_, b.batch_id(), exec, ids});
    }
    void Close(const absl::Status&) override {}

   private:
    RouterTwin* const twin_;
    const int32_t worker_;
  };

  const ModelProfile profile_;
  SimulatedClock clock_{0};
  std::unique_ptr<Dispatcher> dispatcher_;
  absl::Status status_;
  std::vector<std::unique_ptr<Query>> queries_;
  std::vector<int32_t> live_;
  int64_t outstanding_ = 0;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<Completion>> completions_;
};

class TwinTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TwinTest, RouterAndSimulatorMakeTheSameDecisions) {
  const std::string policy_name = GetParam();
  const ModelProfile profile = TwinProfile();
  // Light load, then a burst past capacity (drops), with a worker lost in it.
  std::vector<Nanos> arrivals = BurstyArrivals(300, 4500, 6, Seconds(3), 7);

  SimTrace sim_trace;
  SimulatorOptions so;
  so.workers = kWorkers;
  so.slo = kSlo;
  so.dispatch_overhead = kOverhead;
  so.worker_failures = {kFailAt};
  so.exec_time = [&profile](int32_t subnet_id, int32_t queries) {
    return ExecTime(profile, subnet_id, queries);
  };
  so.trace = &sim_trace;
  auto policy = MakePolicy(policy_name, profile, PolicyConfig());
  ASSERT_TRUE(policy.ok()) << policy.status();
  auto sim = Simulate(profile, arrivals, policy->get(), so);
  ASSERT_TRUE(sim.ok()) << sim.status();

  RouterTwin router(profile, policy_name);
  ASSERT_TRUE(router.Run(arrivals).ok());

  const auto& a = router.events;
  const auto& b = sim_trace.events;
  size_t first_diff = 0;
  while (first_diff < std::min(a.size(), b.size()) && a[first_diff] == b[first_diff]) ++first_diff;
  EXPECT_EQ(a.size(), b.size()) << policy_name;
  if (first_diff < std::max(a.size(), b.size())) {
    ADD_FAILURE() << policy_name << ": first difference at event " << first_diff << "\n  router: "
                  << (first_diff < a.size() ? a[first_diff] : "<end>")
                  << "\n  simulator: " << (first_diff < b.size() ? b[first_diff] : "<end>");
  }
  // The run exercised what it claims to: batching, drops and a lost worker.
  int64_t batches = 0, multi = 0, dropped = 0;
  for (const auto& e : b) {
    if (e.find(" batch ") != std::string::npos) {
      ++batches;
      if (e.find(',') != std::string::npos) ++multi;
    }
    if (e.find("deadline_exceeded") != std::string::npos) ++dropped;
  }
  EXPECT_GT(batches, 100) << policy_name;
  EXPECT_GT(multi, 10) << policy_name << ": some batches hold several queries";
  EXPECT_GT(dropped, 0) << policy_name << ": the burst overloads the remaining workers";
  EXPECT_EQ(sim->met + sim->late + sim->dropped, sim->queries);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, TwinTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           std::replace(n.begin(), n.end(), '+', 'P');
                           return n;
                         });

}  // namespace
}  // namespace superserve
