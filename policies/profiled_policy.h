#ifndef SUPERSERVE_POLICIES_PROFILED_POLICY_H_
#define SUPERSERVE_POLICIES_PROFILED_POLICY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/model_profile.h"
#include "common/time.h"
#include "policies/decision.h"
#include "policies/latency_table.h"
#include "policies/policy.h"
#include "policies/rolling_percentile.h"

namespace superserve {

// Options every profile-driven policy shares.
struct ProfiledPolicyOptions {
  LatencyTable::Options latency;
  // Dispatch overhead (RPC + transfer) assumed until telemetry reports it;
  // afterwards this quantile of the last overhead_window measured overheads.
  Nanos initial_overhead = Micros(500);
  size_t overhead_window = 256;
  // The median: the overhead's tail is scheduling spikes that planning must
  // not chase; execution-time tails are corrected per tuple by the latency
  // table (docs/decisions/overhead-median.md).
  double overhead_quantile = 0.5;
  // When no batch has completed for this long, the overhead samples expire
  // (the estimate goes back to initial_overhead), and the latency table's
  // corrections go back to the profile if they would drop a head: estimates
  // only come down through completions, so one that makes every head look
  // infeasible must not stop dispatching for good
  // (docs/decisions/telemetry-expiry.md).
  Nanos telemetry_expiry = Seconds(1);
};

// At most this many infeasible heads are counted (and dropped) per decision;
// the caller drops them and asks again, so a decision stays O(1) in the
// queue however many queries are late.
inline constexpr size_t kMaxDropsPerDecision = 64;

// What a profile-driven policy knows about the queue after the infeasible
// head has been accounted for.
struct QueueView {
  int32_t drop = 0;      // head queries no tuple of this policy can save
  int64_t pending = 0;   // queries left after the drop
  Nanos slack = 0;       // first kept query's deadline - now - overhead
};

// The common half of the profile-driven policies (ratefit, symphony,
// fixed-subnet and the paper baselines): the latency table with its online
// correction, the dispatch overhead estimate, the drop rule and the
// decision's bookkeeping. Subclasses answer one question: which (subnet rank,
// batch index) for `pending` queries with `slack` left.
class ProfiledPolicy : public Policy {
 public:
  ProfiledPolicy(std::string name, const ModelProfile& profile, ProfiledPolicyOptions options);

  std::string_view name() const override { return name_; }
  Decision Decide(const SchedulingContext& ctx) override;
  void OnCompletion(const CompletionTelemetry& t) override;
  // The latency table's estimate plus the dispatch overhead estimate.
  Nanos EstimatedLatency(int32_t subnet_index, int32_t batch_size) const override;

  const LatencyTable& latencies() const { return table_; }
  Nanos overhead_estimate() const { return overhead_; }

 protected:
  struct Choice {
    int rank = -1;         // accuracy rank, -1 = nothing fits
    int batch_index = -1;
    // > 0: dispatch nothing now, ask again at this time (the policy waits
    // for a fuller batch); rank and batch_index are then ignored.
    Nanos wake_at = 0;
  };
  // The fastest latency this policy can ever pick: a head whose slack is
  // below it is dropped (DEADLINE_EXCEEDED).
  virtual Nanos FastestLatency() const { return table_.min_latency(); }
  // The tuple to run; `view.slack` >= FastestLatency(), view.pending >= 1.
  virtual Choice Choose(const SchedulingContext& ctx, const QueueView& view) = 0;

  // DESIGN.md's partial-batch rule: n queries pending, fewer than the chosen
  // batch: the smallest profiled batch >= n with the most accurate subnet
  // that still fits the slack; `fallback` when none does.
  Choice PartialBatch(int64_t n, Nanos slack, Choice fallback) const;
  // Called after table_ went back to the profile (telemetry_expiry), for
  // subclasses that keep estimates of their own from the same telemetry.
  virtual void OnEstimatesForgotten() {}

  LatencyTable table_;

 private:
  std::string name_;
  ProfiledPolicyOptions options_;
  RollingPercentile overhead_samples_;
  Nanos overhead_;
  Nanos last_completion_ = -1;
  // Set when telemetry expired; cleared by the next completion.
  bool estimates_unchecked_ = false;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_PROFILED_POLICY_H_
