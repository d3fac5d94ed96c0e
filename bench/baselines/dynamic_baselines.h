#ifndef SUPERSERVE_BENCH_BASELINES_DYNAMIC_BASELINES_H_
#define SUPERSERVE_BENCH_BASELINES_DYNAMIC_BASELINES_H_

#include <cstdint>
#include <vector>

#include "policies/dynamic_policy.h"
#include "policies/rolling_percentile.h"

namespace superserve {

// The baselines Orloj is compared with, for dynamic models. Both serve in
// EDF order and see a point estimate of the batch time, not its distribution.

struct ClockworkLikeOptions {
  DynamicPolicyOptions base;
  // The batch-time estimate: this percentile of the batch time, first from
  // the profile (c0 + c1*k*quantile of the mix), then of the last `window`
  // measured batches of each batch size (Clockwork's online profile).
  double quantile = 0.99;
  size_t window = 64;
  size_t min_samples = 8;
};

// Clockwork-like: the largest profiled batch whose estimated time still
// meets the EDF head's deadline; drops the head when not even one query fits.
class ClockworkLikePolicy final : public DynamicModelPolicy {
 public:
  ClockworkLikePolicy(const ModelProfile& profile, ClockworkLikeOptions options);
  Decision Decide(const SchedulingContext& ctx) override;
  void OnCompletion(const CompletionTelemetry& t) override;
  // The current estimate for batch index b.
  Nanos Estimate(size_t b) const;

 protected:
  void OnDistributionsChanged() override;

 private:
  ClockworkLikeOptions options_;
  std::vector<Nanos> profiled_;  // per batch index
  std::vector<RollingPercentile> measured_;
};

struct NexusLikeOptions {
  DynamicPolicyOptions base;
};

// Nexus-like: an ahead-of-time plan from the mean execution time. The batch
// size is the largest whose mean batch time l(b) = c0 + c1*b*mean satisfies
// Nexus's duty-cycle rule 2*l(b) <= SLO (the SLO as the queries carry it:
// deadline - arrival); batches of that size are taken from the EDF head,
// smaller when the head's deadline cannot wait for l(b), and the head is
// dropped when even l(1) misses it.
class NexusLikePolicy final : public DynamicModelPolicy {
 public:
  NexusLikePolicy(const ModelProfile& profile, NexusLikeOptions options);
  Decision Decide(const SchedulingContext& ctx) override;
  void OnArrival(const Query& q, Nanos now) override;
  // The planned batch index (for the last SLO seen).
  int32_t planned_batch_index() const { return planned_; }
  Nanos MeanLatency(size_t b) const { return mean_latency_[b]; }

 protected:
  void OnDistributionsChanged() override;

 private:
  void Plan();
  std::vector<Nanos> mean_latency_;  // per batch index
  Nanos slo_ = 0;
  int32_t planned_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_BASELINES_DYNAMIC_BASELINES_H_
