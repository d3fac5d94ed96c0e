#ifndef SUPERSERVE_POLICIES_POLICY_FLAGS_H_
#define SUPERSERVE_POLICIES_POLICY_FLAGS_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "policies/policy_factory.h"

namespace superserve {

// The one set of policy flags, shared by superserve-router, superserve-sim and
// superserve-repro (CMake target superserve_policy_flags; linking only
// superserve_policies defines no flags). Every default is the default of the
// option structs (PolicyConfig, SlackFitOptions, ProfiledPolicyOptions,
// LatencyTable::Options):
//   --policy                  ratefit
//   --fixed_subnet            -1 (clipper+: the most accurate subnet)
//   --buckets                 8 (SlackFit's K)
//   --drop_below_first_bucket false
//   --follow_drift            true
//   --bucket_ties             throughput
//   --fit_margin              -1 (the policy's default)
//   --guard_headroom          0.9
//   --guard_upgrades_only     true
//   --guard_window_ms         100
//   --overhead_quantile       0.5
//   --initial_overhead_us     500
//   --ratefit_pace            1
//   --print_policy_config     false
//
// The flags' policy name and configuration; an InvalidArgument error naming
// the flag for a value out of range (--buckets < 1, --overhead_quantile
// outside [0, 1], an unknown --bucket_ties or --policy, ...).
absl::StatusOr<PolicySpec> PolicySpecFromFlags();

// For a binary's main, right after InitMain: PolicySpecFromFlags(), or
// "<program>: <error>" on stderr and exit 2; with --print_policy_config,
// prints PolicySpecJson() as one line on stdout and exits 0.
PolicySpec PolicySpecFromFlagsOrExit(std::string_view program);

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_POLICY_FLAGS_H_
