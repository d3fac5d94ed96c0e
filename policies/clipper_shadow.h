#ifndef SUPERSERVE_POLICIES_CLIPPER_SHADOW_H_
#define SUPERSERVE_POLICIES_CLIPPER_SHADOW_H_

#include <deque>
#include <vector>

#include "common/time.h"
#include "policies/latency_table.h"

namespace superserve {

// A shadow run of Clipper+ (one fixed subnet, adaptive batching: the largest
// batch that fits the head's slack, cut to what is queued) on virtual
// workers, fed the real arrivals and deadlines with the latency table's
// estimates. It answers "would this fixed subnet have met every deadline of
// the recent past?" without running it. Queries are kept in arrival order
// (EDF when every query has the same SLO, the common case); each arrival is
// queued and dispatched once, so the work is amortised O(log W) per arrival.
class ClipperShadow {
 public:
  // `rank`: accuracy rank in `table` (which must outlive the shadow).
  ClipperShadow(const LatencyTable* table, int rank, int workers, Nanos now);

  int rank() const { return rank_; }
  // Feeds one arrival at `now` due at `deadline`; batches start when a
  // virtual worker is free and take `overhead` more than their latency.
  void Arrive(Nanos now, Nanos deadline, Nanos overhead);
  // Runs the batches due up to `now` (arrivals do it too).
  void Advance(Nanos now, Nanos overhead);
  // When this shadow last missed a deadline (dropped or late), or when it was
  // started, whichever is later: it has held since then.
  Nanos held_since() const { return held_since_; }
  // Live workers changed: added ones are free at `now`, removed ones are the
  // last to free up.
  void set_workers(int workers, Nanos now);
  int workers() const { return static_cast<int>(free_at_.size()); }
  size_t queued() const { return deadlines_.size(); }

 private:
  void Dispatch(Nanos start, Nanos overhead);

  const LatencyTable* table_;
  int rank_;
  std::deque<Nanos> deadlines_;
  std::vector<Nanos> free_at_;  // min-heap of the virtual workers' free times
  Nanos held_since_;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_CLIPPER_SHADOW_H_
