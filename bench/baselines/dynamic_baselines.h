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

struct ClockworkWindowsOptions {
  DynamicPolicyOptions base;
  // The batch-time estimate: the median of the last `window` measured batches
  // of each batch size (Clockwork's action profile: its past 10 actions),
  // the profile's c0 + c1*k*mean(l) until one is measured.
  size_t window = 10;
  // Clockwork commits a worker's next action once its predicted outstanding
  // work drops below this (5 ms by default).
  Nanos schedule_ahead = Millis(5);
};

// Clockwork as the Orloj paper describes it on dynamic DNNs (§2.3): a point
// estimate of each batch's time from recent measurements, the next batch
// committed ahead, when the worker is predicted to finish, with an action
// window: it may start no earlier than that predicted finish (the worker
// idles when a batch ran short) and no later than the first deadline minus
// the estimate. A batch that ran long makes the worker free only after that
// latest start: the committed batch is cancelled, its queries fail (answered
// as dropped), and the next batch is planned from now.
//
// The serving core hands a worker a batch only when it is free, so the
// commitment is emulated: the batch Clockwork would have committed is the
// one formed when the worker frees (EDF order, the largest batch whose
// estimate meets the head's deadline from the planned start), counted as
// committed when its head had arrived by the planned finish minus
// `schedule_ahead`.
class ClockworkWindowsPolicy final : public DynamicModelPolicy {
 public:
  ClockworkWindowsPolicy(const ModelProfile& profile, ClockworkWindowsOptions options);
  Decision Decide(const SchedulingContext& ctx) override;
  void OnCompletion(const CompletionTelemetry& t) override;
  Nanos Estimate(size_t b) const;
  // Its point estimate plus the dispatch overhead (the action windows the
  // serving core derives use it too).
  Nanos EstimatedLatency(int32_t subnet_index, int32_t batch_size) const override;
  // Batches cancelled because their action window closed (tests).
  int64_t cancelled() const { return cancelled_; }

 protected:
  void OnDistributionsChanged() override;

 private:
  ClockworkWindowsOptions options_;
  std::vector<Nanos> profiled_;  // per batch index
  std::vector<RollingPercentile> measured_;
  // Per worker: the predicted time its batch's answer arrives (0 = nothing
  // in flight or planned).
  std::vector<Nanos> planned_end_;
  int64_t cancelled_ = 0;
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
