#include "policies/slackfit_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace superserve {

namespace {
// Bucket rebuilds cost O(subnets x batches); corrections arrive per batch.
constexpr Nanos kRebuildInterval = Millis(50);
}  // namespace

std::string SlackFitPolicy::NameFor(const SlackFitOptions& o) {
  return o.rate_guard ? "slackfit-rg" : "slackfit";
}

SlackFitPolicy::SlackFitPolicy(const ModelProfile& profile, SlackFitOptions options)
    : ProfiledPolicy(NameFor(options), profile, options.base),
      options_(options),
      buckets_(table_, options.num_buckets),
      buckets_version_(table_.version()),
      arrivals_(options.rate_window) {}

void SlackFitPolicy::OnArrival(const Query& q, Nanos now) {
  if (options_.rate_guard) arrivals_.Add(now);
}

void SlackFitPolicy::OnCompletion(const CompletionTelemetry& t) {
  ProfiledPolicy::OnCompletion(t);
  if (table_.version() != buckets_version_ && t.now - last_rebuild_ >= kRebuildInterval) {
    buckets_.Build(table_, options_.num_buckets);
    buckets_version_ = table_.version();
    last_rebuild_ = t.now;
  }
}

double SlackFitPolicy::Throughput(int64_t batch, int rank, int batch_index) const {
  return static_cast<double>(batch) * kNanosPerSecond /
         static_cast<double>(table_.latency(rank, batch_index));
}

ProfiledPolicy::Choice SlackFitPolicy::Choose(const SchedulingContext& ctx,
                                              const QueueView& view) {
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
  c = PartialBatch(view.pending, view.slack, c);
  if (options_.rate_guard) c = RateGuard(ctx, view, c);
  return c;
}

ProfiledPolicy::Choice SlackFitPolicy::RateGuard(const SchedulingContext& ctx,
                                                 const QueueView& view, Choice chosen) {
  const int64_t workers = std::max<int64_t>(
      1, std::max<int64_t>(ctx.live_workers, static_cast<int64_t>(ctx.free_workers.size())));
  const double need = options_.guard_headroom * arrivals_.Rate(ctx.now) /
                      static_cast<double>(workers);
  auto batch_of = [&](int bi) { return std::min<int64_t>(view.pending, table_.batch_size(bi)); };
  // A batch that takes the whole queue is not falling behind.
  if (view.pending <= table_.batch_size(chosen.batch_index)) return chosen;
  if (Throughput(batch_of(chosen.batch_index), chosen.rank, chosen.batch_index) >= need) {
    return chosen;
  }
  // The most accurate subnet that keeps up within the slack.
  for (int r = table_.num_subnets() - 1; r >= 0; --r) {
    int b = table_.LargestBatchWithin(r, view.slack);
    if (b >= 0 && Throughput(batch_of(b), r, b) >= need) return Choice{r, b};
  }
  // Nothing keeps up: maximum throughput that fits (ties to accuracy).
  Choice best = chosen;
  double best_thr = Throughput(batch_of(chosen.batch_index), chosen.rank, chosen.batch_index);
  for (int r = table_.num_subnets() - 1; r >= 0; --r) {
    int b = table_.LargestBatchWithin(r, view.slack);
    if (b < 0) continue;
    double thr = Throughput(batch_of(b), r, b);
    if (thr > best_thr) {
      best_thr = thr;
      best = Choice{r, b};
    }
  }
  return best;
}

}  // namespace superserve
