#ifndef SUPERSERVE_BENCH_BASELINES_SLACKFIT_POLICY_H_
#define SUPERSERVE_BENCH_BASELINES_SLACKFIT_POLICY_H_

#include <cstdint>

#include "bench/baselines/latency_buckets.h"
#include "common/model_profile.h"
#include "policies/profiled_policy.h"

namespace superserve {

// Default K (docs/decisions/slackfit-buckets.md).
inline constexpr int kDefaultSlackFitBuckets = 8;

struct SlackFitOptions {
  ProfiledPolicyOptions base;
  int num_buckets = kDefaultSlackFitBuckets;
  // true: a head whose slack fits no bucket is dropped (the paper: SlackFit
  // only runs bucket choices, §4.2; the reproduction's setting). false: only
  // heads that not even the fastest tuple can still serve are dropped
  // (docs/decisions/slackfit-drop-rule.md). --drop_below_first_bucket.
  bool drop_below_first_bucket = false;
  // Within a bucket, the largest batch; ties to the fastest tuple (the
  // paper's "high throughput choice") or to the highest accuracy.
  LatencyBuckets::Ties bucket_ties = LatencyBuckets::Ties::kThroughput;
};

// SuperServe's SlackFit (§4.2, App. A.5), a paper baseline: K evenly sized
// latency buckets, the bucket just below the head's slack, the largest batch
// within it (ties to throughput); a partial batch keeps the bucket's subnet
// at the smallest batch >= the queue. Buckets follow the online-corrected
// latency table and are rebuilt when it changed (at most once per 50 ms).
class SlackFitPolicy : public ProfiledPolicy {
 public:
  SlackFitPolicy(const ModelProfile& profile, SlackFitOptions options);
  explicit SlackFitPolicy(const ModelProfile& profile)
      : SlackFitPolicy(profile, SlackFitOptions()) {}

  void OnCompletion(const CompletionTelemetry& t) override;

  const LatencyBuckets& buckets() const { return buckets_; }

 protected:
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;
  Nanos FastestLatency() const override;

 private:
  SlackFitOptions options_;
  LatencyBuckets buckets_;
  uint64_t buckets_version_;
  Nanos last_rebuild_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_BASELINES_SLACKFIT_POLICY_H_
