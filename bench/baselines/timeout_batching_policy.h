#ifndef SUPERSERVE_BENCH_BASELINES_TIMEOUT_BATCHING_POLICY_H_
#define SUPERSERVE_BENCH_BASELINES_TIMEOUT_BATCHING_POLICY_H_

#include "common/model_profile.h"
#include "common/time.h"
#include "policies/symphony_policy.h"

namespace superserve {

// The timeout-based batching Symphony §3.4 compares deferred batching with
// (TensorFlow Serving's rule): Symphony's candidate batch, dispatchable
// `timeout` after its oldest query arrived; a timeout of 0 is eager batching.
// Named "eager" or "timeout(<us>us)". A reproduction baseline
// (superserve-symphony-repro), not selectable with --policy.
class TimeoutBatchingPolicy : public SymphonyPolicy {
 public:
  TimeoutBatchingPolicy(const ModelProfile& profile, Nanos timeout, SymphonyOptions options);

 protected:
  Nanos ExecTime(const Candidate& c, Nanos deadline, Nanos arrival, Nanos now) const override;

 private:
  Nanos timeout_;
};

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_BASELINES_TIMEOUT_BATCHING_POLICY_H_
