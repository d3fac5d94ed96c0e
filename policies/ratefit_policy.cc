#include "policies/ratefit_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

namespace superserve {
namespace {

LatencyTable::Options AtQuantile(LatencyTable::Options o, double quantile) {
  o.quantile = quantile;
  return o;
}

}  // namespace

RateFitPolicy::RateFitPolicy(const ModelProfile& profile, RateFitOptions options)
    : RateFitPolicy("ratefit", profile, options) {}

RateFitPolicy::RateFitPolicy(std::string name, const ModelProfile& profile,
                             RateFitOptions options)
    : ProfiledPolicy(std::move(name), profile, options.base),
      options_(options),
      arrivals_(options.rate_window),
      long_arrivals_(options.drop_rate_window) {
  if (options.capacity_quantile != options.base.latency.quantile) {
    own_capacity_table_.emplace(profile,
                                AtQuantile(options.base.latency, options.capacity_quantile));
  }
}

void RateFitPolicy::OnArrival(const Query& q, Nanos now) {
  arrivals_.Add(now);
  long_arrivals_.Add(now);
}

namespace {

int64_t Workers(const SchedulingContext& ctx) {
  return std::max<int64_t>(
      1, std::max<int64_t>(ctx.live_workers, static_cast<int64_t>(ctx.free_workers.size())));
}

}  // namespace

Decision RateFitPolicy::Decide(const SchedulingContext& ctx) {
  // The drop threshold is read before Choose (ProfiledPolicy's drop rule):
  // refreshed here, every decision, so that a threshold that once dropped
  // every head (a rate spike) cannot outlive the spike.
  if (!ctx.assume_overload && !ctx.queue.empty()) {
    RefreshCapacity(BudgetFor(ctx.queue.Head(), Workers(ctx)));  // fastest_rank_
    UpdateSustainLatency(ctx);
  }
  Decision d = ProfiledPolicy::Decide(ctx);
  // The overload plan's answers are hypothetical: nothing is dispatched.
  if (d.kind == Decision::Kind::kDispatch && !ctx.assume_overload && d.worker >= 0) {
    if (static_cast<size_t>(d.worker) >= busy_until_.size()) busy_until_.resize(d.worker + 1, 0);
    const Nanos latency = table_.latency(table_.rank_of_subnet(d.subnet_index),
                                         table_.BatchIndexFor(d.batch_size));
    last_dispatch_ = ctx.now;
    last_worker_ = d.worker;
    busy_until_[d.worker] = ctx.now + overhead_estimate() +
                            static_cast<Nanos>(ctx.worker_speed * static_cast<double>(latency));
  }
  return d;
}

void RateFitPolicy::OnCompletion(const CompletionTelemetry& t) {
  ProfiledPolicy::OnCompletion(t);
  if (own_capacity_table_) {
    const int bi = own_capacity_table_->ExactBatchIndex(t.batch_size);
    if (bi >= 0 && t.exec > 0) own_capacity_table_->Record(t.subnet_index, bi, t.exec);
  }
  if (t.worker >= 0 && static_cast<size_t>(t.worker) < busy_until_.size()) busy_until_[t.worker] = 0;
}

void RateFitPolicy::CollectBusyOffsets(const SchedulingContext& ctx, int64_t workers) {
  busy_offsets_.clear();
  const int64_t busy = workers - static_cast<int64_t>(ctx.free_workers.size());
  for (size_t w = 0; w < busy_until_.size(); ++w) {
    if (static_cast<int64_t>(busy_offsets_.size()) >= busy) break;
    if (busy_until_[w] <= 0) continue;
    // free_workers is ascending (SchedulingContext).
    if (std::binary_search(ctx.free_workers.begin(), ctx.free_workers.end(),
                           static_cast<int32_t>(w))) {
      continue;
    }
    busy_offsets_.push_back(std::max<Nanos>(0, busy_until_[w] - ctx.now));
  }
}

bool RateFitPolicy::Clears(const SchedulingContext& ctx, const QueueView& view, int64_t workers,
                           int rank, int64_t pending) {
  const int bi = BatchFor(rank, view.slack);
  if (bi < 0) return false;
  const int64_t b = table_.batch_size(bi);
  const int64_t batches = (pending + b - 1) / b;
  const int64_t free = static_cast<int64_t>(ctx.free_workers.size());
  // As many batches as free workers: each starts now and fits the head's
  // slack (fit margin included), so the queue clears.
  if (batches <= free) return true;
  const Nanos latency = std::max<Nanos>(1, table_.latency(rank, bi));
  // Rounds over all workers as if each were free now, within backlog_factor
  // of the slack: the margin for the wait for busy workers.
  const int64_t rounds = (batches + workers - 1) / workers;
  const double clearing = static_cast<double>(rounds) * static_cast<double>(latency);
  if (clearing <= options_.backlog_factor * static_cast<double>(view.slack)) return true;
  // Or by when each worker frees up: the free ones now, the busy ones this
  // policy dispatched to when their batch ends by its estimate, any other
  // after one batch of this rank; each runs batches back to back until the
  // head's slack. Where the rounds' margin is too much (one round that
  // needs a busy worker, whose batch is about to end) this passes; where a
  // busy worker frees up late it does not, but the rounds may. Either
  // clearing passes: each alone lost accuracy on the property test
  // (docs/scheduling-ratefit-history.md).
  const Nanos slack = view.slack;
  int64_t can = free * (slack / latency);
  for (Nanos offset : busy_offsets_) {
    if (offset < slack) can += (slack - offset) / latency;
  }
  const int64_t unknown = std::max<int64_t>(
      0, workers - free - static_cast<int64_t>(busy_offsets_.size()));
  if (latency < slack) can += unknown * ((slack - latency) / latency);
  if (can >= batches) return true;
  return BacklogVetted(ctx, rank, view, clearing);
}

void RateFitPolicy::RefreshCapacity(Nanos budget) {
  // Rebuilding is O(subnets x batches): only when the budget moved by more
  // than 1 % or an estimate changed.
  if (budget_ >= 0 && table_.version() == table_version_ &&
      capacity_latencies().version() == capacity_version_ &&
      std::llabs(budget - budget_) * 100 <= budget_) {
    return;
  }
  budget_ = budget;
  table_version_ = table_.version();
  capacity_version_ = capacity_latencies().version();
  const int s = table_.num_subnets();
  capacity_.assign(s, 0.0);
  suffix_max_.assign(s, 0.0);
  fastest_rank_ = 0;
  double fastest = 0;
  const int nb = table_.num_batches();
  batch_overhead_ = overhead_estimate();
  best_batch_upto_.assign(static_cast<size_t>(s) * nb, 0);
  for (int r = 0; r < s; ++r) {
    // The highest-throughput rank (the overload plan's answer, the drop
    // rule's and the backlog check's last resort) is picked by
    // ComparableLatency: by the estimates a measured rank (its p99) looks
    // slower than an unmeasured neighbour (its profiled mean) of the same
    // speed, so past the peak the policy wandered onto slower unmeasured
    // ranks next to the fastest one (docs/scheduling-ratefit-history.md, "Overload").
    double comparable = 0;
    for (int bi = 0; bi < nb; ++bi) {
      const Nanos l = table_.latency(r, bi);
      if (l > budget) break;
      const double b = table_.batch_size(bi) * 1e9;
      capacity_[r] =
          std::max(capacity_[r], b / static_cast<double>(capacity_latencies().latency(r, bi)));
      comparable = std::max(comparable, b / static_cast<double>(table_.ComparableLatency(r, bi)));
    }
    if (comparable >= fastest) {  // ties: accuracy
      fastest = comparable;
      fastest_rank_ = r;
    }
    uint8_t* best = &best_batch_upto_[static_cast<size_t>(r) * nb];
    for (int bi = 1; bi < nb; ++bi) {
      best[bi] = Throughput(r, bi) > Throughput(r, best[bi - 1]) ? static_cast<uint8_t>(bi)
                                                                 : best[bi - 1];
    }
  }
  for (int r = s - 1; r >= 0; --r) {
    suffix_max_[r] = std::max(capacity_[r], r + 1 < s ? suffix_max_[r + 1] : 0.0);
  }
  // The frontier: ranks at least as fast as every more accurate rank. Along
  // it capacity falls as accuracy rises, even where the profile's latencies
  // are not monotone in accuracy (measured profiles: the least accurate
  // subnet need not be the fastest); the step-down search stays on it.
  frontier_.clear();
  for (int r = 0; r < s; ++r) {
    if (capacity_[r] >= suffix_max_[r]) frontier_.push_back(r);
  }
}

double RateFitPolicy::Throughput(int rank, int batch_index) const {
  return table_.batch_size(batch_index) /
         static_cast<double>(table_.latency(rank, batch_index) + batch_overhead_);
}

int RateFitPolicy::BatchFor(int rank, Nanos slack) const {
  const Nanos within = std::min(slack, budget_);
  const int largest = table_.LargestBatchWithin(rank, within);
  // Not even batch 1 within the budget (an SLO barely above the latencies):
  // the largest batch within the slack, as before there was a budget here.
  if (largest < 0) return table_.LargestBatchWithin(rank, slack);
  const int best = best_batch_upto_[static_cast<size_t>(rank) * table_.num_batches() + largest];
  if (table_.latency(rank, best) <= within) return best;
  // Corrected latencies not monotone in batch size: a smaller batch can be
  // the slower one. Scan.
  int pick = largest;
  for (int bi = 0; bi < largest; ++bi) {
    if (table_.latency(rank, bi) <= within && Throughput(rank, bi) > Throughput(rank, pick)) {
      pick = bi;
    }
  }
  return pick;
}

Nanos RateFitPolicy::BudgetFor(const Query& head, int64_t workers) const {
  const Nanos slo = head.deadline - head.arrival;
  double fraction = options_.batch_budget;
  if (options_.one_subnet_staggered_budget && table_.num_subnets() == 1) {
    fraction = std::max(fraction, static_cast<double>(workers) / static_cast<double>(workers + 1));
  }
  return static_cast<Nanos>(fraction *
                            static_cast<double>(std::max<Nanos>(slo - overhead_estimate(), 0)));
}

Nanos RateFitPolicy::PacedStart(const SchedulingContext& ctx, const QueueView& view,
                                Nanos slack_before_margin, int64_t workers, int rank,
                                int full) const {
  // The overload plan's answers are what the policy runs, not when; and a
  // worker freed by the last dispatch's own batch is no one's turn to take.
  if (options_.pace <= 0 || ctx.assume_overload || last_worker_ < 0 ||
      ctx.free_workers.front() == last_worker_) {
    return ctx.now;
  }
  const Nanos turn =
      last_dispatch_ + static_cast<Nanos>(options_.pace *
                                          static_cast<double>(table_.latency(rank, full)) /
                                          static_cast<double>(workers));
  // Waiting past this would leave no room, fit margin included, for the
  // query it waits for, or would let the head fall under the drop
  // threshold (FastestLatency(): after a rate spike it can exceed the
  // latency of the batch waited for). From the slack before the margin:
  // asked again then, the same sum gives now, and the batch goes.
  const int one_more =
      table_.BatchIndexFor(std::min<int64_t>(view.pending + 1, table_.max_batch()));
  const auto room = std::max(
      FastestLatency(), static_cast<Nanos>(std::ceil(static_cast<double>(
                            table_.latency(rank, one_more)) * (1.0 + options_.fit_margin))));
  const Nanos latest = ctx.now + slack_before_margin - room;
  return std::min(turn, latest);
}

void RateFitPolicy::UpdateSustainLatency(const SchedulingContext& ctx) {
  // The drop threshold follows the rate over the longer window: a burst
  // alone should not drop heads that its queue can still serve. At most a
  // batch that fits a fresh query's budget (SLO - overhead): a rate no batch
  // sustains (past the peak, or two arrivals microseconds apart as the first
  // ones) must not make every head droppable.
  const int64_t workers = Workers(ctx);
  const Query& head = ctx.queue.Head();
  const Nanos fits = head.deadline - head.arrival - overhead_estimate();
  const double sustained = long_arrivals_.Rate(ctx.now) / static_cast<double>(workers);
  // If none sustains it, the fitting batch with the highest throughput: the
  // largest one can serve fewer queries per ms (CPU-shaped profiles are
  // linear past their second knee), and its longer latency as the threshold
  // drops every head that waited at all, leaving the small batches of fresh
  // arrivals (EDF's spiral; docs/scheduling.md, "One subnet").
  sustain_latency_ = 0;
  double best = -1;
  for (int bi = 0; bi < table_.num_batches(); ++bi) {
    const Nanos l = table_.latency(fastest_rank_, bi);
    if (l > fits && sustain_latency_ > 0) break;
    const double throughput = table_.batch_size(bi) * 1e9 / static_cast<double>(l);
    if (throughput >= sustained) {
      sustain_latency_ = l;
      break;
    }
    if (throughput > best) {
      best = throughput;
      sustain_latency_ = l;
    }
  }
}

Nanos RateFitPolicy::FastestLatency() const {
  return std::max(table_.min_latency(), sustain_latency_);
}

int RateFitPolicy::HighestRankWithCapacity(double need) const {
  // suffix_max_ is non-increasing in rank; the last rank where it is >= need
  // has that capacity itself (the ranks above it all fall short).
  if (suffix_max_.empty() || suffix_max_[0] < need) return -1;
  int lo = 0, hi = static_cast<int>(suffix_max_.size()) - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (suffix_max_[mid] >= need) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

ProfiledPolicy::Choice RateFitPolicy::Choose(const SchedulingContext& ctx,
                                             const QueueView& given) {
  // Every choice fits the slack with fit_margin of its latency to spare: the
  // estimates are rolling p99s (or profiled means before telemetry).
  QueueView view = given;
  view.slack = static_cast<Nanos>(static_cast<double>(view.slack) / (1.0 + options_.fit_margin));
  const Query& head = ctx.queue.Head();
  const Nanos slo = head.deadline - head.arrival;
  const int64_t workers = Workers(ctx);
  RefreshCapacity(BudgetFor(head, workers));
  const double need = ctx.assume_overload
                          ? std::numeric_limits<double>::infinity()
                          : options_.headroom * arrivals_.Rate(ctx.now) /
                                static_cast<double>(workers);
  int r = fastest_rank_;  // the overload plan: the highest throughput
  bool near_peak = true;
  if (!ctx.assume_overload) {
    // A rate beyond every capacity starts from the highest capacity by the
    // estimates, which may be a more accurate neighbour of fastest_rank_
    // that only looks faster: the backlog check below steps down to
    // fastest_rank_ when the queue needs it, while a rate measured over
    // 100 ms alone does not demand the last percent (docs/scheduling-ratefit-history.md,
    // "Overload").
    //
    // A rate within peak_band of the highest capacity is served at that
    // capacity: a step up on a rate estimate a few percent low builds a
    // backlog that, this close to the peak, no rank has the spare capacity
    // to drain before it expires (at 5 % spare, draining takes 20x as long
    // as building).
    const double peak = suffix_max_.empty() ? 0.0 : suffix_max_[0];
    near_peak = need * (1.0 + options_.peak_band) >= peak;
    r = HighestRankWithCapacity(near_peak ? peak : need);
    r = UpperRank(ctx, slo, r < 0 ? fastest_rank_ : r);
  }
  // The backlog: the queued queries must all be served within the head's
  // slack by the workers at this subnet's batch (the rate says nothing about
  // a queue that has already formed). The highest rank <= r that clears it,
  // by bisection (clearing time grows with accuracy on a Pareto profile).
  CollectBusyOffsets(ctx, workers);
  auto clears = [&](int rank, int64_t pending) {
    return Clears(ctx, view, workers, rank, pending);
  };
  // A burst: the rate over rate_window can exceed a capacity that the queue
  // absorbs (the envelope's fixed subnet rides bursts out in its queue,
  // where stepping down on every 100-ms peak costs accuracy). One step up
  // the frontier is taken if the queue, plus what that rank's shortfall
  // against the rate adds over burst_horizon, still passes the backlog
  // check; if the burst goes on, the next decisions' queue says so. Not near
  // the peak (see peak_band), and one step only: more let a steady load sit
  // above the chosen rank's capacity, its queue growing until the backlog
  // check steps down past the rate's choice (docs/scheduling-ratefit-history.md).
  if (!near_peak && options_.burst_horizon > 0) {
    const auto up = std::upper_bound(frontier_.begin(), frontier_.end(), r);
    if (up != frontier_.end()) {
      const double shortfall = std::max(0.0, need - capacity_[*up]) *
                               static_cast<double>(workers) * ToSeconds(options_.burst_horizon);
      if (clears(*up, view.pending + static_cast<int64_t>(std::ceil(shortfall)))) r = *up;
    }
  }
  if (!clears(r, view.pending)) {
    // Bisection over the frontier below r (frontier_ is ascending in rank).
    int lo = -1;
    int hi = static_cast<int>(std::lower_bound(frontier_.begin(), frontier_.end(), r) -
                              frontier_.begin());  // frontier_[hi] >= r does not clear
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      (clears(frontier_[mid], view.pending) ? lo : hi) = mid;
    }
    // No rank on the frontier clears it: the highest throughput, on a
    // common footing (the frontier is built from the estimates).
    r = lo >= 0 ? frontier_[lo] : fastest_rank_;
  }
  int b = BatchFor(r, view.slack);
  if (b >= 0) {
    if (view.pending < table_.batch_size(b)) {
      const Nanos start = PacedStart(ctx, view, given.slack, workers, r, b);
      if (start > ctx.now) {
        Choice wait;
        wait.wake_at = start;
        return wait;
      }
      b = std::min(b, table_.BatchIndexFor(view.pending));
    }
    return Choice{r, b};
  }
  // That subnet cannot meet the head's deadline: the most accurate subnet
  // that fits at the queued batch, else MaxBatch's rule.
  const int queued_bi = table_.BatchIndexFor(std::min<int64_t>(view.pending, table_.max_batch()));
  const int fit = table_.HighestRankWithin(queued_bi, view.slack);
  if (fit >= 0) return Choice{fit, queued_bi};
  b = table_.LargestBatchWithin(fastest_rank_, view.slack);
  if (b < 0) b = table_.LargestBatchWithin(0, view.slack);
  if (b < 0) b = 0;
  const int rank = table_.HighestRankWithin(b, view.slack);
  return Choice{rank < 0 ? fastest_rank_ : rank, b};
}

}  // namespace superserve
