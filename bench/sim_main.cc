// superserve-sim: replays one arrival trace against N emulated workers under
// one scheduling policy on the simulated clock; see --help.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/baselines/baselines.h"
#include "bench/sim/simulator.h"
#include "bench/sim/trace.h"
#include "common/dashed_flags.h"
#include "common/init.h"
#include "common/json_writer.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "policies/orloj_policy.h"
#include "policies/orloj_score.h"
#include "policies/policy_factory.h"
#include "policies/policy_flags.h"

ABSL_FLAG(std::string, profile, "", "ModelProfile JSON file (required).");
ABSL_FLAG(std::string, trace, "", "Trace CSV with header arrival_us (required).");
// The policy flags (--policy, --fixed_subnet, --ratefit_pace, --buckets,
// --follow_drift, ..., --initial_overhead_us) are policies/policy_flags.h's,
// shared with superserve-router and superserve-repro.
ABSL_FLAG(int32_t, workers, 8, "Emulated workers.");
ABSL_FLAG(double, slo_ms, 36,
          "Latency SLO per query in milliseconds, in [1e-6, 8.64e7] (1 ns to a day, the "
          "router's longest timeout).");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the execution-time noise.");
ABSL_FLAG(double, noise_cv, 0,
          "Execution-time noise: lognormal, mean 1, this CV (0 = none; finite, >= 0).");
ABSL_FLAG(double, exec_scale, 1.0,
          "Executions take the profile's latency times this (a machine slower than its "
          "profile), in (0, 1e6]; policies still start from the profile.");
ABSL_FLAG(double, dispatch_overhead_us, 500,
          "Simulated RPC + transfer time added to every batch, us, in [0, 8.64e10] (a day; the "
          "policy's estimate before telemetry is --initial_overhead_us).");
ABSL_FLAG(std::vector<std::string>, fail_worker_at, {},
          "Times in seconds (comma-separated or the flag repeated), in [0, 9.2e9] (the trace's "
          "range); at each, one more worker fails (the highest live id; its batch is "
          "re-queued).");
ABSL_FLAG(bool, shed_overload, true,
          "The serving core's overload shedding (the router's --shed_overload).");
ABSL_FLAG(std::string, timeline, "", "Write a per-second timeline CSV here.");
ABSL_FLAG(double, timeline_bin_s, 1.0,
          "Timeline bin width in seconds, in [1e-6, 86400]; the timeline holds at most a "
          "million bins.");
ABSL_FLAG(bool, json, false, "End with one JSON object on the last line.");
ABSL_FLAG(std::string, exec_times, "",
          "Dynamic models: replay each query's own execution time from this file (one value "
          "in us per line, in [0, 8.64e10] (a day), in trace order) instead of drawing it from "
          "its application's histogram with --seed.");
ABSL_FLAG(double, orloj_viable_quantile, superserve::OrlojScoreTable::Params().viable_quantile,
          "orloj: a request stays in a batch size's queue while its time left is at least this "
          "quantile of that batch's time (Algorithm 1, EstimateBatchLatency), in (0, 1].");
ABSL_FLAG(double, orloj_b_per_ms, superserve::OrlojScoreTable::Params().b_per_us * 1000,
          "orloj: b, the rate of the anticipated delay (finite, >= 0; 0: one third of each "
          "batch's expected time).");
ABSL_FLAG(int32_t, orloj_bins, superserve::OrlojScoreTable::Params().grid_bins,
          "orloj: bins of each batch-latency histogram, in [1, 1024]: a decision looks at every "
          "(batch size, application, bin) group, so its cost grows with the bins (a 971-query "
          "trace: 0.01 s at 48 bins, 0.04 s at 1024, 0.17 s at 4000).");
ABSL_FLAG(bool, orloj_every_batch_size, superserve::OrlojOptions().every_batch_size,
          "orloj: one queue per batch size 1..max instead of the profile's sizes.");

namespace {

// A flag's value outside its range: a usage error (exit 2, as for the policy
// flags) that names the flag, the value and the allowed range.
int FlagError(const char* flag, double value, const std::string& range) {
  std::fprintf(stderr, "superserve-sim: --%s must be %s; got %s\n", flag, range.c_str(),
               absl::StrCat(value).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // The paper baselines (slackfit, maxbatch, ..., clockwork, nexus) for --policy.
  superserve::RegisterBaselinePolicies();
  superserve::AcceptDashedFlagNames(argc, argv);
  std::vector<std::string> merged_args;
  superserve::MergeRepeatedListFlag("fail_worker_at", &argc, &argv, &merged_args);
  superserve::InitMain(argc, argv,
                       "superserve-sim --profile FILE --trace FILE --policy NAME [--fixed-subnet "
                       "ID] [--buckets K] --workers N --slo-ms X --seed S [--fail-worker-at "
                       "SEC,...] [--timeline FILE] [--exec-times FILE] [--json]\n\nDiscrete-event simulation of "
                       "the router's EDF queue and a scheduling policy over emulated workers. A "
                       "profile with a dynamic block (per-application execution-time histograms) is "
                       "a dynamic DNN: schedule it with --policy orloj (baselines: clockwork|nexus); the trace's "
                       "application (or app) column names each query's application. The policy "
                       "flags and their defaults are superserve-router's (one shared set); "
                       "--print-policy-config prints the effective configuration.");
  using namespace superserve;
  // Orloj's options are superserve-sim's own flags (ranges checked below);
  // --print_policy_config prints them with the shared ones.
  const PolicySpec spec = PolicySpecFromFlagsOrExit("superserve-sim", [](PolicyConfig& c) {
    c.orloj.score.viable_quantile = absl::GetFlag(FLAGS_orloj_viable_quantile);
    c.orloj.score.b_per_us = absl::GetFlag(FLAGS_orloj_b_per_ms) / 1000;
    c.orloj.score.grid_bins = absl::GetFlag(FLAGS_orloj_bins);
    c.orloj.every_batch_size = absl::GetFlag(FLAGS_orloj_every_batch_size);
  });
  if (absl::GetFlag(FLAGS_profile).empty() || absl::GetFlag(FLAGS_trace).empty()) {
    std::fprintf(stderr, "superserve-sim: --profile and --trace are required (see --help)\n");
    return 2;
  }
  // Every range below keeps its value's nanoseconds well inside an int64
  // (e.g. an SLO of 1e13 ms overflowed into a negative deadline).
  const double slo_ms = absl::GetFlag(FLAGS_slo_ms);
  if (!(slo_ms >= 1e-6 && slo_ms <= ToMillis(kMaxQueryTimeout))) {
    return FlagError("slo_ms", slo_ms,
                     absl::StrCat("in [1e-06, ", ToMillis(kMaxQueryTimeout),
                                  "] ms (1 ns to a day, the router's longest timeout)"));
  }
  const double noise_cv = absl::GetFlag(FLAGS_noise_cv);
  if (!(noise_cv >= 0) || !std::isfinite(noise_cv)) {
    return FlagError("noise_cv", noise_cv, "finite and >= 0");
  }
  // A million times the profile turns a 10-ms batch into 3 hours; far
  // beyond it the scaled latency overflows the nanoseconds.
  const double exec_scale = absl::GetFlag(FLAGS_exec_scale);
  if (!(exec_scale > 0 && exec_scale <= 1e6)) {
    return FlagError("exec_scale", exec_scale, "in (0, 1e+06]");
  }
  const double overhead_us = absl::GetFlag(FLAGS_dispatch_overhead_us);
  if (!(overhead_us >= 0 && overhead_us <= ToMicros(kMaxQueryTimeout))) {
    return FlagError("dispatch_overhead_us", overhead_us,
                     absl::StrCat("in [0, ", ToMicros(kMaxQueryTimeout), "] us (a day)"));
  }
  const double bin_s = absl::GetFlag(FLAGS_timeline_bin_s);
  if (!(bin_s >= 1e-6 && bin_s <= 86400)) {
    return FlagError("timeline_bin_s", bin_s, "in [1e-06, 86400] s (1 us to a day)");
  }
  const double viable_quantile = absl::GetFlag(FLAGS_orloj_viable_quantile);
  if (!(viable_quantile > 0 && viable_quantile <= 1)) {
    return FlagError("orloj_viable_quantile", viable_quantile, "in (0, 1]");
  }
  const double b_per_ms = absl::GetFlag(FLAGS_orloj_b_per_ms);
  if (!(b_per_ms >= 0) || !std::isfinite(b_per_ms)) {
    return FlagError("orloj_b_per_ms", b_per_ms, "finite and >= 0");
  }
  const int32_t orloj_bins = absl::GetFlag(FLAGS_orloj_bins);
  if (orloj_bins < 1 || orloj_bins > OrlojScoreTable::kMaxGridBins) {
    return FlagError("orloj_bins", orloj_bins,
                     absl::StrCat("in [1, ", OrlojScoreTable::kMaxGridBins,
                                  "] (see --help: a decision's cost grows with the bins)"));
  }
  std::vector<Nanos> failures;
  for (const std::string& s : absl::GetFlag(FLAGS_fail_worker_at)) {
    constexpr double kMaxSeconds = Trace::kMaxArrivalUs / 1e6;
    const std::string range = absl::StrCat("in [0, ", kMaxSeconds, "] s (the trace's range)");
    double sec = 0;
    if (!absl::SimpleAtod(s, &sec)) {
      std::fprintf(stderr, "superserve-sim: --fail_worker_at must be %s; got \"%s\"\n",
                   range.c_str(), s.c_str());
      return 2;
    }
    if (!(sec >= 0 && sec <= kMaxSeconds)) return FlagError("fail_worker_at", sec, range);
    failures.push_back(Seconds(sec));
  }
  auto profile = ModelProfile::LoadFile(absl::GetFlag(FLAGS_profile));
  if (!profile.ok()) {
    std::fprintf(stderr, "superserve-sim: %s\n", profile.status().ToString().c_str());
    return 1;
  }
  for (const std::string& w : profile->warnings) {
    std::fprintf(stderr, "superserve-sim: warning: %s\n", w.c_str());
  }
  auto trace = Trace::ReadCsv(absl::GetFlag(FLAGS_trace));
  if (!trace.ok()) {
    std::fprintf(stderr, "superserve-sim: %s\n", trace.status().ToString().c_str());
    return 1;
  }
  const PolicyConfig& config = spec.config;
  auto policy = MakePolicy(spec.name, *profile, config);
  if (!policy.ok()) {
    std::fprintf(stderr, "superserve-sim: %s\n", policy.status().ToString().c_str());
    return 2;
  }
  SimulatorOptions options;
  options.workers = absl::GetFlag(FLAGS_workers);
  options.slo = std::max<Nanos>(1, Millis(slo_ms));
  options.seed = absl::GetFlag(FLAGS_seed);
  options.noise_cv = noise_cv;
  options.exec_scale = exec_scale;
  options.dispatch_overhead = Micros(overhead_us);
  options.serving.overload.shed = absl::GetFlag(FLAGS_shed_overload);
  // Without --timeline no timeline is kept: its bins span the trace's time,
  // not its queries (two queries 1e14 us apart took 9 GB).
  options.timeline = !absl::GetFlag(FLAGS_timeline).empty();
  options.timeline_bin = Seconds(bin_s);
  options.worker_failures = std::move(failures);
  const std::string& exec_times = absl::GetFlag(FLAGS_exec_times);
  if (!exec_times.empty() && !profile->is_dynamic) {
    std::fprintf(stderr,
                 "superserve-sim: --exec_times replays a dynamic model's per-query times; "
                 "profile %s has no dynamic block (its executions take its profiled latency)\n",
                 profile->model.c_str());
    return 2;
  }
  if (profile->is_dynamic) {
    // The trace's application names -> the profile's applications.
    std::vector<int32_t> index_of_name;
    for (const std::string& name : trace->app_names) {
      int32_t found = -1;
      for (size_t i = 0; i < profile->dynamic.applications.size(); ++i) {
        if (profile->dynamic.applications[i].application == name) found = static_cast<int32_t>(i);
      }
      if (found < 0) {
        std::fprintf(stderr, "superserve-sim: trace application \"%s\" is not in profile %s\n",
                     name.c_str(), profile->model.c_str());
        return 1;
      }
      index_of_name.push_back(found);
    }
    for (int32_t a : trace->app) options.applications.push_back(index_of_name[a]);
    // Without an app column every query would silently be the profile's
    // first application (SimulatorOptions::applications empty): with
    // several, that is rarely what the trace meant.
    const auto& apps = profile->dynamic.applications;
    if (trace->app.empty() && trace->size() > 0 && apps.size() > 1) {
      std::fprintf(stderr,
                   "superserve-sim: trace %s has no application (or app) column, and profile %s has "
                   "%zu applications (\"%s\", ...): name each query's application in an "
                   "application column\n",
                   absl::GetFlag(FLAGS_trace).c_str(), profile->model.c_str(), apps.size(),
                   apps.front().application.c_str());
      return 1;
    }
    if (!exec_times.empty()) {
      auto times = ReadExecTimes(exec_times);
      if (!times.ok()) {
        std::fprintf(stderr, "superserve-sim: %s\n", times.status().ToString().c_str());
        return 1;
      }
      if (times->size() != trace->size()) {
        std::fprintf(stderr,
                     "superserve-sim: --exec_times %s holds %zu execution times for the "
                     "trace's %zu queries (one per query, in trace order)\n",
                     exec_times.c_str(), times->size(), trace->size());
        return 1;
      }
      options.exec_us = *std::move(times);
    }
  }
  auto result = Simulate(*profile, trace->arrivals, policy->get(), options);
  if (!result.ok()) {
    std::fprintf(stderr, "superserve-sim: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const SimulationResult& r = *result;
  if (!absl::GetFlag(FLAGS_timeline).empty()) {
    auto s = WriteTimelineCsv(r, options.timeline_bin, absl::GetFlag(FLAGS_timeline));
    if (!s.ok()) {
      std::fprintf(stderr, "superserve-sim: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf(
      "%s: %lld queries, SLO attainment %.5f, mean accuracy %.3f, met %lld, late %lld, "
      "dropped %lld, p99 latency %.2f ms, throughput %.0f q/s, mean batch %.2f\n",
      r.policy.c_str(), static_cast<long long>(r.queries), r.slo_attainment(), r.mean_accuracy(),
      static_cast<long long>(r.met), static_cast<long long>(r.late),
      static_cast<long long>(r.dropped), ToMillis(r.p99_latency), r.throughput_qps(),
      r.mean_batch());
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter thresholds;  // dynamic models: queries per exit threshold
    for (const auto& [t, n] : r.threshold_queries) thresholds.Add(absl::StrCat(t), n);
    std::printf("%s\n", JsonWriter()
                            .Add("policy", r.policy)
                            .Add("queries", r.queries)
                            .Add("slo_attainment", r.slo_attainment())
                            .Add("mean_accuracy", r.mean_accuracy())
                            .Add("dropped", r.dropped)
                            .Add("late", r.late)
                            .Add("p99_latency_ms", ToMillis(r.p99_latency))
                            .Add("throughput_qps", r.throughput_qps())
                            .Add("mean_batch", r.mean_batch())
                            .Add("threshold_queries", thresholds)
                            .ToString()
                            .c_str());
  }
  return 0;
}
