#include "policies/policy_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/time.h"
#include "policies/latency_table.h"
#include "policies/profiled_policy.h"

// Defaults come from the option structs, never re-typed here.
ABSL_FLAG(std::string, policy, superserve::PolicySpec().name,
          "Scheduling policy. The product: ratefit (the default) | slo-first (the candidate "
          "default, SLO first then accuracy; docs/scheduling.md) | symphony | fixed-subnet "
          "(and orloj for dynamic models, --dynamic_policy in the router). The paper baselines "
          "from bench/, for comparisons: clipper+ | infaas | maxacc | maxbatch | slackfit (and "
          "clockwork | clockwork-windows | nexus for dynamic models).");
ABSL_FLAG(int32_t, fixed_subnet, superserve::PolicyConfig().fixed_subnet_id,
          "fixed-subnet (and clipper+): the profile's subnet id to serve; -1 = the most "
          "accurate subnet.");
ABSL_FLAG(int32_t, buckets, superserve::BaselineOptions().slackfit_buckets,
          "slackfit (baseline): number of latency buckets K (>= 1).");
ABSL_FLAG(bool, drop_below_first_bucket,
          superserve::BaselineOptions().slackfit_drop_below_first_bucket,
          "slackfit (baseline): drop heads whose slack fits no bucket (the paper's rule; the "
          "reproduction's setting); false = drop only heads that not even the fastest tuple can "
          "still serve (docs/decisions/slackfit-drop-rule.md).");
ABSL_FLAG(bool, follow_drift,
          superserve::LatencyTable::Options().unmeasured_follow_drift,
          "Tuples without enough telemetry follow the drift of those with some: the lower median "
          "of their measured/profiled latency ratios, once 2 tuples have 4 samples (before "
          "that, the lower median of every batch's ratio, from the 4th batch), unless within "
          "10 % (a host slower than its profile). false = they keep their profiled latency.");
ABSL_FLAG(std::string, bucket_ties,
          superserve::BaselineOptions().slackfit_ties_to_accuracy ? "accuracy" : "throughput",
          "slackfit (baseline): within a bucket the largest batch, ties to: throughput | "
          "accuracy.");
ABSL_FLAG(double, overhead_quantile,
          superserve::ProfiledPolicyOptions().overhead_quantile,
          "Quantile of the measured dispatch overheads (round trip - execution) every policy "
          "plans with, in [0, 1].");
ABSL_FLAG(double, initial_overhead_us,
          superserve::ToMicros(superserve::ProfiledPolicyOptions().initial_overhead),
          "Dispatch overhead (RPC + transfer) every policy assumes until telemetry reports it, "
          "us (>= 0).");
ABSL_FLAG(double, ratefit_pace, superserve::PolicyConfig().ratefit_pace,
          "ratefit: a batch that is not full waits until this many batch latencies / workers "
          "after the last dispatch to another worker, so that workers take turns (0 = eager; "
          "policies/ratefit_policy.h).");
ABSL_FLAG(double, ratefit_capacity_quantile,
          superserve::PolicyConfig().ratefit_capacity_quantile,
          "ratefit: quantile of the measured execution times that a subnet's capacity "
          "(queries/s per worker, the rate check) is computed from, in (0, 1]; fits against a "
          "deadline and the batch choice use the high percentile (policies/ratefit_policy.h).");
ABSL_FLAG(double, ratefit_window_ms,
          superserve::ToMillis(superserve::PolicyConfig().ratefit_rate_window),
          "ratefit: sliding window of the arrival-rate estimate that picks the subnet, ms (> 0).");
ABSL_FLAG(double, slo_first_headroom, superserve::SloFirstOptions().headroom,
          "slo-first: a subnet serves while its capacity (the load it carries with about one "
          "query in a thousand waiting past its deadline, for Poisson arrivals) is at least "
          "this multiple of the measured load; above 1 keeps capacity spare for burstier "
          "traffic (fewer late answers, less accuracy), in (0, 1000].");
ABSL_FLAG(double, slo_first_window_slos, superserve::SloFirstOptions().rate_window_slos,
          "slo-first: how far back the load is measured, in SLOs; shorter follows a burst "
          "sooner but reads noise as load, in (0, 1000].");
ABSL_FLAG(bool, slo_first_defer, superserve::SloFirstOptions().defer,
          "slo-first: hold a batch that is not full until one more query would no longer fit "
          "(Symphony's deferred batching) when the load needs fuller batches; false sends at "
          "once (lower latency, smaller batches).");
ABSL_FLAG(bool, print_policy_config, false,
          "Print the policy and every option in force for every policy (product and baselines) "
          "as one JSON line and exit.");

namespace superserve {
namespace {

// Times convert to Nanos and factors multiply them: bounded so that neither
// overflows. Far beyond any useful setting.
constexpr double kDayMs = 24 * 3600 * 1000.0;
constexpr double kMaxFactor = 1000;

absl::Status FlagError(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", what));
}

}  // namespace

absl::StatusOr<PolicySpec> PolicySpecFromFlags() {
  PolicySpec spec;
  spec.name = absl::GetFlag(FLAGS_policy);
  std::vector<std::string> names = PolicyNames();
  for (const std::string& n : DynamicPolicyNames()) names.push_back(n);
  if (std::find(names.begin(), names.end(), spec.name) == names.end() ) {
    return FlagError("policy", absl::StrCat("must be one of ", absl::StrJoin(names, ", "),
                                            "; got \"", spec.name, "\""));
  }
  PolicyConfig& c = spec.config;
  c.fixed_subnet_id = absl::GetFlag(FLAGS_fixed_subnet);
  c.ratefit_pace = absl::GetFlag(FLAGS_ratefit_pace);
  // Finite and bounded: the turn is pace x a batch's latency, in Nanos.
  if (!(c.ratefit_pace >= 0 && c.ratefit_pace <= kMaxFactor)) {
    return FlagError("ratefit_pace",
                     absl::StrCat("must be in [0, ", kMaxFactor, "]; got ", c.ratefit_pace));
  }
  c.ratefit_capacity_quantile = absl::GetFlag(FLAGS_ratefit_capacity_quantile);
  if (!(c.ratefit_capacity_quantile > 0 && c.ratefit_capacity_quantile <= 1)) {
    return FlagError("ratefit_capacity_quantile",
                     absl::StrCat("must be in (0, 1]; got ", c.ratefit_capacity_quantile));
  }
  const double window_ms = absl::GetFlag(FLAGS_ratefit_window_ms);
  if (!(window_ms > 0 && window_ms <= kDayMs)) {
    return FlagError("ratefit_window_ms",
                     absl::StrCat("must be in (0, ", kDayMs, "] (a day); got ", window_ms));
  }
  c.ratefit_rate_window = Millis(window_ms);
  SloFirstOptions& f = c.slo_first;
  f.headroom = absl::GetFlag(FLAGS_slo_first_headroom);
  if (!(f.headroom > 0 && f.headroom <= kMaxFactor)) {
    return FlagError("slo_first_headroom",
                     absl::StrCat("must be in (0, ", kMaxFactor, "]; got ", f.headroom));
  }
  f.rate_window_slos = absl::GetFlag(FLAGS_slo_first_window_slos);
  if (!(f.rate_window_slos > 0 && f.rate_window_slos <= kMaxFactor)) {
    return FlagError("slo_first_window_slos", absl::StrCat("must be in (0, ", kMaxFactor,
                                                           "]; got ", f.rate_window_slos));
  }
  f.defer = absl::GetFlag(FLAGS_slo_first_defer);
  BaselineOptions& b = c.baselines;
  b.slackfit_buckets = absl::GetFlag(FLAGS_buckets);
  if (b.slackfit_buckets < 1) {
    return FlagError("buckets", absl::StrCat("must be >= 1; got ", b.slackfit_buckets));
  }
  b.slackfit_drop_below_first_bucket = absl::GetFlag(FLAGS_drop_below_first_bucket);
  const std::string ties = absl::GetFlag(FLAGS_bucket_ties);
  if (ties == "throughput" || ties == "accuracy") {
    b.slackfit_ties_to_accuracy = ties == "accuracy";
  } else {
    return FlagError("bucket_ties",
                     absl::StrCat("must be throughput or accuracy; got \"", ties, "\""));
  }
  ProfiledPolicyOptions& base = c.base;
  base.latency.unmeasured_follow_drift = absl::GetFlag(FLAGS_follow_drift);
  base.overhead_quantile = absl::GetFlag(FLAGS_overhead_quantile);
  if (!(base.overhead_quantile >= 0 && base.overhead_quantile <= 1)) {
    return FlagError("overhead_quantile",
                     absl::StrCat("must be in [0, 1]; got ", base.overhead_quantile));
  }
  const double overhead_us = absl::GetFlag(FLAGS_initial_overhead_us);
  if (!(overhead_us >= 0 && overhead_us <= kDayMs * 1000)) {
    return FlagError("initial_overhead_us", absl::StrCat("must be in [0, ", kDayMs * 1000,
                                                         "] (a day); got ", overhead_us));
  }
  base.initial_overhead = Micros(overhead_us);
  return spec;
}

PolicySpec PolicySpecFromFlagsOrExit(std::string_view program,
                                     const std::function<void(PolicyConfig&)>& amend) {
  absl::StatusOr<PolicySpec> spec = PolicySpecFromFlags();
  if (!spec.ok()) {
    std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
                 static_cast<int>(spec.status().message().size()),
                 spec.status().message().data());
    std::exit(2);
  }
  if (amend) amend(spec->config);
  if (absl::GetFlag(FLAGS_print_policy_config)) {
    std::printf("%s\n", PolicySpecJson(*spec).c_str());
    std::fflush(stdout);
    std::exit(0);
  }
  return *std::move(spec);
}

}  // namespace superserve
