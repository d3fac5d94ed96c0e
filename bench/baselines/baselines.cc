#include "bench/baselines/baselines.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "bench/baselines/dynamic_baselines.h"
#include "bench/baselines/greedy_policies.h"
#include "bench/baselines/slackfit_policy.h"
#include "policies/fixed_subnet_policy.h"
#include "policies/policy_factory.h"

namespace superserve {
namespace {

// --buckets' default (policies/policy_flags.h) is SlackFit's own.
static_assert(BaselineOptions().slackfit_buckets == kDefaultSlackFitBuckets);

SlackFitOptions SlackFitOptionsFor(const PolicyConfig& c) {
  SlackFitOptions o;
  o.base = c.base;
  o.num_buckets = c.baselines.slackfit_buckets;
  o.drop_below_first_bucket = c.baselines.slackfit_drop_below_first_bucket;
  o.bucket_ties = c.baselines.slackfit_ties_to_accuracy ? LatencyBuckets::Ties::kAccuracy
                                                        : LatencyBuckets::Ties::kThroughput;
  return o;
}

void RegisterAll() {
  RegisterPolicy(
      "slackfit",
      [](const ModelProfile& p, const PolicyConfig& c) -> absl::StatusOr<std::unique_ptr<Policy>> {
        if (c.baselines.slackfit_buckets < 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("--buckets must be >= 1; got ", c.baselines.slackfit_buckets));
        }
        return std::make_unique<SlackFitPolicy>(p, SlackFitOptionsFor(c));
      });
  RegisterPolicy(
      "maxbatch",
      [](const ModelProfile& p, const PolicyConfig& c) -> absl::StatusOr<std::unique_ptr<Policy>> {
        return std::make_unique<MaxBatchPolicy>(p, c.base);
      });
  RegisterPolicy(
      "maxacc",
      [](const ModelProfile& p, const PolicyConfig& c) -> absl::StatusOr<std::unique_ptr<Policy>> {
        return std::make_unique<MaxAccPolicy>(p, c.base);
      });
  // INFaaS without accuracy constraints: the least accurate subnet.
  RegisterPolicy(
      "infaas",
      [](const ModelProfile& p, const PolicyConfig& c) -> absl::StatusOr<std::unique_ptr<Policy>> {
        int least = 0;
        for (int i = 1; i < static_cast<int>(p.subnets.size()); ++i) {
          if (p.subnets[i].accuracy < p.subnets[least].accuracy) least = i;
        }
        return std::make_unique<FixedSubnetPolicy>("infaas", p, least, c.base);
      });
  // The paper's Clipper+: fixed-subnet under its own name, so that the
  // reproduction's tables keep their rows ("clipper+(<accuracy>)").
  RegisterPolicy(
      "clipper+",
      [](const ModelProfile& p, const PolicyConfig& c) -> absl::StatusOr<std::unique_ptr<Policy>> {
        const int index = FixedSubnetIndex(p, c.fixed_subnet_id);
        if (index < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("policy clipper+ needs --fixed_subnet set to a subnet id of profile \"",
                           p.model, "\" (or -1, the most accurate); got ", c.fixed_subnet_id));
        }
        return std::make_unique<FixedSubnetPolicy>(
            absl::StrCat("clipper+(", p.subnets[index].accuracy, ")"), p, index, c.base);
      });
  RegisterPolicy(
      "clockwork",
      [](const ModelProfile& p, const PolicyConfig&) -> absl::StatusOr<std::unique_ptr<Policy>> {
        return std::make_unique<ClockworkLikePolicy>(p, ClockworkLikeOptions());
      },
      /*dynamic=*/true);
  RegisterPolicy(
      "clockwork-windows",
      [](const ModelProfile& p, const PolicyConfig&) -> absl::StatusOr<std::unique_ptr<Policy>> {
        return std::make_unique<ClockworkWindowsPolicy>(p, ClockworkWindowsOptions());
      },
      /*dynamic=*/true);
  RegisterPolicy(
      "nexus",
      [](const ModelProfile& p, const PolicyConfig&) -> absl::StatusOr<std::unique_ptr<Policy>> {
        return std::make_unique<NexusLikePolicy>(p, NexusLikeOptions());
      },
      /*dynamic=*/true);
}

}  // namespace

void RegisterBaselinePolicies() {
  static const bool registered = (RegisterAll(), true);
  (void)registered;
}

}  // namespace superserve
