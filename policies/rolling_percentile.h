#ifndef SUPERSERVE_POLICIES_ROLLING_PERCENTILE_H_
#define SUPERSERVE_POLICIES_ROLLING_PERCENTILE_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/time.h"

namespace superserve {

// A high percentile over the last `window` samples (Clockwork-style latency
// correction: a rolling p99 reacts to drift within one window yet ignores a
// single outlier once it scrolls out). The window is also kept sorted, so Add
// is O(log window) compares plus one O(window) memmove to erase the sample
// leaving and insert the new one (no copy, no selection): samples arrive once
// per completed batch, while the value is read on every scheduling decision,
// which must stay O(1).
class RollingPercentile {
 public:
  // `stride`: recompute the percentile every stride-th sample once the
  // window is full (a cheaper, slightly lagging value for busy streams).
  RollingPercentile(size_t window, double quantile, size_t stride = 1)
      : window_(window == 0 ? 1 : window), quantile_(quantile), stride_(stride == 0 ? 1 : stride) {
    samples_.reserve(window_);
    sorted_.reserve(window_);
  }

  void Add(Nanos v) {
    if (samples_.size() < window_) {
      samples_.push_back(v);
    } else {
      sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), samples_[next_]));
      samples_[next_] = v;
    }
    sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), v), v);
    next_ = (next_ + 1) % window_;
    if (samples_.size() == window_ && ++since_ < stride_) return;
    since_ = 0;
    size_t k = static_cast<size_t>(quantile_ * static_cast<double>(sorted_.size() - 1) + 0.5);
    value_ = sorted_[k];
  }
  size_t count() const { return samples_.size(); }
  // The percentile of the samples in the window; 0 when empty.
  Nanos value() const { return value_; }
  // Any other quantile of the window, read on demand (O(1)); 0 when empty.
  Nanos Quantile(double q) const {
    if (sorted_.empty()) return 0;
    const double k = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted_.size() - 1) + 0.5;
    return sorted_[static_cast<size_t>(k)];
  }

 private:
  size_t window_;
  double quantile_;
  size_t stride_;
  size_t since_ = 0;
  size_t next_ = 0;
  Nanos value_ = 0;
  std::vector<Nanos> samples_;
  std::vector<Nanos> sorted_;  // the same samples, ascending
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_ROLLING_PERCENTILE_H_
