#include "bench/baselines/latency_buckets.h"

#include <algorithm>

namespace superserve {

void LatencyBuckets::Build(const LatencyTable& table, int num_buckets, Ties ties) {
  num_buckets_ = std::max(1, num_buckets);
  lower_ = table.min_latency();
  // Ceiling division; the slowest tuple is clamped into the last bucket.
  const Nanos span = table.max_latency() - lower_;
  width_ = std::max<Nanos>(1, (span + num_buckets_ - 1) / num_buckets_);
  bucket_best_.assign(num_buckets_, Tuple());
  for (int r = 0; r < table.num_subnets(); ++r) {
    for (int b = 0; b < table.num_batches(); ++b) {
      int k = static_cast<int>((table.latency(r, b) - lower_) / width_);
      k = std::min(k, num_buckets_ - 1);
      Tuple& best = bucket_best_[k];
      // Largest batch; ties to the fastest tuple (then the higher accuracy)
      // or to the highest accuracy (the higher rank).
      bool better = best.rank < 0 || b > best.batch_index;
      if (!better && b == best.batch_index) {
        const Nanos l = table.latency(r, b), lb = table.latency(best.rank, b);
        better = ties == Ties::kThroughput ? (l < lb || (l == lb && r > best.rank)) : r > best.rank;
      }
      if (better) best = Tuple{r, b};
    }
  }
  best_at_or_below_.assign(num_buckets_, Tuple());
  Tuple carry;
  for (int k = 0; k < num_buckets_; ++k) {
    if (bucket_best_[k].rank >= 0) carry = bucket_best_[k];
    best_at_or_below_[k] = carry;
  }
}

}  // namespace superserve
