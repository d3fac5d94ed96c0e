// superserve-sim: replays one arrival trace against N emulated workers under
// one scheduling policy on the simulated clock; see --help.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/sim/simulator.h"
#include "bench/sim/trace.h"
#include "common/dashed_flags.h"
#include "common/init.h"
#include "common/json_writer.h"
#include "common/model_profile.h"
#include "policies/policy_factory.h"
#include "policies/policy_flags.h"

ABSL_FLAG(std::string, profile, "", "ModelProfile JSON file (required).");
ABSL_FLAG(std::string, trace, "", "Trace CSV with header arrival_us (required).");
// The policy flags (--policy, --fixed_subnet, --buckets, --drop_below_first_bucket,
// --follow_drift, ..., --initial_overhead_us) are policies/policy_flags.h's,
// shared with superserve-router and superserve-repro.
ABSL_FLAG(int32_t, workers, 8, "Emulated workers.");
ABSL_FLAG(double, slo_ms, 36, "Latency SLO per query in milliseconds.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the execution-time noise.");
ABSL_FLAG(double, noise_cv, 0, "Execution-time noise: lognormal, mean 1, this CV (0 = none).");
ABSL_FLAG(double, exec_scale, 1.0,
          "Executions take the profile's latency times this (a machine slower than its "
          "profile); policies still start from the profile.");
ABSL_FLAG(double, dispatch_overhead_us, 500,
          "Simulated RPC + transfer time added to every batch, us (the policy's estimate "
          "before telemetry is --initial_overhead_us).");
ABSL_FLAG(std::vector<std::string>, fail_worker_at, {},
          "Times in seconds (comma-separated or the flag repeated); at each, one more worker "
          "fails (the highest live id; its batch is re-queued).");
ABSL_FLAG(bool, shed_overload, true,
          "The serving core's overload shedding (the router's --shed_overload).");
ABSL_FLAG(std::string, timeline, "", "Write a per-second timeline CSV here.");
ABSL_FLAG(double, timeline_bin_s, 1.0, "Timeline bin width in seconds.");
ABSL_FLAG(bool, json, false, "End with one JSON object on the last line.");
ABSL_FLAG(std::string, exec_times, "",
          "Dynamic models: replay each query's own execution time from this file (one value "
          "in us per line, in trace order) instead of drawing it from its application's "
          "histogram with --seed.");
ABSL_FLAG(double, orloj_viable_quantile, 0.5,
          "orloj: a request stays in a batch size's queue while its time left is at least this "
          "quantile of that batch's time (Algorithm 1, EstimateBatchLatency).");
ABSL_FLAG(double, orloj_b_per_ms, 1e-4, "orloj: b, the rate of the anticipated delay.");
ABSL_FLAG(int32_t, orloj_bins, 48, "orloj: bins of each batch-latency histogram.");
ABSL_FLAG(bool, orloj_anchor_at_head, false,
          "orloj ablation: only batch sizes whose queue holds the most urgent request compete.");
ABSL_FLAG(bool, orloj_every_batch_size, false,
          "orloj: one queue per batch size 1..max instead of the profile's sizes.");

int main(int argc, char** argv) {
  superserve::AcceptDashedFlagNames(argc, argv);
  std::vector<std::string> merged_args;
  superserve::MergeRepeatedListFlag("fail_worker_at", &argc, &argv, &merged_args);
  superserve::InitMain(argc, argv,
                       "superserve-sim --profile FILE --trace FILE --policy NAME [--fixed-subnet "
                       "ID] [--buckets K] --workers N --slo-ms X --seed S [--fail-worker-at "
                       "SEC,...] [--timeline FILE] [--exec-times FILE] [--json]\n\nDiscrete-event simulation of "
                       "the router's EDF queue and a scheduling policy over emulated workers. A "
                       "profile with a dynamic block (per-application execution-time histograms) is "
                       "a dynamic DNN: schedule it with --policy orloj|clockwork|nexus; the trace's "
                       "app column names each query's application. The policy "
                       "flags and their defaults are superserve-router's (one shared set); "
                       "--print-policy-config prints the effective configuration.");
  using namespace superserve;
  const PolicySpec spec = PolicySpecFromFlagsOrExit("superserve-sim");
  if (absl::GetFlag(FLAGS_profile).empty() || absl::GetFlag(FLAGS_trace).empty()) {
    std::fprintf(stderr, "superserve-sim: --profile and --trace are required (see --help)\n");
    return 2;
  }
  auto profile = ModelProfile::LoadFile(absl::GetFlag(FLAGS_profile));
  if (!profile.ok()) {
    std::fprintf(stderr, "superserve-sim: %s\n", profile.status().ToString().c_str());
    return 1;
  }
  auto trace = Trace::ReadCsv(absl::GetFlag(FLAGS_trace));
  if (!trace.ok()) {
    std::fprintf(stderr, "superserve-sim: %s\n", trace.status().ToString().c_str());
    return 1;
  }
  PolicyConfig config = spec.config;
  config.orloj.score.viable_quantile = absl::GetFlag(FLAGS_orloj_viable_quantile);
  config.orloj.score.b_per_us = absl::GetFlag(FLAGS_orloj_b_per_ms) / 1000;
  config.orloj.score.grid_bins = absl::GetFlag(FLAGS_orloj_bins);
  config.orloj.every_batch_size = absl::GetFlag(FLAGS_orloj_every_batch_size);
  config.orloj.anchor_at_head = absl::GetFlag(FLAGS_orloj_anchor_at_head);
  if (!(config.orloj.score.b_per_us > 0) || config.orloj.score.grid_bins < 1) {
    std::fprintf(stderr, "superserve-sim: --orloj_b_per_ms must be > 0, --orloj_bins >= 1\n");
    return 2;
  }
  auto policy = MakePolicy(spec.name, *profile, config);
  if (!policy.ok()) {
    std::fprintf(stderr, "superserve-sim: %s\n", policy.status().ToString().c_str());
    return 2;
  }
  SimulatorOptions options;
  options.workers = absl::GetFlag(FLAGS_workers);
  options.slo = Millis(absl::GetFlag(FLAGS_slo_ms));
  options.seed = absl::GetFlag(FLAGS_seed);
  options.noise_cv = absl::GetFlag(FLAGS_noise_cv);
  options.exec_scale = absl::GetFlag(FLAGS_exec_scale);
  if (!(options.exec_scale > 0)) {
    std::fprintf(stderr, "superserve-sim: --exec_scale must be > 0\n");
    return 2;
  }
  options.dispatch_overhead = Micros(absl::GetFlag(FLAGS_dispatch_overhead_us));
  options.serving.overload.shed = absl::GetFlag(FLAGS_shed_overload);
  options.timeline_bin = Seconds(absl::GetFlag(FLAGS_timeline_bin_s));
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
    if (!absl::GetFlag(FLAGS_exec_times).empty()) {
      std::FILE* f = std::fopen(absl::GetFlag(FLAGS_exec_times).c_str(), "r");
      if (f == nullptr) {
        std::fprintf(stderr, "superserve-sim: cannot open --exec_times %s\n",
                     absl::GetFlag(FLAGS_exec_times).c_str());
        return 1;
      }
      double v = 0;
      while (std::fscanf(f, "%lf", &v) == 1) options.exec_us.push_back(v);
      std::fclose(f);
    }
  }
  for (const std::string& s : absl::GetFlag(FLAGS_fail_worker_at)) {
    double sec = 0;
    if (!absl::SimpleAtod(s, &sec) || sec < 0) {
      std::fprintf(stderr, "superserve-sim: bad --fail-worker-at entry \"%s\"\n", s.c_str());
      return 2;
    }
    options.worker_failures.push_back(Seconds(sec));
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
                            .ToString()
                            .c_str());
  }
  return 0;
}
