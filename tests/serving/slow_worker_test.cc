// A straggler on the simulated clock: one of two workers runs every batch 3x
// its profiled time. With per-worker speed estimates (the default) the core
// learns its factor and its policy plans its batches with the slack divided
// by it: the straggler gets smaller or faster work, the normal worker keeps
// the fleet's estimates, and more queries meet their deadline than with one
// shared estimate (ServingOptions::per_worker_speed = false).
#include <deque>
#include <map>
#include <memory>
#include <random>

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

struct WorkerStats {
  int batches = 0;
  double queries = 0;
  double profiled_ms = 0;  // summed profiled latency of the tuples it was given
};

struct RunResult {
  double attainment = 0;
  WorkerStats normal, straggler;
};

// Two workers (0 normal, 1 at `slowdown` x), Poisson arrivals at `qps`,
// SLO `slo`, for `duration` of simulated time.
RunResult RunStraggler(bool per_worker_speed, double slowdown, double qps, Nanos slo,
                       Nanos duration, const std::string& policy, int straggler = 1) {
  SimulatedClock clock(Seconds(1));
  ServingOptions o;
  o.missed_heartbeats = 0;
  o.per_worker_speed = per_worker_speed;
  o.log_lifecycle = false;
  const ModelProfile profile = testing::ThreeSubnetProfile();
  ServingCore core(o, &clock);
  EXPECT_TRUE(core.AddModel(profile, *MakePolicy(policy, profile, PolicyConfig())).ok());
  std::vector<std::shared_ptr<FakeChannel>> channels;
  std::vector<int32_t> ids;
  for (int i = 0; i < 2; ++i) {
    channels.push_back(std::make_shared<FakeChannel>());
    WorkerRegistration r;
    r.models = {"hand"};
    ids.push_back(*core.RegisterWorker(r, channels.back()));
  }
  double factor[2] = {1.0, 1.0};
  factor[straggler] = slowdown;
  // Each worker runs its batches one after another: (completion time, plan).
  std::vector<std::deque<std::pair<Nanos, BatchPlan>>> running(2);
  std::vector<Nanos> busy_until(2, clock.Now());
  WorkerStats stats[2];
  std::vector<std::unique_ptr<FakeHandle>> handles;
  std::mt19937_64 rng(5);
  std::exponential_distribution<double> gap(qps);
  Nanos next_arrival = clock.Now();
  const Nanos end = clock.Now() + duration;
  const Nanos step = Micros(100);
  while (clock.Now() < end) {
    while (next_arrival <= clock.Now()) {
      handles.push_back(std::make_unique<FakeHandle>(&clock, clock.Now() + slo));
      QueryRequest r;
      r.model = "hand";
      r.deadline = clock.Now() + slo;
      core.Submit(handles.back().get(), r);
      next_arrival += static_cast<Nanos>(gap(rng) * 1e9);
    }
    for (int i = 0; i < 2; ++i) {
      while (!channels[i]->sent.empty()) {
        BatchPlan b = std::move(channels[i]->sent.front());
        channels[i]->sent.pop_front();
        const Nanos profiled =
            profile.subnets[b.subnet_index].latency[profile.BatchIndex(b.batch_size)];
        const Nanos exec = static_cast<Nanos>(factor[i] * static_cast<double>(profiled));
        const Nanos start = std::max(busy_until[i], clock.Now());
        busy_until[i] = start + exec;
        stats[i].batches++;
        stats[i].queries += static_cast<double>(b.queries.size());
        stats[i].profiled_ms += ToMillis(profiled);
        running[i].emplace_back(busy_until[i], std::move(b));
      }
      while (!running[i].empty() && running[i].front().first <= clock.Now()) {
        BatchPlan b = std::move(running[i].front().second);
        running[i].pop_front();
        BatchOutcome out;
        out.batch_id = b.batch_id;
        const Nanos profiled =
            profile.subnets[b.subnet_index].latency[profile.BatchIndex(b.batch_size)];
        out.exec = static_cast<Nanos>(factor[i] * static_cast<double>(profiled));
        for (QueryId id : b.queries) out.outputs.emplace_back(id, nullptr);
        core.OnBatchResult(ids[i], std::move(out));
      }
    }
    EXPECT_TRUE(clock.Advance(step).ok());
    core.Tick();
  }
  // Let everything finish.
  for (int k = 0; k < 2000; ++k) {
    EXPECT_TRUE(clock.Advance(step).ok());
    for (int i = 0; i < 2; ++i) {
      while (!running[i].empty() && running[i].front().first <= clock.Now()) {
        BatchPlan b = std::move(running[i].front().second);
        running[i].pop_front();
        BatchOutcome out;
        out.batch_id = b.batch_id;
        out.exec = Millis(1);
        for (QueryId id : b.queries) out.outputs.emplace_back(id, nullptr);
        core.OnBatchResult(ids[i], std::move(out));
      }
      while (!channels[i]->sent.empty()) {
        BatchPlan b = std::move(channels[i]->sent.front());
        channels[i]->sent.pop_front();
        running[i].emplace_back(clock.Now() + Millis(1), std::move(b));
      }
    }
    core.Tick();
  }
  core.Shutdown();
  RunResult r;
  int ok = 0;
  for (const auto& h : handles) {
    EXPECT_EQ(h->answers, 1);
    ok += h->in_slo() ? 1 : 0;
  }
  r.attainment = static_cast<double>(ok) / static_cast<double>(handles.size());
  r.normal = stats[1 - straggler];
  r.straggler = stats[straggler];
  return r;
}

class SlowWorkerTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Policies, SlowWorkerTest,
                         ::testing::Values("slackfit", "maxacc", "maxbatch"));

TEST_P(SlowWorkerTest, AStragglerGetsLighterWorkAndAttainmentHolds) {
  // ~60 % of the two workers' capacity at the fleet's speed; SLO 12 ms:
  // a 3x straggler can run the fast subnet at small batches only.
  const Nanos slo = Millis(12);
  const RunResult on = RunStraggler(true, 3.0, 600, slo, Seconds(4), GetParam());
  const RunResult off = RunStraggler(false, 3.0, 600, slo, Seconds(4), GetParam());
  auto mean_profiled = [](const WorkerStats& s) { return s.profiled_ms / std::max(1, s.batches); };
  std::printf("%s per-worker: attainment %.4f, normal %d batches %.2f q/batch %.2f ms; straggler "
              "%d batches %.2f q/batch %.2f ms\n",
              GetParam().c_str(), on.attainment, on.normal.batches,
              on.normal.queries / std::max(1, on.normal.batches), mean_profiled(on.normal),
              on.straggler.batches, on.straggler.queries / std::max(1, on.straggler.batches),
              mean_profiled(on.straggler));
  std::printf("%s shared:     attainment %.4f, normal %d batches %.2f q/batch %.2f ms; straggler "
              "%d batches %.2f q/batch %.2f ms\n",
              GetParam().c_str(), off.attainment, off.normal.batches,
              off.normal.queries / std::max(1, off.normal.batches), mean_profiled(off.normal),
              off.straggler.batches, off.straggler.queries / std::max(1, off.straggler.batches),
              mean_profiled(off.straggler));
  // (a) The straggler's batches are lighter (profiled time) than the normal
  // worker's.
  EXPECT_LT(mean_profiled(on.straggler), mean_profiled(on.normal));
  // (b) Attainment is at least as high as with one shared estimate, and
  // near-perfect.
  EXPECT_GE(on.attainment, off.attainment);
  EXPECT_GE(on.attainment, 0.99);
}

// The straggler with the lower id is offered free slots first (a straggler
// that declines must not end the pass: the normal worker is asked next).
// Note: these runs do not exercise the straggler's wake-up requests (the
// fix for those, ServingCore::ScheduleLocked, was found and checked with
// the real-process test; docs/faults.md).
TEST_P(SlowWorkerTest, AStragglerOfferedFirstStillGetsLighterWorkAndAttainmentHolds) {
  const RunResult on = RunStraggler(true, 3.0, 600, Millis(12), Seconds(4), GetParam(), 0);
  const RunResult off = RunStraggler(false, 3.0, 600, Millis(12), Seconds(4), GetParam(), 0);
  std::printf("%s straggler first: attainment per-worker %.4f, shared %.4f\n", GetParam().c_str(),
              on.attainment, off.attainment);
  EXPECT_LT(on.straggler.profiled_ms / std::max(1, on.straggler.batches),
            on.normal.profiled_ms / std::max(1, on.normal.batches));
  EXPECT_GE(on.attainment, off.attainment);
  EXPECT_GE(on.attainment, 0.99);
}

}  // namespace
}  // namespace superserve
