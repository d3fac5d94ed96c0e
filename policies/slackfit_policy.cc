#include "policies/slackfit_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace superserve {

namespace {
// Bucket rebuilds cost O(subnets x batches); corrections arrive per batch.
constexpr Nanos kRebuildInterval = Millis(50);
}  // namespace

SlackFitOptions SlackFitPolicy::Resolve(SlackFitOptions o) {
  if (o.rate_guard) o.base.latency.unmeasured_margin = o.guard_unmeasured_margin;
  if (o.fit_margin < 0) o.fit_margin = o.rate_guard ? kRateGuardFitMargin : 0.0;
  return o;
}

std::string SlackFitPolicy::NameFor(const SlackFitOptions& o) {
  if (o.rate_guard) return "slackfit-rg";
  return o.partial_most_accurate ? "slackfit-ma" : "slackfit";
}

SlackFitPolicy::SlackFitPolicy(const ModelProfile& profile, SlackFitOptions options)
    : ProfiledPolicy(NameFor(options), profile, Resolve(options).base),
      options_(Resolve(options)),
      buckets_(table_, options.num_buckets, options.bucket_ties),
      buckets_version_(table_.version()),
      arrivals_(options.rate_window) {}

void SlackFitPolicy::OnArrival(const Query& q, Nanos now) {
  if (options_.rate_guard) arrivals_.Add(now);
}

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

double SlackFitPolicy::Throughput(int64_t batch, int rank, int batch_index) const {
  return static_cast<double>(batch) * kNanosPerSecond /
         static_cast<double>(table_.latency(rank, batch_index));
}

ProfiledPolicy::Choice SlackFitPolicy::Choose(const SchedulingContext& ctx,
                                              const QueueView& given) {
  // The budget every choice must fit: the slack, less fit_margin of the
  // tuple's own latency (l * (1 + m) <= slack).
  QueueView view = given;
  if (options_.fit_margin > 0) {
    view.slack = static_cast<Nanos>(static_cast<double>(view.slack) / (1.0 + options_.fit_margin));
  }
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
  const int slackfit_rank = c.rank;
  if (options_.partial_most_accurate) {
    c = PartialBatch(view.pending, view.slack, c);
  } else if (view.pending < table_.batch_size(c.batch_index)) {
    c.batch_index = table_.BatchIndexFor(view.pending);
  }
  if (options_.rate_guard) c = RateGuard(ctx, view, c, slackfit_rank);
  return c;
}

ProfiledPolicy::Choice SlackFitPolicy::RateGuard(const SchedulingContext& ctx,
                                                 const QueueView& view, Choice chosen,
                                                 int slackfit_rank) {
  const double rate = arrivals_.Rate(ctx.now);
  if (rate <= 0) return chosen;
  const int64_t workers = std::max<int64_t>(
      1, std::max<int64_t>(ctx.live_workers, static_cast<int64_t>(ctx.free_workers.size())));
  // Per-worker throughput every dispatch must sustain.
  const double need = options_.guard_headroom * rate / static_cast<double>(workers);
  const int64_t n = view.pending;
  const int partial_bi = n >= table_.max_batch() ? -1 : table_.BatchIndexFor(n);
  auto now_batch = [&](int bi) { return std::min<int64_t>(n, table_.batch_size(bi)); };
  if (Throughput(now_batch(chosen.batch_index), chosen.rank, chosen.batch_index) >= need) {
    return chosen;
  }
  // The most accurate subnet with a sustainable tuple: run now with what is
  // queued, or (Symphony-style deferral) wait for the arrivals that fill a
  // larger batch when the head's slack still covers the wait plus the run;
  // with guard_upgrades_only, no less accurate than SlackFit's own subnet.
  const int lowest_rank = options_.guard_upgrades_only ? std::max(slackfit_rank, 0) : 0;
  for (int r = table_.num_subnets() - 1; r >= lowest_rank; --r) {
    Nanos best_wait = INT64_MAX;
    Choice deferred;
    for (int bi = table_.num_batches() - 1; bi >= 0; --bi) {
      const Nanos l = table_.latency(r, bi);
      const int64_t m = table_.batch_size(bi);
      if (m <= n || bi == partial_bi) {  // runnable now
        if (l <= view.slack && Throughput(now_batch(bi), r, bi) >= need) return Choice{r, bi};
        continue;
      }
      const Nanos wait = static_cast<Nanos>(static_cast<double>(m - n) * kNanosPerSecond / rate);
      // The wait must also leave the head above the drop threshold.
      if (wait + std::max(l, FastestLatency()) <= view.slack && Throughput(m, r, bi) >= need &&
          wait < best_wait) {
        best_wait = wait;
        deferred = Choice{r, bi, ctx.now + std::max<Nanos>(wait, 1)};
      }
    }
    if (deferred.rank >= 0) return deferred;
  }
  // Nothing (at or above SlackFit's subnet, with guard_upgrades_only)
  // sustains the rate: the fastest subnet at the smallest batch that keeps
  // up (the shortest run that does: the rest of the queue goes to the next
  // free worker), else the tuple with the highest throughput that fits now
  // (INFaaS's choice); the drop rule (heads below the first bucket) keeps the
  // head out of EDF's overload spiral.
  Choice best = chosen;
  double best_goodput = Throughput(now_batch(chosen.batch_index), chosen.rank, chosen.batch_index);
  for (int bi = 0; bi < table_.num_batches(); ++bi) {
    if (table_.batch_size(bi) > n && bi != partial_bi) continue;
    // The subnet with the highest throughput at this batch (ties: accuracy).
    int r_best = -1;
    for (int r = table_.num_subnets() - 1; r >= 0; --r) {
      if (r_best < 0 || table_.latency(r, bi) < table_.latency(r_best, bi)) r_best = r;
    }
    if (table_.latency(r_best, bi) > view.slack) continue;
    const double goodput = Throughput(now_batch(bi), r_best, bi);
    if (goodput >= need) return Choice{r_best, bi};
    if (goodput > best_goodput) {
      best_goodput = goodput;
      best = Choice{r_best, bi};
    }
  }
  return best;
}

}  // namespace superserve
