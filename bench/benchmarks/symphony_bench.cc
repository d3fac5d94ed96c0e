// `symphony`: the serving core's scheduling throughput with Symphony's policy
// for 100 models sharing 256 workers, against one model on the same 256
// workers at the same total rate, in the same run. A decision is one answer
// of a policy to "what next?" (dispatch, wait until, or drop), asked by the
// core on an arrival, a completion or a wake-up. The wall time includes the
// simulator's own event loop, so the figure is a lower bound on the core's.
// "On one core" is measured as this thread's CPU time (the machines are
// shared: wall time there counts other processes' turns too); wall-clock
// figures are reported beside it. Even CPU time moves 2-3x between runs on a
// shared host (caches, frequency), so both cases run kRepeats times,
// interleaved, and the median and the fastest repetition are reported; the
// target is judged on the median.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/benchmark_registry.h"
#include "bench/sim/simulator.h"
#include "bench/sim/symphony_cases.h"
#include "bench/sim/trace_generators.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "policies/symphony_policy.h"

namespace superserve::bench::symphony_bench {
namespace {

// Counts the decisions the core asks of the policy it forwards to.
class CountingPolicy final : public Policy {
 public:
  CountingPolicy(std::unique_ptr<Policy> policy, int64_t* decisions)
      : policy_(std::move(policy)), decisions_(decisions) {}
  std::string_view name() const override { return policy_->name(); }
  Decision Decide(const SchedulingContext& ctx) override {
    ++*decisions_;
    return policy_->Decide(ctx);
  }
  Nanos Urgency(const EdfQueue& queue, Nanos now) const override {
    return policy_->Urgency(queue, now);
  }
  void OnArrival(const Query& q, Nanos now) override { policy_->OnArrival(q, now); }
  void OnCompletion(const CompletionTelemetry& t) override { policy_->OnCompletion(t); }

 private:
  std::unique_ptr<Policy> policy_;
  int64_t* decisions_;
};

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Run {
  int64_t decisions = 0;
  int64_t queries = 0;
  int64_t batches = 0;
  double seconds = 0;       // thread CPU time
  double wall_seconds = 0;
  double attainment = 0;
  double per_s() const { return decisions / seconds; }
  double per_wall_s() const { return decisions / wall_seconds; }
};

Run Measure(int32_t models, int32_t workers, double rate, Nanos duration) {
  MultiModelTraceOptions t;
  t.models = models;
  t.rate = rate;
  t.duration = duration;
  Trace trace = *MultiModelArrivals(t);
  std::vector<ModelProfile> profiles;
  profiles.reserve(models);
  for (int32_t m = 0; m < models; ++m) {
    profiles.push_back(LinearProfile(trace.model_names[m], 1.053, 5.072, 64));
  }
  Run run;
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<SimulatedModel> sim_models;
  for (int32_t m = 0; m < models; ++m) {
    policies.push_back(std::make_unique<CountingPolicy>(
        std::make_unique<SymphonyPolicy>(profiles[m]), &run.decisions));
    sim_models.push_back({&profiles[m], policies.back().get(), Millis(25)});
  }
  SimulatorOptions o;
  o.workers = workers;
  o.slo = Millis(25);
  const Nanos t0 = RealClock::Get()->Now();
  const double c0 = ThreadCpuSeconds();
  auto r = SimulateModels(sim_models, trace.arrivals, trace.model, o);
  run.seconds = ThreadCpuSeconds() - c0;
  run.wall_seconds = ToSeconds(RealClock::Get()->Now() - t0);
  if (r.ok()) {
    run.queries = r->queries;
    run.batches = r->batches;
    run.attainment = r->slo_attainment();
  }
  return run;
}

// The repetition at the median (upper median) and the fastest one, by CPU time.
std::pair<Run, Run> MedianAndFastest(std::vector<Run> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
  return {runs[runs.size() / 2], runs.front()};
}

int RunSymphony(const BenchmarkArgs& args) {
  constexpr int32_t kWorkers = 256;
  constexpr int kRepeats = 5;
  // About half of what 256 workers sustain at SLO 25 ms (~187k q/s staggered).
  const double rate = 0.5 * StaggeredBound(1.053, 5.072, 25, kWorkers).throughput;
  const Nanos duration = Seconds(2);
  std::vector<Run> ones, manys;
  for (int i = 0; i < kRepeats; ++i) {
    ones.push_back(Measure(1, kWorkers, rate, duration));
    manys.push_back(Measure(100, kWorkers, rate, duration));
    std::fprintf(stderr, "symphony: repetition %d/%d: 1 model %.2f M/s, 100 models %.2f M/s\n",
                 i + 1, kRepeats, ones.back().per_s() / 1e6, manys.back().per_s() / 1e6);
  }
  const auto [one, one_best] = MedianAndFastest(ones);
  const auto [many, many_best] = MedianAndFastest(manys);
  const double ratio = many.per_s() / one.per_s();
  for (const auto& [label, r] : {std::pair<const char*, const Run&>{"1 model   ", one},
                                 std::pair<const char*, const Run&>{"100 models", many}}) {
    std::printf("%s x %d workers, %.0f q/s for %.0f s: %lld queries, %lld batches, %lld "
                "decisions in %.3f s CPU = %.2f M decisions/s (median of %d; wall %.3f s: "
                "%.2f M/s; attainment %.4f)\n",
                label, kWorkers, rate, ToSeconds(duration), static_cast<long long>(r.queries),
                static_cast<long long>(r.batches), static_cast<long long>(r.decisions), r.seconds,
                r.per_s() / 1e6, kRepeats, r.wall_seconds, r.per_wall_s() / 1e6, r.attainment);
  }
  std::printf("fastest of %d: 1 model %.2f M decisions/s, 100 models %.2f M decisions/s\n",
              kRepeats, one_best.per_s() / 1e6, many_best.per_s() / 1e6);
  std::printf("100 models / 1 model: %.3f (target >= 1 M decisions/s with 100 models, median: "
              "%s)\n",
              ratio, many.per_s() >= 1e6 ? "met" : "missed");
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "symphony")
                            .Add("workers", kWorkers)
                            .Add("rate_qps", rate)
                            .Add("decisions_per_s_100_models", many.per_s())
                            .Add("decisions_per_s_1_model", one.per_s())
                            .Add("ratio_100_vs_1", ratio)
                            .Add("repeats", kRepeats)
                            .Add("best_decisions_per_s_100_models", many_best.per_s())
                            .Add("best_decisions_per_s_1_model", one_best.per_s())
                            .Add("wall_decisions_per_s_100_models", many.per_wall_s())
                            .Add("wall_decisions_per_s_1_model", one.per_wall_s())
                            .Add("queries_per_s_100_models", many.queries / many.seconds)
                            .Add("attainment_100_models", many.attainment)
                            .Add("attainment_1_model", one.attainment)
                            .Add("target_decisions_per_s", 1e6)
                            .Add("target_met", many.per_s() >= 1e6)
                            .ToString()
                            .c_str());
  }
  return 0;
}

RegisterBenchmark reg("symphony",
                      "serving-core decisions/s with Symphony: 100 models x 256 workers vs one "
                      "model on the same workers and rate",
                      RunSymphony);

}  // namespace
}  // namespace superserve::bench::symphony_bench
