#ifndef SUPERSERVE_BENCH_BASELINES_LATENCY_BUCKETS_H_
#define SUPERSERVE_BENCH_BASELINES_LATENCY_BUCKETS_H_

#include <cstdint>
#include <vector>

#include "common/time.h"
#include "policies/latency_table.h"

namespace superserve {

// SlackFit's offline structure (SuperServe §4.2, DESIGN.md): every
// (subnet, batch) tuple falls into one of K evenly sized buckets over
// [min latency, max latency]; each bucket keeps the tuple with the largest
// batch, ties to the highest throughput (the fastest tuple at that batch,
// SuperServe §4.2: "maximum batch size to opt for a high throughput choice")
// or, with Ties::kAccuracy, to the highest accuracy (DESIGN.md's first
// resolution). Lookup by slack is O(1): the bucket whose upper bound is the
// largest one <= slack.
class LatencyBuckets {
 public:
  struct Tuple {
    int rank = -1;  // accuracy rank in the LatencyTable; -1 = none
    int batch_index = -1;
  };

  enum class Ties { kThroughput, kAccuracy };

  LatencyBuckets(const LatencyTable& table, int num_buckets, Ties ties = Ties::kThroughput) {
    Build(table, num_buckets, ties);
  }
  void Build(const LatencyTable& table, int num_buckets, Ties ties = Ties::kThroughput);

  // The chosen tuple for this slack, or rank -1 when no bucket's upper bound
  // fits (slack < min latency + one bucket width).
  Tuple Lookup(Nanos slack) const {
    if (slack < lower_ + width_) return Tuple();
    int64_t k = (slack - lower_) / width_ - 1;
    if (k >= num_buckets_) k = num_buckets_ - 1;
    return best_at_or_below_[k];
  }

  int num_buckets() const { return num_buckets_; }
  Nanos width() const { return width_; }
  Nanos upper_bound(int k) const { return lower_ + (k + 1) * width_; }
  // The bucket's own best tuple (rank -1 when the bucket is empty).
  Tuple bucket_best(int k) const { return bucket_best_[k]; }

 private:
  int num_buckets_ = 1;
  Nanos lower_ = 0;
  Nanos width_ = 1;
  std::vector<Tuple> bucket_best_;
  // Empty buckets answer with the best of the nearest non-empty bucket below.
  std::vector<Tuple> best_at_or_below_;
};

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_BASELINES_LATENCY_BUCKETS_H_
