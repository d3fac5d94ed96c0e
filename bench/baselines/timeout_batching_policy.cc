#include "bench/baselines/timeout_batching_policy.h"

#include <algorithm>
#include <string>

namespace superserve {

TimeoutBatchingPolicy::TimeoutBatchingPolicy(const ModelProfile& profile, Nanos timeout,
                                             SymphonyOptions options)
    : SymphonyPolicy(
          timeout <= 0 ? std::string("eager") : "timeout(" + std::to_string(timeout / 1000) + "us)",
          profile, options),
      timeout_(std::max<Nanos>(timeout, 0)) {}

Nanos TimeoutBatchingPolicy::ExecTime(const Candidate&, Nanos, Nanos arrival, Nanos now) const {
  return std::max(now, arrival + timeout_);
}

}  // namespace superserve
