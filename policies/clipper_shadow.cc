#include "policies/clipper_shadow.h"

#include <algorithm>
#include <functional>

namespace superserve {

ClipperShadow::ClipperShadow(const LatencyTable* table, int rank, int workers, Nanos now)
    : table_(table), rank_(rank), free_at_(std::max(1, workers), now), held_since_(now) {}

void ClipperShadow::set_workers(int workers, Nanos now) {
  workers = std::max(1, workers);
  if (workers == static_cast<int>(free_at_.size())) return;
  std::sort(free_at_.begin(), free_at_.end());
  free_at_.resize(workers, now);
  std::make_heap(free_at_.begin(), free_at_.end(), std::greater<Nanos>());
}

void ClipperShadow::Dispatch(Nanos start, Nanos overhead) {
  // The fixed-subnet policy's rule (policies/greedy_policies.cc): drop the
  // heads no tuple can save, then the largest batch of this subnet that fits
  // the head's slack, cut to what is queued.
  while (!deadlines_.empty() && deadlines_.front() < start + overhead + table_->min_latency()) {
    deadlines_.pop_front();
    held_since_ = std::max(held_since_, start);
  }
  std::pop_heap(free_at_.begin(), free_at_.end(), std::greater<Nanos>());
  if (deadlines_.empty()) {
    free_at_.back() = start;
    std::push_heap(free_at_.begin(), free_at_.end(), std::greater<Nanos>());
    return;
  }
  const Nanos head = deadlines_.front();
  int bi = table_->LargestBatchWithin(rank_, head - start - overhead);
  if (bi < 0) bi = 0;
  const int64_t pending = static_cast<int64_t>(deadlines_.size());
  if (pending < table_->batch_size(bi)) bi = std::min(bi, table_->BatchIndexFor(pending));
  const Nanos done = start + overhead + table_->latency(rank_, bi);
  if (done > head) {
    held_since_ = std::max(held_since_, start);
  }
  const int64_t take = std::min<int64_t>(pending, table_->batch_size(bi));
  deadlines_.erase(deadlines_.begin(), deadlines_.begin() + take);
  free_at_.back() = done;
  std::push_heap(free_at_.begin(), free_at_.end(), std::greater<Nanos>());
}

void ClipperShadow::Advance(Nanos now, Nanos overhead) {
  // Invariant between calls: the queue is empty or every worker is busy, so
  // a worker that frees up starts the next batch at once.
  while (!deadlines_.empty() && free_at_.front() <= now) Dispatch(free_at_.front(), overhead);
}

void ClipperShadow::Arrive(Nanos now, Nanos deadline, Nanos overhead) {
  Advance(now, overhead);
  deadlines_.push_back(deadline);
  if (free_at_.front() <= now) Dispatch(now, overhead);
}

}  // namespace superserve
