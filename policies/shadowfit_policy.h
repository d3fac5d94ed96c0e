#ifndef SUPERSERVE_POLICIES_SHADOWFIT_POLICY_H_
#define SUPERSERVE_POLICIES_SHADOWFIT_POLICY_H_

#include <vector>

#include "common/model_profile.h"
#include "policies/clipper_shadow.h"
#include "policies/ratefit_policy.h"

namespace superserve {

struct ShadowFitOptions {
  RateFitOptions ratefit;
  // Shadow Clipper+ runs at this many accuracy ranks, evenly spaced from the
  // least to the most accurate subnet (every rank when there are fewer).
  // With 8 or 12 the property test's overload cases fell below the best
  // baseline - 0.002 (K = 4).
  int shadows = 16;
  // A shadow vouches for its subnet once it has met every deadline for this
  // many SLOs. With 4, one more case of the property test fell below the
  // envelope - 0.3 (7 instead of 6, K = 4).
  double hold_slos = 8.0;
  // A queue that fails ratefit's backlog check (clearing within
  // backlog_factor x the head's slack) may still be served by a vouched-for
  // subnet if it clears within this fraction of the slack. 1.2 lost two
  // overload cases of the property test.
  double vouched_backlog_factor = 1.0;
};

// "shadowfit" (opt-in): ratefit raised towards the Clipper+ envelope, the
// most accurate fixed subnet that would have held the SLO. Shadow Clipper+
// runs (ClipperShadow) at `shadows` fixed ranks are fed every real arrival;
// the subnet to start from is the more accurate of ratefit's rate-driven
// choice and the most accurate shadow that has met every deadline for the
// last hold_slos x SLO. ratefit's backlog check then applies, except that a
// vouched-for subnet is kept for a queue it clears within
// vouched_backlog_factor x the head's slack (a burst the fixed subnet rides
// out); ratefit's drop rule and overload answer are unchanged. Per arrival:
// one update per shadow, amortised O(log W) each; per decision O(shadows).
class ShadowFitPolicy : public RateFitPolicy {
 public:
  ShadowFitPolicy(const ModelProfile& profile, ShadowFitOptions options);
  // The shadows point into this policy's latency table.
  ShadowFitPolicy(const ShadowFitPolicy&) = delete;
  ShadowFitPolicy& operator=(const ShadowFitPolicy&) = delete;

  void OnArrival(const Query& q, Nanos now) override;

 protected:
  int UpperRank(const SchedulingContext& ctx, Nanos slo, int rate_rank) override;
  bool BacklogVetted(const SchedulingContext& ctx, int rank, const QueueView& view,
                     double clearing) override;

 private:
  ShadowFitOptions options_;
  std::vector<ClipperShadow> shadows_;  // ascending rank; created on the first decision
  Nanos hold_ = 0;                      // hold_slos x the SLO of the last decision
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_SHADOWFIT_POLICY_H_
