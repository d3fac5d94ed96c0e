#ifndef SUPERSERVE_POLICIES_SYMPHONY_POLICY_H_
#define SUPERSERVE_POLICIES_SYMPHONY_POLICY_H_

#include <cstdint>
#include <string>

#include "common/model_profile.h"
#include "common/time.h"
#include "policies/arrival_rate.h"
#include "policies/profiled_policy.h"

namespace superserve {

struct SymphonyOptions {
  ProfiledPolicyOptions base;
  // Symphony's sliding window (its scheduler's batch policy): a head query
  // that cannot be served within a batch of min(target, queued) is dropped
  // rather than shrinking the batch to fit it. target is the batch the
  // measured arrival rate sustains (the largest b with ℓ(b)·(1 + 1/n) <= SLO,
  // n = rate·ℓ(b)/b workers at batch b). Past the peak this keeps batches
  // large, so goodput stays near the peak instead of collapsing into ever
  // smaller batches (the EDF spiral). false: only infeasible heads are
  // dropped.
  bool window_drop = true;
  // ... once the head's slack is below this fraction of ℓ(min(target,
  // queued)): a dispatch a little late (timer and RPC jitter) shrinks the
  // batch a little instead of dropping the head.
  double window_fraction = 0.9;
  // The frontrun moment moves this fraction of the query's SLO budget
  // (deadline − arrival) earlier, so that dispatch jitter beyond the
  // overhead estimate does not make a batch with no slack left late
  // (Symphony plans with a high percentile of its network delay, Fig. 14).
  double frontrun_margin = 0.02;
  // Sliding window of the arrival-rate estimate behind the target batch.
  Nanos rate_window = Millis(250);
};

// Symphony's deferred batch scheduling (Symphony §3.2, Algorithm 1) for one
// model, one fixed subnet (the most accurate: Symphony does not trade
// accuracy). The candidate batch B is the largest EDF prefix that still
// meets the head's deadline d when started now; with ℓ(b) the latency of b
// queries plus the dispatch overhead estimate,
//   exec   = max(now, d − ℓ(|B| + 1) − m)   (frontrun: one more query
//                                       would no longer fit, so waiting
//                                       longer cannot grow the batch; m is
//                                       frontrun_margin of the SLO budget)
//   latest = d − ℓ(|B|).
// Before exec the policy answers WakeAt(exec) (asked again sooner on an
// arrival, which may grow the batch and move exec earlier); at exec it
// dispatches B to the lowest-id free worker, so that higher ids stay idle
// under low load (load-proportional). Urgency() is the candidate's latest:
// the serving core offers a free worker to the model whose candidate must
// start first. Padded batch sizes (a profile with only powers of two) are
// handled through the latency of the smallest profiled batch >= b.
class SymphonyPolicy : public ProfiledPolicy {
 public:
  explicit SymphonyPolicy(const ModelProfile& profile, SymphonyOptions options = {})
      : SymphonyPolicy("symphony", profile, options) {}

  Decision Decide(const SchedulingContext& ctx) override;
  Nanos Urgency(const EdfQueue& queue, Nanos now) const override;
  void OnArrival(const Query& q, Nanos now) override { arrivals_.Add(now); }

  // The sliding window's target batch for an SLO of `budget` at `rate` q/s.
  int32_t TargetBatch(Nanos budget, double rate) const;

  // The candidate for `pending` queries whose most urgent one has deadline
  // `deadline` and arrived at `arrival`, at time `now` (tests, Urgency).
  struct Candidate {
    int batch_index = 0;  // the profiled batch that runs `size` queries
    int64_t size = 0;
    Nanos exec = 0;
    Nanos latest = 0;     // d − ℓ(size), dispatch overhead included
  };
  Candidate Plan(int64_t pending, Nanos deadline, Nanos arrival, Nanos now) const;

 protected:
  // For variants that keep Symphony's candidate but dispatch it at another
  // moment (the reproduction's eager and timeout-based batching, bench/).
  SymphonyPolicy(std::string name, const ModelProfile& profile, SymphonyOptions options);
  // When candidate `c` (its size and latest set) becomes dispatchable: the
  // frontrun moment.
  virtual Nanos ExecTime(const Candidate& c, Nanos deadline, Nanos arrival, Nanos now) const;

  Nanos FastestLatency() const override { return table_.latency(rank_, 0); }
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;

 private:
  int rank_;
  bool window_drop_;
  double window_fraction_;
  double frontrun_margin_;
  ArrivalRateEstimator arrivals_;
  int32_t target_ = 1;
  Nanos target_at_ = -1;  // when target_ was computed (recomputed every 5 ms)
  Nanos target_budget_ = 0;
  Nanos chosen_latest_ = 0;  // Choose -> Decide: the dispatched candidate's window
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_SYMPHONY_POLICY_H_
