#ifndef SUPERSERVE_POLICIES_SLO_FIRST_POLICY_H_
#define SUPERSERVE_POLICIES_SLO_FIRST_POLICY_H_

#include <cstdint>
#include <vector>

#include "common/model_profile.h"
#include "common/time.h"
#include "policies/arrival_rate.h"
#include "policies/profiled_policy.h"

namespace superserve {

// The options a user may turn (docs/scheduling.md explains each in the
// user's terms). Every other number in the policy is a named constant.
struct SloFirstOptions {
  ProfiledPolicyOptions base;
  // A subnet serves only while its capacity (the load it carries with
  // about one query in a thousand waiting past its deadline, for arrivals
  // as bursty as measured) is at least this multiple of the measured load.
  // Above 1 keeps capacity spare (fewer late answers, less accuracy);
  // below 1 trades deadlines for accuracy.
  double headroom = 1.0;
  // How far back the load is measured, in multiples of the SLO. Shorter
  // follows a burst sooner but reads noise as load.
  double rate_window_slos = 8;
  // Deferred batching (Symphony): a batch that is not full waits until one
  // more query would no longer fit its deadline, on the lowest-id free
  // worker. Larger batches, more goodput near the peak, idle workers stay
  // idle. false: dispatch at once (lower latency, smaller batches).
  bool defer = true;
};

// The default policy: SLO first, accuracy second.
//
// Each time a worker is free:
//  1. Drop the heads that no subnet can serve in time, and, past the peak,
//     the heads that only a batch smaller than the load needs could serve
//     (Symphony's sliding window: serving them shrinks every batch behind
//     them, EDF's overload spiral) where the larger batch makes up for the
//     dropped head within its own run, or, in a backlog, serves any more.
//  2. Subnet: the most accurate one whose capacity (queries/s over all
//     workers at its most efficient batch among those the load fills while
//     their first query can wait, at the utilisation where about
//     one query in a thousand would wait past its deadline, for arrivals
//     as bursty as their counts per SLO have been) covers
//     headroom x the load measured over the rate window, or x the queued
//     queries per SLO if more (they arrived within one SLO: a burst shows
//     at once); none does: the fastest. Then step towards faster subnets until the queries
//     already queued can all be served before the head's deadline.
//  3. Batch: the queries that fit the head's deadline on that subnet, up to
//     its most efficient batch; at once if the queue fills it or if batches
//     of what is queued carry the load, else when one more query would no
//     longer fit (Symphony's deferred batching).
// Subnets are compared, and batches fitted to deadlines, on one footing
// (LatencyTable::ComparableLatency; FitLatency): the profiled mean of a
// tuple not run yet is not weighed against the measured p99 of one in use.
// Deterministic; O(log S + B log b) per decision (b: the largest batch),
// O(B) more per step of 2, once the capacities are built (O(S x B),
// rebuilt when the SLO, the fleet, a latency estimate or the arrivals'
// dispersion moves, or the load crosses a threshold that changes them).
class SloFirstPolicy : public ProfiledPolicy {
 public:
  SloFirstPolicy(const ModelProfile& profile, SloFirstOptions options);
  explicit SloFirstPolicy(const ModelProfile& profile)
      : SloFirstPolicy(profile, SloFirstOptions()) {}

  Decision Decide(const SchedulingContext& ctx) override;
  Nanos Urgency(const EdfQueue& queue, Nanos now) const override;
  void OnArrival(const Query& q, Nanos now) override;

  // How far back arrivals are kept (the widest rate window asked for,
  // bounded; tests).
  Nanos kept_arrival_window() const { return arrivals_.window(); }
  // How many times the capacities were built (their cost, O(subnets x
  // batch sizes), is paid only when what they depend on moves; tests).
  int64_t capacity_builds() const { return capacity_builds_; }
  // The accuracy rank the load alone would pick for queries of this `slo`
  // served by `workers` (tests).
  int RankForLoad(double rate, Nanos slo, int64_t workers);
  // The batch the load needs at the fastest rank (Symphony's target: the
  // largest b with l(b) x (1 + 1/n) <= slo, n = the workers the rate needs
  // at b), no larger than the smallest batch within kNearBestThroughput of
  // the best throughput, than the smallest batch with which the `workers`
  // carry the rate (Symphony's target alone ignores the fleet: with workers
  // to spare it dropped heads a smaller batch served in time at no cost to
  // the queries behind), or than `limit`. b counts queries, each run as
  // the smallest profiled size >= b, as Symphony's does: with sizes 1 and
  // 22, a load that fills 8 in time needs a window of 8, not 1 (each head
  // served alone while the queue behind it expires). Needs the capacities
  // for (slo, workers) built: Decide builds them, RankForLoad too (tests).
  int64_t TargetBatch(Nanos slo, double rate, int64_t workers, int64_t limit) const;

 protected:
  // The drop threshold: the fastest batch 1 by FitLatency.
  Nanos FastestLatency() const override;
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;

 private:
  // What a batch is checked against the head's slack with: the larger of
  // its estimate and LatencyTable::ComparableLatency (one footing with the
  // measured tuples). An unmeasured tuple's estimate is its profiled mean,
  // a measured one's a p99, so by estimates alone a batch size or subnet
  // not run yet fits a slack that the measured ones do not, and is then
  // late about half the time (after every switch of subnet, and on heads
  // the subnet in use could no longer serve).
  Nanos FitLatency(int rank, int batch_index) const;
  // Queries/s one of `workers` workers carries with (rank, batch_index) for
  // queries of this `slo` (see the .cc): at the batch's typical run time
  // (LatencyTable::TypicalLatency), with the wait its p99 leaves; 0 if the
  // batch leaves no room to wait, or if `load` does not fill it in time
  // (Fills).
  double TupleCapacity(int rank, int batch_index, Nanos slo, int64_t workers,
                       double load) const;
  // Whether `load` (queries/s) fills a batch of batch_index, `latency` long,
  // while its first query can still wait: b <= 1 + load x (slo - latency).
  // A batch that cannot fill runs part-full at its full latency, so its
  // throughput is not the load's to count on (measured profiles whose large
  // batches are efficient and small ones slow: a subnet chosen for its
  // batch of 20 ran batches of 3 that missed their deadlines).
  bool Fills(int batch_index, double latency, Nanos slo, double load) const;
  // The least load that fills it: (b - 1) / (slo - latency); 0 for a batch
  // of one, infinite where the batch leaves no time to wait.
  double FillThreshold(int batch_index, double latency, Nanos slo) const;
  // The batch index `rank` runs for a head with `slack` left: the one with
  // the most queries per second among those that fit; -1 if none fits.
  int EfficientBatch(int rank, Nanos slack) const;
  // Rebuilds capacity_ / frontier_ if the SLO, the workers or an estimate
  // moved, or if `load` crossed a fill threshold that changes a capacity or
  // the fastest (so such a load is seen at once, and no other load move
  // costs a rebuild).
  void RefreshCapacity(Nanos slo, int64_t workers, double load);
  // Rebuilds best_upto_ if an estimate moved (it depends on nothing else).
  void RefreshBestBatches();
  // The highest-throughput rank for this slo, fleet and load (see the .cc).
  int FastestRank(Nanos slo, int64_t workers, double load) const;
  // Sets [fills_from_, fills_until_) for a build at `load` (see the .cc).
  void SetLoadBounds(Nanos slo, int64_t workers, double load);
  // Whether `pending` queries, the head with `slack` left, are all served
  // in time at `rank` by `workers` workers, `free` of them free now.
  bool Clears(int rank, int64_t pending, Nanos slack, int64_t free, int64_t workers) const;
  // Whether dropping a head with `slack` left, `queued` queries queued, for
  // a batch of `window` at the fastest subnet pays even if the load ends
  // right after it: in the window batch's time it serves at least one query
  // (the dropped head) more than the batch that serves the head would at
  // that batch's rate. Else the head is served in the smaller batch (on a
  // CPU-shaped profile the window gained a few percent per batch and cost
  // every head it dropped in a burst the workers caught up with). In a
  // backlog (the `rate` above what the `workers` serve with window batches,
  // and a window batch queued behind the head for each of them) queries
  // are lost whatever is done, and fewer the more each second serves: the
  // drop pays where the window batch serves any more.
  bool WindowDropPays(int64_t window, Nanos slack, int64_t queued, double rate,
                      int64_t workers) const;
  // Queries a batch of `full` serves at `rank`, in its run time, beyond
  // what batches of `part` serve in the same time at their rate (FitLatency
  // plus overhead).
  double ExtraServed(int rank, int64_t full, int64_t part) const;

  SloFirstOptions options_;
  ArrivalRateEstimator arrivals_;
  // The arrivals' dispersion of counts per SLO (the capacity's v).
  CountDispersion burstiness_;
  double dispersion_at_build_ = 1;
  // The build holds for loads in [fills_from_, fills_until_): the nearest
  // fill thresholds at and above its load that change what was built.
  double fills_from_ = 0;
  double fills_until_ = 0;
  // Capacities for (slo_, workers_, table version).
  Nanos slo_ = -1;
  int64_t workers_ = 0;
  uint64_t table_version_ = 0;
  Nanos overhead_at_build_ = -1;
  std::vector<double> capacity_;  // per rank: queries/s per worker
  std::vector<int> frontier_;     // ranks faster than every more accurate one, ascending
  // [rank][batch index]: the batch index <= it with the most queries per
  // second (latency plus overhead): past a saturation knee a larger batch
  // serves fewer.
  std::vector<int> best_upto_;
  uint64_t best_version_ = 0;   // the table version and overhead best_upto_ is for
  Nanos best_overhead_ = -1;
  int fastest_ = 0;               // FastestRank for the build
  int64_t capacity_builds_ = 0;
  int last_rank_ = 0;             // the rank of the last dispatch (Urgency)
  // FastestLatency() for table_ version drop_version_ (-1: not computed).
  mutable Nanos drop_latency_ = -1;
  mutable uint64_t drop_version_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_SLO_FIRST_POLICY_H_
