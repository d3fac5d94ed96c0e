#ifndef SUPERSERVE_BENCH_BASELINES_GREEDY_POLICIES_H_
#define SUPERSERVE_BENCH_BASELINES_GREEDY_POLICIES_H_

#include "common/model_profile.h"
#include "policies/profiled_policy.h"

namespace superserve {

// SuperServe App. A.5's MaxBatch: the largest batch the least accurate subnet
// fits into the slack, then the most accurate subnet at that batch.
// O(log B + log S).
class MaxBatchPolicy : public ProfiledPolicy {
 public:
  MaxBatchPolicy(const ModelProfile& profile, ProfiledPolicyOptions options = {})
      : ProfiledPolicy("maxbatch", profile, options) {}

 protected:
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;
};

// SuperServe App. A.5's MaxAcc: the most accurate subnet that fits the slack
// at batch 1, then the largest batch of that subnet that still fits.
class MaxAccPolicy : public ProfiledPolicy {
 public:
  MaxAccPolicy(const ModelProfile& profile, ProfiledPolicyOptions options = {})
      : ProfiledPolicy("maxacc", profile, options) {}

 protected:
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;
};

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_BASELINES_GREEDY_POLICIES_H_
