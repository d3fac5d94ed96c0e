#ifndef SUPERSERVE_POLICIES_LATENCY_TABLE_H_
#define SUPERSERVE_POLICIES_LATENCY_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/model_profile.h"
#include "common/time.h"
#include "policies/rolling_percentile.h"

namespace superserve {

// The latency estimate of every (subnet, batch size) tuple of one model: the
// profiled latency until enough telemetry arrived for the tuple, then a
// rolling high percentile of its recent measured execution times (profiles
// drift: thermal state, co-located load, a different GPU). Subnets are
// addressed by *accuracy rank* (0 = least accurate) because every policy
// searches along accuracy; subnet_index(rank) maps back to the profile.
class LatencyTable {
 public:
  struct Options {
    size_t window = 64;        // measurements kept per tuple
    double quantile = 0.99;    // the "high percentile"
    size_t min_samples = 16;   // below this the profiled latency stands
    // The estimate moves only when the percentile moved by more than this
    // fraction: every move rebuilds derived tables (O(subnets x batches)).
    double min_relative_change = 0.02;
    // Until a tuple has min_samples measurements its estimate is the
    // profiled latency times (1 + this): a profile is a mean, the high
    // percentile it stands in for is larger.
    double unmeasured_margin = 0.0;
    // Tuples without min_samples measurements follow the drift the measured
    // ones show: their estimate is the profiled latency times the lower
    // median (estimate / profiled) ratio of the measured tuples, so that the
    // estimates a policy compares stand on one footing on a host slower (or
    // faster) than its profile (docs/decisions/unmeasured-follow-drift.md).
    // --follow_drift.
    bool unmeasured_follow_drift = true;
    // The drift applies once this many tuples are measured: the lower median
    // of two ignores one stalled tuple.
    size_t drift_min_tuples = 2;
    // A tuple joins the drift median after this many samples (before its own
    // estimate moves at min_samples).
    size_t drift_min_samples = 4;
    // Before drift_min_tuples tuples have drift_min_samples samples each,
    // the drift is the lower median of every batch's measured/profiled ratio
    // (the last `window` batches, once there are drift_min_samples of them),
    // whatever its tuple: traffic at start spreads over many tuples.
    bool startup_drift = true;
    // A drift within [1/this, this] leaves the profile standing: measured
    // p99s sit a few percent above a profiled mean by noise alone.
    double drift_deadband = 1.1;
  };

  LatencyTable(const ModelProfile& profile, Options options);
  explicit LatencyTable(const ModelProfile& profile) : LatencyTable(profile, Options()) {}

  int num_subnets() const { return num_subnets_; }
  int num_batches() const { return static_cast<int>(batch_sizes_.size()); }
  int32_t batch_size(int batch_index) const { return batch_sizes_[batch_index]; }
  int32_t max_batch() const { return batch_sizes_.back(); }
  // Smallest batch index whose size is >= n (n <= max_batch()): the profiled
  // size a batch of n runs at, padded (every listed size, not only powers of
  // two). O(1) through a table of max_batch() + 1 entries.
  int BatchIndexFor(int64_t n) const {
    return n <= 1 ? 0 : static_cast<int>(batch_index_for_[n]);
  }
  // The batch index whose size is exactly n, or -1 (n not a profiled size):
  // what a measured execution time is recorded under.
  int ExactBatchIndex(int64_t n) const {
    if (n < 1 || n > max_batch()) return -1;
    const int bi = BatchIndexFor(n);
    return batch_sizes_[bi] == n ? bi : -1;
  }
  int subnet_index(int rank) const { return subnet_index_[rank]; }
  int rank_of_subnet(int subnet_index) const { return rank_of_subnet_[subnet_index]; }
  double accuracy(int rank) const { return accuracy_[rank]; }

  Nanos latency(int rank, int batch_index) const {
    return estimate_[static_cast<size_t>(rank) * batch_sizes_.size() + batch_index];
  }
  // The latency of a tuple for comparing tuples' speeds: its profiled
  // latency times the measured tuples' drift (even inside the deadband),
  // unless its own measurement departs from that by more than the deadband.
  // The estimates mix rolling p99s of 64 samples (measured tuples) with
  // profiled means (unmeasured ones), so by them an unmeasured tuple looks
  // faster than a measured one of the same speed, and a p99's noise (a few
  // percent) exceeds the gap between neighbouring subnets; the profile
  // ranks those, a measurement only overrules it where it is no noise.
  Nanos ComparableLatency(int rank, int batch_index) const {
    const size_t i = static_cast<size_t>(rank) * batch_sizes_.size() + batch_index;
    const double predicted =
        static_cast<double>(profiled_[i]) * (comparable_scale_ > 0 ? comparable_scale_ : 1.0);
    if (is_measured_[i]) {
      const double ratio = static_cast<double>(estimate_[i]) / predicted;
      if (ratio >= options_.drift_deadband || ratio * options_.drift_deadband <= 1.0) {
        return estimate_[i];
      }
    }
    return static_cast<Nanos>(predicted);
  }
  // The latency of a tuple for its throughput (queries per second, how
  // much load it carries): ComparableLatency on the footing of a median, not
  // of a p99. A p99 sits above the typical run by the noise (about 7 % at a
  // CV of 0.03), and a capacity counted from it leaves that much of every
  // worker unused; the deadline fit stays on the p99.
  Nanos TypicalLatency(int rank, int batch_index) const {
    return static_cast<Nanos>(static_cast<double>(ComparableLatency(rank, batch_index)) *
                              typical_ratio_);
  }
  // Fastest tuple overall (the drop threshold of accuracy-adaptive policies).
  Nanos min_latency() const { return min_latency_; }
  Nanos max_latency() const { return max_latency_; }

  // Highest accuracy rank whose latency at batch_index is <= budget, or -1.
  // O(log S) through a suffix minimum, exact even where corrected latencies
  // are not monotonic in accuracy.
  int HighestRankWithin(int batch_index, Nanos budget) const;
  // Largest batch index whose latency for `rank` is <= budget, or -1.
  // O(log B) through a suffix minimum along the batch sizes, exact where
  // corrected latencies are not monotonic in batch size.
  int LargestBatchWithin(int rank, Nanos budget) const;

  // Feeds one measured execution time of (subnet_index, batch_index).
  // Returns true when estimates may have changed (version() moved): this
  // tuple's, or every unmeasured one's through the drift.
  bool Record(int subnet_index, int batch_index, Nanos measured);
  // Back to the profile: every measurement and the drift are dropped (the
  // estimates become what the constructor made; version() moves). For
  // estimates that can no longer be checked: see
  // ProfiledPolicyOptions::telemetry_expiry.
  void Forget();
  // Bumped whenever an estimate changes, so that derived structures (buckets)
  // know when to rebuild.
  uint64_t version() const { return version_; }

 private:
  void RebuildDerived();
  // What unmeasured tuples' profiled latencies are multiplied by now (the
  // drift outside the deadband, else 1 + unmeasured_margin); 0 when no
  // drift is known yet (they keep what they have).
  double UnmeasuredScale();
  // That scale for a known drift (> 0), or 0.
  double ScaleForDrift(double drift) const;
  // One batch's ratio into the start-up drift; true when it moved the
  // unmeasured estimates.
  bool RecordStartupRatio(double ratio);

  Options options_;
  int num_subnets_ = 0;
  std::vector<int32_t> batch_sizes_;
  // n -> smallest batch index >= n (int32: a profile may list up to
  // kMaxBatchSize sizes, any of them).
  std::vector<int32_t> batch_index_for_;
  std::vector<int> subnet_index_;
  std::vector<int> rank_of_subnet_;
  std::vector<double> accuracy_;
  std::vector<Nanos> profiled_;
  std::vector<Nanos> estimate_;
  std::vector<Nanos> suffix_min_;  // [batch][rank]: min latency over ranks >= rank
  std::vector<Nanos> batch_suffix_min_;  // [rank][batch]: min over batches >= batch
  std::vector<RollingPercentile> measured_;
  std::vector<uint8_t> is_measured_;
  std::vector<double> ratio_scratch_;
  // The start-up drift (Options::startup_drift): a ring of the last `window`
  // batch ratios, while fewer than drift_min_tuples tuples qualify.
  std::vector<double> startup_ratios_;
  std::vector<double> startup_sorted_;  // the same ratios, ascending
  size_t startup_next_ = 0;
  double startup_drift_ = 0;  // 0: not enough batches yet
  size_t drift_tuples_ = 0;   // tuples with drift_min_samples samples
  double unmeasured_scale_ = 1;  // what RebuildDerived last applied
  double comparable_scale_ = 0;  // the drift without the deadband; 0: none known
  // The lower median, over the tuples with drift_min_samples samples, of
  // their window's median / its p99 (TypicalLatency); 1 while fewer than
  // drift_min_tuples tuples have them.
  double typical_ratio_ = 1;
  Nanos min_latency_ = 0;
  Nanos max_latency_ = 0;
  uint64_t version_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_LATENCY_TABLE_H_
