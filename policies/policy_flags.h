#ifndef SUPERSERVE_POLICIES_POLICY_FLAGS_H_
#define SUPERSERVE_POLICIES_POLICY_FLAGS_H_

#include <functional>
#include <string_view>

#include "absl/status/statusor.h"
#include "policies/policy_factory.h"

namespace superserve {

// The one set of policy flags, shared by superserve-router, superserve-sim and
// superserve-repro (CMake target superserve_policy_flags; linking only
// superserve_policies defines no flags). Every default is the default of the
// option structs (PolicyConfig, BaselineOptions, ProfiledPolicyOptions,
// LatencyTable::Options, RateFitOptions):
//   --policy                     ratefit (product: ratefit, slo-first, symphony,
//                                fixed-subnet; baselines: slackfit, maxbatch,
//                                maxacc, infaas, clipper+)
//   --fixed_subnet               -1 (fixed-subnet, clipper+: the most accurate)
//   --follow_drift               true (every policy's latency table)
//   --overhead_quantile          0.5 (every policy)
//   --initial_overhead_us        500 (every policy)
//   --ratefit_pace               1
//   --ratefit_capacity_quantile  0.99
//   --ratefit_window_ms          100
//   --slo_first_headroom         1
//   --slo_first_window_slos      8
//   --slo_first_defer            true
//   --buckets                    8 (slackfit's K)
//   --drop_below_first_bucket    false (slackfit)
//   --bucket_ties                throughput (slackfit)
//   --print_policy_config        false
//
// The flags' policy name and configuration; an InvalidArgument error naming
// the flag for a value out of range (--buckets < 1, --overhead_quantile
// outside [0, 1], an unknown --bucket_ties or --policy, ...). --policy must
// name a policy known now: the baselines only after RegisterBaselinePolicies.
absl::StatusOr<PolicySpec> PolicySpecFromFlags();

// For a binary's main, right after InitMain: PolicySpecFromFlags(), or
// "<program>: <error>" on stderr and exit 2; with --print_policy_config,
// prints PolicySpecJson() as one line on stdout and exits 0.
// `amend` sets a binary's own policy options (superserve-sim's --orloj_*)
// before the configuration is printed or returned.
PolicySpec PolicySpecFromFlagsOrExit(
    std::string_view program, const std::function<void(PolicyConfig&)>& amend = nullptr);

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_POLICY_FLAGS_H_
