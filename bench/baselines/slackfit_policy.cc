#include "bench/baselines/slackfit_policy.h"

namespace superserve {

namespace {
// Bucket rebuilds cost O(subnets x batches); corrections arrive per batch.
constexpr Nanos kRebuildInterval = Millis(50);
}  // namespace

SlackFitPolicy::SlackFitPolicy(const ModelProfile& profile, SlackFitOptions options)
    : ProfiledPolicy("slackfit", profile, options.base),
      options_(options),
      buckets_(table_, options.num_buckets, options.bucket_ties),
      buckets_version_(table_.version()) {}

void SlackFitPolicy::OnCompletion(const CompletionTelemetry& t) {
  ProfiledPolicy::OnCompletion(t);
  if (table_.version() != buckets_version_ && t.now - last_rebuild_ >= kRebuildInterval) {
    buckets_.Build(table_, options_.num_buckets, options_.bucket_ties);
    buckets_version_ = table_.version();
    last_rebuild_ = t.now;
  }
}

Nanos SlackFitPolicy::FastestLatency() const {
  // The first bucket's upper bound: the smallest slack any bucket fits.
  return options_.drop_below_first_bucket ? buckets_.upper_bound(0) : table_.min_latency();
}

ProfiledPolicy::Choice SlackFitPolicy::Choose(const SchedulingContext& ctx, const QueueView& view) {
  LatencyBuckets::Tuple t = buckets_.Lookup(view.slack);
  Choice c{t.rank, t.batch_index};
  if (c.rank < 0 || table_.latency(c.rank, c.batch_index) > view.slack) {
    // Slack below the first bucket's upper bound (or a stale bucket after a
    // correction): the largest batch of the fastest subnet that fits, then
    // the most accurate subnet at that batch (MaxBatch's rule).
    int b = table_.LargestBatchWithin(0, view.slack);
    if (b < 0) b = 0;
    int r = table_.HighestRankWithin(b, view.slack);
    c = Choice{r < 0 ? 0 : r, b};
  }
  if (view.pending < table_.batch_size(c.batch_index)) {
    c.batch_index = table_.BatchIndexFor(view.pending);
  }
  return c;
}

}  // namespace superserve
