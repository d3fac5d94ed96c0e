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

ABSL_FLAG(std::string, profile, "", "ModelProfile JSON file (required).");
ABSL_FLAG(std::string, trace, "", "Trace CSV with header arrival_us (required).");
ABSL_FLAG(std::string, policy, "slackfit",
          "slackfit | slackfit-ma | slackfit-rg | maxbatch | maxacc | clipper+ | infaas");
ABSL_FLAG(int32_t, fixed_subnet, -1, "clipper+: the subnet id to serve.");
ABSL_FLAG(int32_t, buckets, superserve::kDefaultSlackFitBuckets,
          "SlackFit: number of latency buckets K.");
ABSL_FLAG(double, guard_headroom, 0.9,
          "slackfit-rg: required capacity as a multiple of the measured arrival rate.");
ABSL_FLAG(bool, guard_upgrades_only, true,
          "slackfit-rg: the guard's search never goes below SlackFit's own subnet (false: "
          "the previous guard, which stepped down to any sustainable subnet).");
ABSL_FLAG(double, guard_window_ms, 100,
          "slackfit-rg: sliding window of the arrival-rate estimate (ms).");
ABSL_FLAG(bool, drop_below_first_bucket, true,
          "slackfit: drop heads whose slack fits no bucket (false: only below the fastest "
          "tuple, DESIGN.md's first resolution).");
ABSL_FLAG(std::string, bucket_ties, "throughput",
          "slackfit: within a bucket the largest batch, ties to: throughput | accuracy.");
ABSL_FLAG(bool, follow_drift, true,
          "Unmeasured tuples follow the median measured/profiled latency ratio.");
ABSL_FLAG(double, fit_margin, -1,
          "slackfit*: every choice fits the slack with this fraction of its latency to spare "
          "(-1: the policy's default).");
ABSL_FLAG(int32_t, workers, 8, "Emulated workers.");
ABSL_FLAG(double, slo_ms, 36, "Latency SLO per query in milliseconds.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the execution-time noise.");
ABSL_FLAG(double, noise_cv, 0, "Execution-time noise: lognormal, mean 1, this CV (0 = none).");
ABSL_FLAG(double, exec_scale, 1.0,
          "Executions take the profile's latency times this (a machine slower than its "
          "profile); policies still start from the profile.");
ABSL_FLAG(double, dispatch_overhead_us, 500, "RPC + transfer time added to every batch.");
ABSL_FLAG(std::vector<std::string>, fail_worker_at, {},
          "Times in seconds (comma-separated or the flag repeated); at each, one more worker "
          "fails (the highest live id; its batch is re-queued).");
ABSL_FLAG(std::string, timeline, "", "Write a per-second timeline CSV here.");
ABSL_FLAG(double, timeline_bin_s, 1.0, "Timeline bin width in seconds.");
ABSL_FLAG(bool, json, false, "End with one JSON object on the last line.");

int main(int argc, char** argv) {
  superserve::AcceptDashedFlagNames(argc, argv);
  std::vector<std::string> merged_args;
  superserve::MergeRepeatedListFlag("fail_worker_at", &argc, &argv, &merged_args);
  superserve::InitMain(argc, argv,
                       "superserve-sim --profile FILE --trace FILE --policy NAME [--fixed-subnet "
                       "ID] [--buckets K] --workers N --slo-ms X --seed S [--fail-worker-at "
                       "SEC,...] [--timeline FILE] [--json]\n\nDiscrete-event simulation of the "
                       "router's EDF queue and a scheduling policy over emulated workers.");
  using namespace superserve;
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
  PolicyConfig config;
  config.slackfit.num_buckets = absl::GetFlag(FLAGS_buckets);
  config.slackfit.guard_headroom = absl::GetFlag(FLAGS_guard_headroom);
  config.slackfit.guard_upgrades_only = absl::GetFlag(FLAGS_guard_upgrades_only);
  config.slackfit.rate_window = Millis(absl::GetFlag(FLAGS_guard_window_ms));
  config.slackfit.base.initial_overhead = Micros(absl::GetFlag(FLAGS_dispatch_overhead_us));
  config.fixed_subnet_id = absl::GetFlag(FLAGS_fixed_subnet);
  config.slackfit.drop_below_first_bucket = absl::GetFlag(FLAGS_drop_below_first_bucket);
  if (absl::GetFlag(FLAGS_fit_margin) >= 0) config.slackfit.fit_margin = absl::GetFlag(FLAGS_fit_margin);
  config.slackfit.base.latency.unmeasured_follow_drift = absl::GetFlag(FLAGS_follow_drift);
  if (absl::GetFlag(FLAGS_bucket_ties) == "accuracy") {
    config.slackfit.bucket_ties = LatencyBuckets::Ties::kAccuracy;
  } else if (absl::GetFlag(FLAGS_bucket_ties) != "throughput") {
    std::fprintf(stderr, "superserve-sim: --bucket-ties must be throughput or accuracy\n");
    return 2;
  }
  auto policy = MakePolicy(absl::GetFlag(FLAGS_policy), *profile, config);
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
  options.timeline_bin = Seconds(absl::GetFlag(FLAGS_timeline_bin_s));
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
                            .ToString()
                            .c_str());
  }
  return 0;
}
