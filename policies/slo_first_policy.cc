#include "policies/slo_first_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace superserve {
namespace {

// A deferred batch leaves this fraction of the SLO spare: dispatch jitter
// (timers, RPC) beyond the overhead estimate would otherwise make a batch
// sent at its last moment late. Symphony's scheduler plans with a high
// percentile of its network delay for the same reason.
constexpr double kFrontrunMargin = 0.02;
// ln(1000): capacities leave room for the queueing of all but about one
// query in a thousand (the 0.999 a user expects where a subnet can hold it).
constexpr double kTailNats = 6.9;
// The capacities are rebuilt (O(S x B)) when the arrivals' measured
// dispersion has moved by more than this fraction since they were built:
// rarely, and 10 % of v moves a capacity by a few percent at most.
constexpr double kDispersionStep = 0.1;
// Past the peak a batch within this fraction of the best throughput is as
// good as the best (the serving core's overload plan uses the same 95 %):
// a head such a batch can still serve is not dropped. On a CPU-shaped
// profile, where batching gains little, that is nearly every head.
constexpr double kNearBestThroughput = 0.95;
// Batches sent at once keep up while their throughput on every worker is
// at least 1/0.7 of the load; past that utilisation queues build and the
// batches should grow (deferral pays).
constexpr double kEagerUtilisation = 0.7;
// The load is measured over at most this long: the estimator keeps every
// arrival of its window, and a client's day-long deadline must not make it
// keep a day of arrivals.
constexpr Nanos kMaxRateWindow = Seconds(10);

// The load the subnet is chosen for: the measured rate, or the queued
// queries per SLO if more (they arrived within one SLO).
double LoadOf(double rate, int64_t queued, Nanos slo) {
  return std::max(rate,
                  static_cast<double>(queued) * kNanosPerSecond / static_cast<double>(slo));
}

int64_t FleetWorkers(const SchedulingContext& ctx) {
  return std::max<int64_t>(
      1, std::max<int64_t>(ctx.live_workers, static_cast<int64_t>(ctx.free_workers.size())));
}

}  // namespace

SloFirstPolicy::SloFirstPolicy(const ModelProfile& profile, SloFirstOptions options)
    : ProfiledPolicy("slo-first", profile, options.base),
      options_(options),
      arrivals_(Millis(100)) {}

void SloFirstPolicy::OnArrival(const Query& q, Nanos now) {
  // The window is in SLOs; the SLO is known from the queries.
  const auto window = std::min(
      kMaxRateWindow,
      static_cast<Nanos>(options_.rate_window_slos * static_cast<double>(q.deadline - q.arrival)));
  arrivals_.Widen(window);
  arrivals_.Add(now);
  // Counted per SLO: the bursts that make a query late are those that
  // pile up within about one SLO.
  burstiness_.Add(now, q.deadline - q.arrival);
}

void SloFirstPolicy::RefreshBestBatches() {
  const Nanos overhead = overhead_estimate();
  if (!best_upto_.empty() && table_.version() == best_version_ && overhead == best_overhead_) {
    return;
  }
  best_version_ = table_.version();
  best_overhead_ = overhead;
  const int s = table_.num_subnets();
  const int nb = table_.num_batches();
  best_upto_.assign(static_cast<size_t>(s) * nb, 0);
  for (int r = 0; r < s; ++r) {
    int* best = &best_upto_[static_cast<size_t>(r) * nb];
    double best_rate = 0;
    for (int bi = 0; bi < nb; ++bi) {
      const double rate = table_.batch_size(bi) * 1e9 /
                          static_cast<double>(table_.ComparableLatency(r, bi) + overhead);
      best[bi] = bi > 0 && rate <= best_rate ? best[bi - 1] : bi;
      best_rate = std::max(best_rate, rate);
    }
  }
}

int SloFirstPolicy::FastestRank(Nanos slo, int64_t workers, double load) const {
  // The most queries per second by a batch that workers taking turns can
  // deliver (a query waits up to l(b)/n for the next free worker, then runs
  // l(b): Symphony's staggered bound l(b)(1 + 1/n) <= SLO), which past the
  // peak answers the most queries in time; failing that, by a batch that
  // completes within the SLO; failing that, the subnet with the fastest
  // batch 1. Subnets and batches are compared on one footing
  // (LatencyTable::ComparableLatency): by the estimates the subnet in use
  // (a p99) looks slower than an unmeasured neighbour (a profiled mean) of
  // the same speed, so past the peak the fastest flipped to the neighbour,
  // whose p99 then made the first look faster again.
  const Nanos overhead = overhead_estimate();
  const int s = table_.num_subnets();
  const int nb = table_.num_batches();
  int fastest = 0;
  double fastest_rate = -1;
  for (const double stretch : {1 + 1 / static_cast<double>(workers), 1.0}) {
    for (int r = 0; r < s; ++r) {
      for (int bi = 0; bi < nb; ++bi) {
        const double l = static_cast<double>(table_.ComparableLatency(r, bi) + overhead);
        if (l * stretch > static_cast<double>(slo) || !Fills(bi, l, slo, load)) continue;
        const double rate = table_.batch_size(bi) * 1e9 / l;
        if (rate >= fastest_rate) {  // ties: accuracy
          fastest_rate = rate;
          fastest = r;
        }
      }
    }
    if (fastest_rate >= 0) return fastest;
  }
  for (int r = 1; r < s; ++r) {
    if (table_.ComparableLatency(r, 0) <= table_.ComparableLatency(fastest, 0)) fastest = r;
  }
  return fastest;
}

void SloFirstPolicy::RefreshCapacity(Nanos slo, int64_t workers, double load) {
  RefreshBestBatches();
  const Nanos overhead = overhead_estimate();
  // Arrivals are taken as at least as variable as Poisson: below 1 the
  // estimate's noise (about 18 % either side over its 64 intervals) would
  // trade deadlines for accuracy.
  const double dispersion = std::max(1.0, burstiness_.Dispersion());
  if (slo_ >= 0 && workers == workers_ && table_.version() == table_version_ &&
      overhead == overhead_at_build_ && std::llabs(slo - slo_) * 100 <= slo_ &&
      std::abs(dispersion - dispersion_at_build_) <= kDispersionStep * dispersion_at_build_ &&
      load >= fills_from_ && load < fills_until_) {
    return;
  }
  ++capacity_builds_;
  dispersion_at_build_ = dispersion;
  slo_ = slo;
  workers_ = workers;
  table_version_ = table_.version();
  overhead_at_build_ = overhead;
  const int s = table_.num_subnets();
  const int nb = table_.num_batches();
  capacity_.assign(s, 0.0);
  for (int r = 0; r < s; ++r) {
    for (int bi = 0; bi < nb; ++bi) {
      capacity_[r] = std::max(capacity_[r], TupleCapacity(r, bi, slo, workers, load));
    }
  }
  SetLoadBounds(slo, workers, load);
  fastest_ = FastestRank(slo, workers, load);
  // The frontier: the fastest, then every more accurate rank whose capacity
  // exceeds that of all ranks more accurate than it. Capacity falls along
  // it (after the fastest) as accuracy rises, even where measured profiles
  // are not monotone.
  frontier_.clear();
  double faster_than = 0;  // the highest capacity above the rank looked at
  std::vector<int> reversed;
  for (int r = s - 1; r > fastest_; --r) {
    if (capacity_[r] > faster_than) {
      reversed.push_back(r);
      faster_than = capacity_[r];
    }
  }
  frontier_.push_back(fastest_);
  frontier_.insert(frontier_.end(), reversed.rbegin(), reversed.rend());
}

void SloFirstPolicy::SetLoadBounds(Nanos slo, int64_t workers, double load) {
  // The load enters the build only through Fills, and a fill threshold
  // changes what was built only where the batch crossing it beats every
  // batch of its subnet (or, for the fastest, every batch of every subnet)
  // that fills at a lower load. Those thresholds alone bound the loads the
  // build stands for: a load jittering around a threshold that changes
  // nothing costs no rebuild.
  fills_from_ = 0;
  fills_until_ = std::numeric_limits<double>::infinity();
  const auto bound = [&](double threshold) {
    if (threshold <= load) {
      fills_from_ = std::max(fills_from_, threshold);
    } else {
      fills_until_ = std::min(fills_until_, threshold);
    }
  };
  const Nanos overhead = overhead_estimate();
  const double any_load = std::numeric_limits<double>::infinity();
  const int s = table_.num_subnets();
  const int nb = table_.num_batches();
  const auto latency = [&](int r, int bi) {
    return static_cast<double>(table_.ComparableLatency(r, bi) + overhead);
  };
  std::vector<std::pair<double, double>> steps;  // (fill threshold, capacity once filled)
  for (int r = 0; r < s; ++r) {
    steps.clear();
    for (int bi = 0; bi < nb; ++bi) {
      steps.emplace_back(FillThreshold(bi, latency(r, bi), slo),
                         TupleCapacity(r, bi, slo, workers, any_load));
    }
    std::sort(steps.begin(), steps.end());
    double best = 0;
    for (const auto& [threshold, capacity] : steps) {
      if (capacity > best) {
        best = capacity;
        bound(threshold);
      }
    }
  }
  // The fastest, for both of its latency bounds (FastestRank): the key
  // it is chosen by, (rate, rank, batch index), rises at these thresholds.
  struct Step {
    double threshold, rate;
    int r, bi;
  };
  std::vector<Step> fastest;
  for (const double stretch : {1 + 1 / static_cast<double>(workers), 1.0}) {
    fastest.clear();
    for (int r = 0; r < s; ++r) {
      for (int bi = 0; bi < nb; ++bi) {
        const double l = latency(r, bi);
        if (l * stretch > static_cast<double>(slo)) continue;
        fastest.push_back({FillThreshold(bi, l, slo), table_.batch_size(bi) * 1e9 / l, r, bi});
      }
    }
    std::sort(fastest.begin(), fastest.end(),
              [](const Step& a, const Step& b) { return a.threshold < b.threshold; });
    const Step* best = nullptr;
    for (const Step& step : fastest) {
      if (best == nullptr || std::tie(step.rate, step.r, step.bi) >
                                 std::tie(best->rate, best->r, best->bi)) {
        best = &step;
        bound(step.threshold);
      }
    }
  }
}

int SloFirstPolicy::RankForLoad(double rate, Nanos slo, int64_t workers) {
  RefreshCapacity(slo, workers, rate);
  const double need = options_.headroom * rate / static_cast<double>(workers);
  // Capacities fall along frontier_[1..]: the last position that still has
  // `need`; none has it: the fastest.
  int lo = 1, hi = static_cast<int>(frontier_.size()) - 1;
  if (hi < 1 || capacity_[frontier_[1]] < need) return fastest_;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (capacity_[frontier_[mid]] >= need) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return frontier_[lo];
}

double SloFirstPolicy::FillThreshold(int batch_index, double latency, Nanos slo) const {
  const double b = static_cast<double>(table_.batch_size(batch_index));
  if (b <= 1) return 0;
  const double wait = static_cast<double>(slo) - latency;
  if (wait <= 0) return std::numeric_limits<double>::infinity();
  return (b - 1) * kNanosPerSecond / wait;
}

bool SloFirstPolicy::Fills(int batch_index, double latency, Nanos slo, double load) const {
  return load >= FillThreshold(batch_index, latency, slo);
}

double SloFirstPolicy::TupleCapacity(int rank, int batch_index, Nanos slo, int64_t workers,
                                     double load) const {
  // The throughput of the batch, times the utilisation at which queries
  // rarely wait longer than the SLO leaves them. Queries arrive one at a
  // time and leave b at a time: n workers running batches of b in l(b)
  // drain the queue at one query per l(b) / (n b), and the heavy-traffic
  // tail of the wait is exp(-2 (1 - u) w n b / (l(b) v)), w = SLO - l(b),
  // v the arrivals' dispersion (1 for Poisson; measured, never below 1).
  // u is kept where that is <= e^-kTailNats. So one worker with little
  // slack and small batches runs well below its throughput, many workers or
  // large batches with ample slack close to it. A batch is not one
  // arrival: counting it as one asks b times the slack
  // (docs/decisions/slo-first-candidate.md).
  // The wait is what the batch's p99 leaves (ComparableLatency), the
  // throughput that of its typical run (TypicalLatency).
  const double fit =
      static_cast<double>(table_.ComparableLatency(rank, batch_index) + overhead_estimate());
  const double l =
      static_cast<double>(table_.TypicalLatency(rank, batch_index) + overhead_estimate());
  const double n = static_cast<double>(workers);
  const double wait = static_cast<double>(slo) - fit;
  if (wait <= 0 || !Fills(batch_index, fit, slo, load)) return 0;
  const double usable =
      1 - kTailNats * l * dispersion_at_build_ /
              (2 * n * static_cast<double>(table_.batch_size(batch_index)) * wait);
  return usable > 0 ? table_.batch_size(batch_index) * 1e9 / l * usable : 0;
}

int SloFirstPolicy::EfficientBatch(int rank, Nanos slack) const {
  int fit = -1;
  for (int bi = table_.num_batches() - 1; bi >= 0 && fit < 0; --bi) {
    if (FitLatency(rank, bi) <= slack) fit = bi;
  }
  if (fit < 0) return -1;
  const int best = best_upto_[static_cast<size_t>(rank) * table_.num_batches() + fit];
  // Estimates need not rise with batch size: the best below `fit` may not fit.
  return FitLatency(rank, best) <= slack ? best : fit;
}

bool SloFirstPolicy::Clears(int rank, int64_t pending, Nanos slack, int64_t free,
                            int64_t workers) const {
  const int fit = EfficientBatch(rank, slack);
  if (fit < 0) return false;
  const int64_t batches = (pending + table_.batch_size(fit) - 1) / table_.batch_size(fit);
  if (batches <= free) return true;
  // The free workers take a batch each now; the rest wait for the busy
  // workers, which free up within about one batch, and go round all workers.
  const int64_t rounds = 1 + (batches - free + workers - 1) / workers;
  return static_cast<double>(rounds) * static_cast<double>(FitLatency(rank, fit)) <=
         static_cast<double>(slack);
}

int64_t SloFirstPolicy::TargetBatch(Nanos slo, double rate, int64_t workers,
                                    int64_t limit) const {
  const Nanos overhead = overhead_estimate();
  const int nb = table_.num_batches();
  const int efficient = best_upto_[static_cast<size_t>(fastest_) * nb + nb - 1];
  const int64_t top = std::min<int64_t>(limit, table_.batch_size(efficient));
  if (top < 2) return 1;
  auto latency = [&](int bi) { return static_cast<double>(table_.latency(fastest_, bi) + overhead); };
  const double near_best = kNearBestThroughput * table_.batch_size(efficient) / latency(efficient);
  // Whether the window stops short of b queries, b - 1 of them run as batch
  // index `prev`, b as `bi`: b - 1 already nears the best throughput, or
  // the workers carry the load with it (a head it can serve costs the
  // queries behind it nothing); or b breaks Symphony's staggered bound
  // l(b)(1 + 1/n) <= SLO, n = the workers the rate needs at b.
  auto stops = [&](int64_t b, int prev, int bi) {
    const double l_prev = latency(prev);
    if (static_cast<double>(b - 1) / l_prev >= near_best) return true;
    if (static_cast<double>(workers) * static_cast<double>(b - 1) * kNanosPerSecond / l_prev >=
        rate) {
      return true;
    }
    const double l = latency(bi);
    const double n = rate * l / kNanosPerSecond / static_cast<double>(b);
    return n <= 0 || l * (1 + 1 / n) > static_cast<double>(slo);
  };
  // b counts queries, each run as the smallest profiled size >= b. Over
  // the counts run as one size, every test above is monotone in b (the
  // latency is fixed, b grows), so each stretch takes a binary search:
  // O(B log(largest batch)) per call, not a step per query.
  int64_t target = 1;
  for (int bi = table_.BatchIndexFor(2); bi < nb; ++bi) {
    const int64_t first = std::max<int64_t>(2, bi > 0 ? table_.batch_size(bi - 1) + 1 : 1);
    const int64_t last = std::min<int64_t>(top, table_.batch_size(bi));
    if (first > last) break;
    // first - 1 may run as the size below.
    if (stops(first, table_.BatchIndexFor(first - 1), bi)) return target;
    int64_t lo = first, hi = last + 1;  // lo does not stop; the first that does is in (lo, hi]
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (stops(mid, bi, bi) ? hi : lo) = mid;
    }
    target = lo;
    if (hi <= last) return target;
  }
  return target;
}

ProfiledPolicy::Choice SloFirstPolicy::Choose(const SchedulingContext& ctx,
                                              const QueueView& view) {
  // Infeasible heads first (dropped, then asked again), so that the batch is
  // planned from the true head.
  if (view.drop > 0) return Choice{};
  const Nanos slack = view.slack;
  const Query& head = ctx.queue.Head();
  const Nanos slo = head.deadline - head.arrival;
  const int64_t workers = FleetWorkers(ctx);
  const int64_t free = static_cast<int64_t>(ctx.free_workers.size());
  const double rate = arrivals_.Rate(
      ctx.now, static_cast<Nanos>(options_.rate_window_slos * static_cast<double>(slo)));
  // What is queued arrived within one SLO: the load is at least that much
  // per SLO, read at once where the rate window still averages a quiet
  // spell in.
  const double load = LoadOf(rate, view.pending, slo);
  int rank;
  if (ctx.assume_overload) {
    // The fastest alone, without rebuilding the capacities: the serving
    // core's overload probes ask with their own SLOs (a probe's slack), and
    // the next real decision would rebuild them back.
    RefreshBestBatches();
    rank = FastestRank(slo, workers, load);
  } else {
    RefreshCapacity(slo, workers, load);
    int pos = static_cast<int>(
        std::lower_bound(frontier_.begin(), frontier_.end(), RankForLoad(load, slo, workers)) -
        frontier_.begin());
    // SLO first: faster subnets until the queued queries are all served in time.
    while (pos > 0 && !Clears(frontier_[pos], view.pending, slack, free, workers)) --pos;
    rank = frontier_[pos];
  }
  int fit = EfficientBatch(rank, slack);
  // Not even batch 1 of it fits the head (a profile whose fastest batch 1
  // is not the highest-capacity subnet's): the most accurate subnet whose
  // batch 1 fits (FitLatency).
  if (fit < 0) {
    rank = -1;
    for (int r = table_.num_subnets() - 1; r >= 0 && rank < 0; --r) {
      if (FitLatency(r, 0) <= slack) rank = r;
    }
    if (rank < 0) return Choice{};
    fit = EfficientBatch(rank, slack);
  }
  const int64_t size = std::min<int64_t>(view.pending, table_.batch_size(fit));
  const int bi = table_.BatchIndexFor(size);
  // Deferring pays only where the load needs fuller batches than those
  // dispatching at once makes (the queries they hold, per their padded
  // batch's latency, on every worker, are below the rate); below that,
  // waiting only risks the deadline. And only where
  // the full batch serves, in its run time, at least one query more than
  // batches of what is queued would: where latency grows about linearly
  // with the batch (CPU-shaped) the worker's idle wait costs more than the
  // fuller batch gains.
  if (options_.defer && !ctx.assume_overload && size < table_.batch_size(fit) &&
      kEagerUtilisation * static_cast<double>(workers) * static_cast<double>(size) * 1e9 <
          options_.headroom * rate *
              static_cast<double>(table_.latency(rank, bi) + overhead_estimate()) &&
      ExtraServed(rank, table_.batch_size(fit), size) >= 1) {
    // Frontrun: once one more query would no longer fit the head's
    // deadline, waiting cannot grow the batch.
    const Nanos frontrun =
        ctx.now + slack - FitLatency(rank, table_.BatchIndexFor(size + 1)) -
        static_cast<Nanos>(kFrontrunMargin * static_cast<double>(slo));
    if (frontrun > ctx.now) {
      Choice wait;
      wait.wake_at = frontrun;
      return wait;
    }
  }
  return Choice{rank, bi};
}

Decision SloFirstPolicy::Decide(const SchedulingContext& ctx) {
  if (!ctx.assume_overload && !ctx.queue.empty() && !ctx.free_workers.empty()) {
    // Symphony's sliding window at the fastest subnet: a head that only a
    // batch smaller than the load needs could serve is dropped, where that
    // batch is worth the head (WindowDropPays).
    const Query& head = ctx.queue.Head();
    const Nanos slo = head.deadline - head.arrival;
    const double rate = arrivals_.Rate(
        ctx.now, static_cast<Nanos>(options_.rate_window_slos * static_cast<double>(slo)));
    const auto queued = static_cast<int64_t>(ctx.queue.size());
    RefreshCapacity(slo, FleetWorkers(ctx), LoadOf(rate, queued, slo));
    const int64_t window = TargetBatch(slo, rate, FleetWorkers(ctx), queued);
    if (window > 1) {
      const Nanos slack = head.deadline - ctx.now - overhead_estimate();
      if (slack < FitLatency(fastest_, table_.BatchIndexFor(window)) &&
          WindowDropPays(window, slack, queued, rate, FleetWorkers(ctx))) {
        return Decision::Idle(1);
      }
    }
  }
  Decision d = ProfiledPolicy::Decide(ctx);
  if (d.kind == Decision::Kind::kDispatch && !ctx.assume_overload) {
    last_rank_ = table_.rank_of_subnet(d.subnet_index);
  }
  return d;
}

double SloFirstPolicy::ExtraServed(int rank, int64_t full, int64_t part) const {
  const auto time = [&](int64_t n) {
    return static_cast<double>(FitLatency(rank, table_.BatchIndexFor(n)) + overhead_estimate());
  };
  return static_cast<double>(full) - static_cast<double>(part) * time(full) / time(part);
}

bool SloFirstPolicy::WindowDropPays(int64_t window, Nanos slack, int64_t queued, double rate,
                                    int64_t workers) const {
  const int fit = EfficientBatch(fastest_, slack);
  if (fit < 0) return true;  // nothing serves the head at the fastest subnet
  const int64_t served = std::min<int64_t>(table_.batch_size(fit), queued);
  const double extra = ExtraServed(fastest_, window, served);
  const double window_capacity =
      static_cast<double>(workers) * static_cast<double>(window) * kNanosPerSecond /
      static_cast<double>(FitLatency(fastest_, table_.BatchIndexFor(window)) + overhead_estimate());
  if (rate > window_capacity && queued - 1 >= workers * window) return extra > 0;  // backlog
  return extra >= 1;  // 1: the dropped head
}

Nanos SloFirstPolicy::FitLatency(int rank, int batch_index) const {
  return std::max(table_.latency(rank, batch_index), table_.ComparableLatency(rank, batch_index));
}

Nanos SloFirstPolicy::FastestLatency() const {
  if (drop_version_ != table_.version() || drop_latency_ < 0) {
    drop_version_ = table_.version();
    drop_latency_ = std::numeric_limits<Nanos>::max();
    for (int r = 0; r < table_.num_subnets(); ++r) {
      drop_latency_ = std::min(drop_latency_, FitLatency(r, 0));
    }
  }
  return drop_latency_;
}

Nanos SloFirstPolicy::Urgency(const EdfQueue& queue, Nanos now) const {
  const Query& head = queue.Head();
  const int64_t size = std::min<int64_t>(static_cast<int64_t>(queue.size()), table_.max_batch());
  return head.deadline - overhead_estimate() - FitLatency(last_rank_, table_.BatchIndexFor(size));
}

}  // namespace superserve
