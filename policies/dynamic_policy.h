#ifndef SUPERSERVE_POLICIES_DYNAMIC_POLICY_H_
#define SUPERSERVE_POLICIES_DYNAMIC_POLICY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/empirical_distribution.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "policies/batch_time_model.h"
#include "policies/execution_time_estimator.h"
#include "policies/policy.h"
#include "policies/rolling_percentile.h"

namespace superserve {

// Options every dynamic-model policy shares.
struct DynamicPolicyOptions {
  ExecutionTimeEstimator::Options estimator;
  // Distribution-derived tables are rebuilt at most this often, and only
  // when telemetry changed the estimates (off the per-decision path).
  Nanos refresh_interval = Seconds(1);
  // Dispatch overhead (RPC + transfer) assumed until telemetry measures it;
  // then the median of the last measurements.
  Nanos initial_overhead = Micros(500);
};

// The common half of the policies for dynamic DNNs (Orloj and its
// baselines): the batch-time model of the profile, the per-application
// execution-time estimator fed by arrivals and per-query telemetry, the map
// from the serving core's application ids to the profile's applications
// (unknown ones get the model's mix), and the dispatch-overhead estimate.
class DynamicModelPolicy : public Policy {
 public:
  // `adaptive_exits`: the policy picks an exit threshold per batch when the
  // profile lists them (see exit_thresholds()); otherwise every batch runs
  // at the model's default and the default's histograms are planned with.
  DynamicModelPolicy(std::string name, const ModelProfile& profile, DynamicPolicyOptions options,
                     bool adaptive_exits = false);

  std::string_view name() const override { return name_; }
  void OnArrival(const Query& q, Nanos now) override;
  void OnCompletion(const CompletionTelemetry& t) override;
  void OnApplicationNamed(int32_t id, std::string_view name) override;

  const ExecutionTimeEstimator& estimator() const { return estimator_; }
  Nanos overhead_estimate() const { return overhead_; }

 protected:
  // The distribution index of a query: an application of the profile, or
  // mix_index() for one the profile does not know.
  int32_t DistIndex(const Query& q) const;
  int32_t mix_index() const { return static_cast<int32_t>(estimator_.applications()); }
  // The current distributions, one per application, then the mix (by the
  // recent arrival shares). Refreshed by MaybeRefresh.
  const std::vector<EmpiricalDistribution>& distributions() const { return dists_; }
  // Rebuilds the distributions when the estimator changed and the refresh
  // interval passed (always on the first call); true if it did.
  bool MaybeRefresh(Nanos now);
  // Called after the distributions changed.
  virtual void OnDistributionsChanged() {}

  // Load-adaptive exits (adaptive_exits and a profile that lists
  // dynamic.thresholds): the
  // distributions above are those of the LOWEST threshold (how fast a request
  // can be served at all: queues, viability and drops plan with them), and
  // only telemetry of batches run at it updates them. Number of thresholds
  // (0: none, the policy dispatches the model's default, -1).
  int32_t exit_thresholds() const { return static_cast<int32_t>(threshold_dists_.size()); }
  // The highest threshold at which a batch of the requests of distribution
  // indices `dists` (as DistIndex) finishes within `budget_us` as surely as
  // at the lowest threshold: P_t = P(c0 + c1 * k * max(l_i) <= budget) =
  // prod_i F_{t, i}((budget - c0) / (c1 * k)), k = dists.size(), with the
  // profile's histograms at threshold t; P_t >= P_0 (to 1e-9). The lowest
  // when P_0 < `probability`; -1 when the profile lists no thresholds.
  // O(thresholds * k * log bins).
  int32_t PickExitThreshold(const std::vector<int32_t>& dists, double budget_us,
                            double probability) const;
  // A batch of k requests of the model's mix at the lowest threshold: the
  // `probability` quantile of c0 + c1 * k * max(l_1..l_k) (us). 0 without
  // thresholds.
  double LowestThresholdBatchUs(int32_t k, double probability) const;

  BatchTimeModel model_;
  std::vector<int32_t> batch_sizes_;
  DynamicPolicyOptions options_;

 private:
  std::string name_;
  ExecutionTimeEstimator estimator_;
  std::vector<int32_t> app_of_id_;  // core application id -> estimator index or -1
  std::vector<EmpiricalDistribution> dists_;
  // Per threshold (increasing), the profile's distributions: one per
  // application, then the mix (ProfileDistributions).
  std::vector<std::vector<EmpiricalDistribution>> threshold_dists_;
  uint64_t refreshed_version_ = 0;
  Nanos refreshed_at_ = 0;
  bool refreshed_ = false;
  RollingPercentile overhead_samples_{256, 0.5};
  Nanos overhead_;
};

// The profile's application histograms and their mix by profiled counts
// (one entry per application, then the mix). Tools and tests use it.
std::vector<EmpiricalDistribution> ProfileDistributions(const DynamicModelProfile& profile);

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_DYNAMIC_POLICY_H_
