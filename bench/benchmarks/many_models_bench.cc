// `many-models [--quick]`: placement (issue 43; Clockwork's LOAD/UNLOAD) in
// the simulator. 1,000 and 4,000 models, each 100 MB and 10 ms to load, with
// per-model rates heavy-tailed like the Azure Functions trace: Zipf shares
// (exponent 1.2: the hottest 10 % of models carry 83 % (1,000) and 88 %
// (4,000) of the queries, the coldest half 4 % and 3 %; the hottest model
// alone 22 %), each model its own gamma process (squared CV 2),
// 3,000 q/s in all for 20 s. 16 emulated workers whose memory holds 10 % of
// the models (1,000: 6 each; 4,000: 25 each), SLO 100 ms, the default
// policy. Baseline in the same run: the same trace with placement off
// (memory unlimited: every model resident on every worker). The fleet
// starts empty: the first 2 s (1 s with --quick) are a warm-up, left out of
// the figures (attainment with it is reported as attainment_incl_warmup).
//
// Router CPU per query is this thread's CPU time over the whole simulation
// (the serving core and the emulation around it) per query: an upper bound
// on the core's own cost. --quick: 200 and 400 models for 5 s (CLI test).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "bench/benchmark_registry.h"
#include "bench/sim/simulator.h"
#include "bench/sim/trace_generators.h"
#include "common/json_writer.h"
#include "common/model_profile.h"
#include "policies/policy_factory.h"

ABSL_FLAG(bool, quick, false, "many-models: 200 and 400 models for 5 s (a smoke run).");

namespace superserve::bench::many_models_bench {
namespace {

constexpr int32_t kWorkers = 16;
constexpr int64_t kModelBytes = 100'000'000;
constexpr Nanos kLoadTime = 10'000'000;  // 10 ms
constexpr double kZipf = 1.2;
constexpr double kCv2 = 2.0;
constexpr double kRate = 3000;
constexpr Nanos kSlo = 100'000'000;  // 100 ms

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One ResNet-50-like model: batches 1..16, 2 ms + 0.5 ms per query.
ModelProfile Profile(const std::string& name) {
  ModelProfile p;
  p.model = name;
  p.batch_sizes = {1, 2, 4, 8, 16};
  SubnetProfile s;
  s.id = 0;
  s.accuracy = 76;
  for (int b : p.batch_sizes) s.latency.push_back(Micros(2000 + 500 * b));
  p.subnets.push_back(s);
  p.memory_bytes = kModelBytes;
  p.load_time = kLoadTime;
  return p;
}

struct Outcome {
  double attainment = 0;
  double attainment_incl_warmup = 0;
  double hottest = 0;  // attainment over the hottest 10 % of models
  double cpu_us_per_query = 0;
  double loads_per_s = 0;
  double unloads_per_s = 0;
  double cold_p50_ms = 0;
  double cold_p99_ms = 0;
  int64_t load_too_late = 0;
  int64_t queries = 0;
};

double Percentile(std::vector<Nanos> v, double q) {
  if (v.empty()) return 0;
  const size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return ToMillis(v[k]);
}

absl::StatusOr<Outcome> RunOnce(const std::vector<ModelProfile>& profiles, const Trace& trace,
                                Nanos warmup, Nanos duration, int64_t memory_bytes) {
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<SimulatedModel> models;
  policies.reserve(profiles.size());
  for (const ModelProfile& p : profiles) {
    auto made = MakePolicy(PolicySpec().name, p, PolicySpec().config);
    if (!made.ok()) return made.status();
    policies.push_back(*std::move(made));
    models.push_back({&p, policies.back().get(), 0});
  }
  SimulatorOptions o;
  o.workers = kWorkers;
  o.slo = kSlo;
  o.timeline = false;
  o.worker_memory_bytes = memory_bytes;
  o.measure_from = warmup;
  const double c0 = ThreadCpuSeconds();
  auto r = SimulateModels(models, trace.arrivals, trace.model, o);
  const double c1 = ThreadCpuSeconds();
  if (!r.ok()) return r.status();
  Outcome out;
  out.attainment_incl_warmup = r->slo_attainment();
  const size_t hot = std::max<size_t>(1, profiles.size() / 10);
  int64_t hq = 0, hm = 0, q = 0, met = 0;
  for (size_t i = 0; i < profiles.size(); ++i) {  // trace models are ranked hottest first
    q += r->model_queries[i];
    met += r->model_met[i];
    if (i < hot) {
      hq += r->model_queries[i];
      hm += r->model_met[i];
    }
  }
  out.queries = q;
  out.attainment = q > 0 ? static_cast<double>(met) / static_cast<double>(q) : 1;
  out.hottest = hq > 0 ? static_cast<double>(hm) / static_cast<double>(hq) : 1;
  duration -= warmup;
  out.cpu_us_per_query = r->queries > 0 ? (c1 - c0) * 1e6 / static_cast<double>(r->queries) : 0;
  out.loads_per_s = static_cast<double>(r->loads) / ToSeconds(duration);
  out.unloads_per_s = static_cast<double>(r->unloads) / ToSeconds(duration);
  out.cold_p50_ms = Percentile(r->cold_starts, 0.5);
  out.cold_p99_ms = Percentile(r->cold_starts, 0.99);
  out.load_too_late = r->load_too_late;
  return out;
}

int RunManyModels(const BenchmarkArgs& args) {
  const bool quick = absl::GetFlag(FLAGS_quick);
  const std::vector<int32_t> counts = quick ? std::vector<int32_t>{200, 400}
                                            : std::vector<int32_t>{1000, 4000};
  const Nanos duration = quick ? Seconds(5) : Seconds(20);
  const Nanos warmup = quick ? Seconds(1) : Seconds(2);
  JsonWriter j;
  j.Add("benchmark", "many-models")
      .Add("workers", kWorkers)
      .Add("slo_ms", ToMillis(kSlo))
      .Add("rate_qps", kRate)
      .Add("zipf", kZipf)
      .Add("cv2", kCv2)
      .Add("load_ms", ToMillis(kLoadTime))
      .Add("duration_s", ToSeconds(duration))
      .Add("warmup_s", ToSeconds(warmup))
      .Add("quick", quick);
  Outcome last, last_base;
  for (int32_t n : counts) {
    std::vector<ModelProfile> profiles;
    profiles.reserve(n);
    MultiModelTraceOptions t;
    t.models = n;
    t.rate = kRate;
    t.cv2 = kCv2;
    t.zipf_s = kZipf;
    t.duration = duration;
    t.seed = 43;
    auto trace = MultiModelArrivals(t);
    if (!trace.ok()) {
      std::fprintf(stderr, "many-models: %s\n", trace.status().ToString().c_str());
      return 1;
    }
    for (const std::string& name : trace->model_names) profiles.push_back(Profile(name));
    // Memory for 10 % of the models over the fleet (whole models per worker).
    const int64_t per_worker = std::max<int64_t>(1, n / 10 / kWorkers);
    auto placed = RunOnce(profiles, *trace, warmup, duration, per_worker * kModelBytes);
    auto base = RunOnce(profiles, *trace, warmup, duration, 0);
    if (!placed.ok() || !base.ok()) {
      std::fprintf(stderr, "many-models: %s\n",
                   (!placed.ok() ? placed.status() : base.status()).ToString().c_str());
      return 1;
    }
    const double ratio = base->attainment > 0 ? placed->attainment / base->attainment : 0;
    std::printf(
        "%d models, %lld queries after the warm-up, %d workers x %lld models of memory: "
        "attainment %.4f (hottest 10 %%: %.4f; %.4f with the warm-up) vs unlimited %.4f (hottest "
        "%.4f), ratio %.4f; %.1f loads/s, "
        "%.1f unloads/s, cold start p50 %.1f ms p99 %.1f ms, %lld answered at once (load too "
        "late); CPU %.2f us/query (unlimited %.2f)\n",
        n, static_cast<long long>(placed->queries), kWorkers, static_cast<long long>(per_worker),
        placed->attainment, placed->hottest, placed->attainment_incl_warmup, base->attainment,
        base->hottest, ratio,
        placed->loads_per_s, placed->unloads_per_s, placed->cold_p50_ms, placed->cold_p99_ms,
        static_cast<long long>(placed->load_too_late), placed->cpu_us_per_query,
        base->cpu_us_per_query);
    const std::string k = "m" + std::to_string(n) + "_";
    j.Add(k + "attainment", placed->attainment)
        .Add(k + "attainment_hottest_10pct", placed->hottest)
        .Add(k + "attainment_incl_warmup", placed->attainment_incl_warmup)
        .Add(k + "unlimited_attainment_incl_warmup", base->attainment_incl_warmup)
        .Add(k + "unlimited_attainment", base->attainment)
        .Add(k + "unlimited_attainment_hottest_10pct", base->hottest)
        .Add(k + "attainment_ratio_vs_unlimited", ratio)
        .Add(k + "loads_per_s", placed->loads_per_s)
        .Add(k + "unloads_per_s", placed->unloads_per_s)
        .Add(k + "cold_start_ms_p50", placed->cold_p50_ms)
        .Add(k + "cold_start_ms_p99", placed->cold_p99_ms)
        .Add(k + "load_too_late", placed->load_too_late)
        .Add(k + "router_cpu_us_per_query", placed->cpu_us_per_query)
        .Add(k + "unlimited_router_cpu_us_per_query", base->cpu_us_per_query);
    last = *placed;
    last_base = *base;
  }
  // The headline keys: the largest run.
  j.Add("models", counts.back())
      .Add("attainment", last.attainment)
      .Add("attainment_hottest_10pct", last.hottest)
      .Add("attainment_incl_warmup", last.attainment_incl_warmup)
      .Add("attainment_ratio_vs_unlimited",
           last_base.attainment > 0 ? last.attainment / last_base.attainment : 0)
      .Add("loads_per_s", last.loads_per_s)
      .Add("unloads_per_s", last.unloads_per_s)
      .Add("cold_start_ms_p50", last.cold_p50_ms)
      .Add("cold_start_ms_p99", last.cold_p99_ms)
      .Add("router_cpu_us_per_query", last.cpu_us_per_query);
  if (args.json) std::printf("%s\n", j.ToString().c_str());
  return 0;
}

RegisterBenchmark reg("many-models",
                      "placement: 1,000 and 4,000 Azure-shaped models on 16 simulated workers "
                      "holding 10 % of them (loads, evictions) vs unlimited memory; --quick: "
                      "200 and 400 models",
                      RunManyModels);

}  // namespace
}  // namespace superserve::bench::many_models_bench
