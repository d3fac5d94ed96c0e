#ifndef SUPERSERVE_POLICIES_GREEDY_POLICIES_H_
#define SUPERSERVE_POLICIES_GREEDY_POLICIES_H_

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

// One fixed subnet with adaptive batching (the largest batch that fits the
// slack, no larger than the queue needs). Clipper+ runs it once per accuracy
// point; INFaaS without accuracy constraints is the least accurate subnet.
// Its drop threshold is its own subnet's batch-1 latency.
class FixedSubnetPolicy : public ProfiledPolicy {
 public:
  FixedSubnetPolicy(std::string name, const ModelProfile& profile, int subnet_index,
                    ProfiledPolicyOptions options = {});

  bool MayRun(int32_t subnet_index) const override {
    return subnet_index >= 0 && subnet_index < table_.num_subnets() &&
           table_.rank_of_subnet(subnet_index) == rank_;
  }

 protected:
  Nanos FastestLatency() const override { return table_.latency(rank_, 0); }
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;

 private:
  int rank_;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_GREEDY_POLICIES_H_
