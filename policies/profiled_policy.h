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
  // afterwards a rolling high percentile of the measured overheads.
  Nanos initial_overhead = Micros(500);
  size_t overhead_window = 256;
  // The median, not a high percentile: on a machine whose cores the
  // workers share with the router and the clients, the overhead's tail is
  // scheduling spikes of 10-40 ms. Planning every batch for the p99 starves
  // the system, and worse, once that estimate makes every head look
  // infeasible nothing is dispatched, no telemetry arrives and the estimate
  // never comes down: the live main job dropped every query from its first
  // burst on (attainment 0.25; with the median 1.0). Execution-time tails
  // are corrected per tuple by the latency table.
  double overhead_quantile = 0.5;
  // Overhead samples expire when no batch has completed for this long: the
  // estimate goes back to initial_overhead. An estimate can only come down
  // through completions, so one that made every head look infeasible would
  // otherwise stop all dispatching for good (a cold start on loaded cores
  // can measure overheads of 100+ ms for the first few batches). The latency
  // table's corrections go back to the profile too (LatencyTable::Forget)
  // when, after such a pause, they would drop a head: on a GPU the first
  // batches of each shape ran 50-100 ms against a 2 ms profile, the start-up
  // drift scaled every tuple past the SLO, and a fixed-subnet policy dropped
  // every query for the rest of the run (docs/gpu.md).
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

// The common half of SlackFit and the baselines: the latency table with its
// online correction, the dispatch overhead estimate, the drop rule and the
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
