#include "policies/latency_table.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace superserve {

LatencyTable::LatencyTable(const ModelProfile& profile, Options options) : options_(options) {
  num_subnets_ = static_cast<int>(profile.subnets.size());
  batch_sizes_ = profile.batch_sizes;
  batch_index_for_.assign(static_cast<size_t>(max_batch()) + 1, 0);
  for (int64_t n = 1, bi = 0; n <= max_batch(); ++n) {
    while (batch_sizes_[bi] < n) ++bi;
    batch_index_for_[n] = static_cast<int32_t>(bi);
  }
  subnet_index_.resize(num_subnets_);
  std::iota(subnet_index_.begin(), subnet_index_.end(), 0);
  // Ascending accuracy; ties by profiled latency at batch 1, then by index,
  // so that the order (and every decision) is deterministic.
  std::stable_sort(subnet_index_.begin(), subnet_index_.end(), [&](int a, int b) {
    const auto& x = profile.subnets[a];
    const auto& y = profile.subnets[b];
    if (x.accuracy != y.accuracy) return x.accuracy < y.accuracy;
    return x.latency[0] > y.latency[0];
  });
  rank_of_subnet_.resize(num_subnets_);
  const size_t nb = batch_sizes_.size();
  accuracy_.resize(num_subnets_);
  profiled_.resize(num_subnets_ * nb);
  for (int r = 0; r < num_subnets_; ++r) {
    const auto& s = profile.subnets[subnet_index_[r]];
    rank_of_subnet_[subnet_index_[r]] = r;
    accuracy_[r] = s.accuracy;
    for (size_t b = 0; b < nb; ++b) profiled_[r * nb + b] = s.latency[b];
  }
  Forget();
}

void LatencyTable::Forget() {
  estimate_.resize(profiled_.size());
  for (size_t i = 0; i < estimate_.size(); ++i) {
    estimate_[i] =
        static_cast<Nanos>(static_cast<double>(profiled_[i]) * (1.0 + options_.unmeasured_margin));
  }
  measured_.assign(estimate_.size(), RollingPercentile(options_.window, options_.quantile));
  is_measured_.assign(estimate_.size(), 0);
  std::vector<double>().swap(startup_ratios_);
  std::vector<double>().swap(startup_sorted_);
  startup_next_ = 0;
  startup_drift_ = 0;
  drift_tuples_ = 0;
  unmeasured_scale_ = 1.0 + options_.unmeasured_margin;
  comparable_scale_ = 0;
  RebuildDerived();  // moves version()
}

double LatencyTable::UnmeasuredScale() {
  ratio_scratch_.clear();
  const size_t early = std::min(options_.drift_min_samples, options_.min_samples);
  for (size_t i = 0; i < estimate_.size(); ++i) {
    if (is_measured_[i]) {
      ratio_scratch_.push_back(static_cast<double>(estimate_[i]) /
                               static_cast<double>(profiled_[i]));
    } else if (measured_[i].count() >= early) {
      ratio_scratch_.push_back(static_cast<double>(measured_[i].value()) /
                               static_cast<double>(profiled_[i]));
    }
  }
  double drift = 0;
  if (!ratio_scratch_.empty() &&
      ratio_scratch_.size() >= std::min(options_.drift_min_tuples, estimate_.size())) {
    // The lower median: with two measured tuples one stalled tuple cannot
    // set the drift alone.
    auto mid = ratio_scratch_.begin() + (ratio_scratch_.size() - 1) / 2;
    std::nth_element(ratio_scratch_.begin(), mid, ratio_scratch_.end());
    drift = *mid;
  } else if (startup_drift_ > 0) {
    drift = startup_drift_;
  }
  if (drift > 0) comparable_scale_ = drift;
  return ScaleForDrift(drift);
}

double LatencyTable::ScaleForDrift(double drift) const {
  if (drift <= 0) return 0;
  // Within the deadband the profile stands (its own margin included).
  const bool drifted = drift >= options_.drift_deadband || drift <= 1.0 / options_.drift_deadband;
  return drifted ? drift : 1.0 + options_.unmeasured_margin;
}

void LatencyTable::RebuildDerived() {
  const size_t nb = batch_sizes_.size();
  if (options_.unmeasured_follow_drift) {
    const double scale = UnmeasuredScale();
    if (scale > 0) {
      unmeasured_scale_ = scale;
      for (size_t i = 0; i < estimate_.size(); ++i) {
        if (!is_measured_[i]) {
          estimate_[i] = static_cast<Nanos>(static_cast<double>(profiled_[i]) * scale);
        }
      }
    }
  }
  // The noise's shape, median / p99, from the tuples whose p99 the
  // comparable footing stands on (UnmeasuredScale's).
  ratio_scratch_.clear();
  const size_t early = std::min(options_.drift_min_samples, options_.min_samples);
  for (size_t i = 0; i < measured_.size(); ++i) {
    if (measured_[i].count() >= early && measured_[i].value() > 0) {
      ratio_scratch_.push_back(static_cast<double>(measured_[i].Quantile(0.5)) /
                               static_cast<double>(measured_[i].value()));
    }
  }
  typical_ratio_ = 1;
  if (!ratio_scratch_.empty() &&
      ratio_scratch_.size() >= std::min(options_.drift_min_tuples, measured_.size())) {
    auto mid = ratio_scratch_.begin() + (ratio_scratch_.size() - 1) / 2;
    std::nth_element(ratio_scratch_.begin(), mid, ratio_scratch_.end());
    typical_ratio_ = *mid;
  }
  min_latency_ = *std::min_element(estimate_.begin(), estimate_.end());
  max_latency_ = *std::max_element(estimate_.begin(), estimate_.end());
  suffix_min_.assign(nb * num_subnets_, 0);
  for (size_t b = 0; b < nb; ++b) {
    Nanos m = INT64_MAX;
    for (int r = num_subnets_ - 1; r >= 0; --r) {
      m = std::min(m, estimate_[r * nb + b]);
      suffix_min_[b * num_subnets_ + r] = m;
    }
  }
  batch_suffix_min_.resize(estimate_.size());
  for (size_t r = 0; r < static_cast<size_t>(num_subnets_); ++r) {
    Nanos m = INT64_MAX;
    for (size_t b = nb; b-- > 0;) {
      m = std::min(m, estimate_[r * nb + b]);
      batch_suffix_min_[r * nb + b] = m;
    }
  }
  ++version_;
}

namespace {

// The last index of a suffix minimum sm[0..n) (non-decreasing) with sm <=
// budget, or -1. At that index the row's own latency equals sm: the next
// index does not fit, so the minimum there is the entry itself.
int LastWithin(const Nanos* sm, int n, Nanos budget) {
  if (n <= 0 || sm[0] > budget) return -1;
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (sm[mid] <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

int LatencyTable::HighestRankWithin(int batch_index, Nanos budget) const {
  return LastWithin(&suffix_min_[static_cast<size_t>(batch_index) * num_subnets_], num_subnets_,
                    budget);
}

int LatencyTable::LargestBatchWithin(int rank, Nanos budget) const {
  return LastWithin(&batch_suffix_min_[static_cast<size_t>(rank) * batch_sizes_.size()],
                    num_batches(), budget);
}

bool LatencyTable::Record(int subnet_index, int batch_index, Nanos measured) {
  if (subnet_index < 0 || subnet_index >= num_subnets_ || batch_index < 0 ||
      batch_index >= num_batches()) {
    return false;
  }
  const size_t cell = static_cast<size_t>(rank_of_subnet_[subnet_index]) * batch_sizes_.size() +
                      batch_index;
  RollingPercentile& m = measured_[cell];
  const size_t before = m.count();
  m.Add(measured);
  bool changed = false;
  if (options_.unmeasured_follow_drift) {
    // A tuple joins the drift median once, at drift_min_samples samples;
    // later drift refreshes read its current p99.
    const size_t early = std::min(options_.drift_min_samples, options_.min_samples);
    const bool joins = before < early && m.count() >= early;
    if (joins) ++drift_tuples_;
    if (drift_tuples_ >= std::min(options_.drift_min_tuples, estimate_.size())) {
      if (!startup_ratios_.empty()) {  // the start-up drift has done its job
        std::vector<double>().swap(startup_ratios_);
        std::vector<double>().swap(startup_sorted_);
        startup_drift_ = 0;
      }
      if (joins && m.count() < options_.min_samples) {
        RebuildDerived();
        changed = true;
      }
    } else if (options_.startup_drift && profiled_[cell] > 0) {
      changed = RecordStartupRatio(static_cast<double>(measured) /
                                   static_cast<double>(profiled_[cell]));
    }
  }
  if (m.count() < options_.min_samples) return changed;
  // The first time a tuple has enough samples it always takes its measured
  // value (and joins the drift median); afterwards only moves > the
  // threshold count.
  const bool first = !is_measured_[cell];
  is_measured_[cell] = 1;
  const double moved = static_cast<double>(m.value() - estimate_[cell]);
  if (!first &&
      std::abs(moved) <= options_.min_relative_change * static_cast<double>(estimate_[cell])) {
    return changed;
  }
  estimate_[cell] = m.value();
  RebuildDerived();
  return true;
}

bool LatencyTable::RecordStartupRatio(double ratio) {
  const size_t window = std::max<size_t>(options_.window, 1);
  if (startup_ratios_.size() < window) {
    startup_ratios_.push_back(ratio);
  } else {
    startup_sorted_.erase(std::lower_bound(startup_sorted_.begin(), startup_sorted_.end(),
                                           startup_ratios_[startup_next_]));
    startup_ratios_[startup_next_] = ratio;
  }
  startup_sorted_.insert(std::upper_bound(startup_sorted_.begin(), startup_sorted_.end(), ratio),
                         ratio);
  startup_next_ = (startup_next_ + 1) % window;
  if (startup_ratios_.size() < std::max<size_t>(options_.drift_min_samples, 1)) return false;
  startup_drift_ = startup_sorted_[(startup_sorted_.size() - 1) / 2];  // the lower median
  // Fewer than drift_min_tuples tuples qualify (the caller's condition), so
  // UnmeasuredScale would take the start-up drift: skip its O(tuples) scan.
  // Rebuild (O(subnets x batches)) only when the applied scale moves.
  comparable_scale_ = startup_drift_;
  const double scale = ScaleForDrift(startup_drift_);
  if (scale <= 0 ||
      std::abs(scale - unmeasured_scale_) <= options_.min_relative_change * unmeasured_scale_) {
    return false;
  }
  RebuildDerived();
  return true;
}

}  // namespace superserve
