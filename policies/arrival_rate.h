#ifndef SUPERSERVE_POLICIES_ARRIVAL_RATE_H_
#define SUPERSERVE_POLICIES_ARRIVAL_RATE_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/time.h"

namespace superserve {

// Arrival rate over a sliding time window: arrivals in (now - window, now]
// divided by the window (or by the time observed so far, early on). Arrival
// times are kept in a ring that grows to the peak number in one window, so
// Add and Rate are amortised O(1).
class ArrivalRateEstimator {
 public:
  explicit ArrivalRateEstimator(Nanos window) : window_(window), ring_(64) {}

  void Add(Nanos t) {
    if (count_ == ring_.size()) Grow();
    ring_[(head_ + count_) % ring_.size()] = t;
    ++count_;
    if (first_ < 0) first_ = t;
    Expire(t);
  }
  // Queries per second as of `now`.
  double Rate(Nanos now) {
    Expire(now);
    if (first_ < 0) return 0;
    Nanos span = std::min(window_, now - first_);
    if (span <= 0) span = window_;
    return static_cast<double>(count_) * kNanosPerSecond / static_cast<double>(span);
  }

 private:
  void Expire(Nanos now) {
    while (count_ > 0 && ring_[head_] <= now - window_) {
      head_ = (head_ + 1) % ring_.size();
      --count_;
    }
  }
  void Grow() {
    std::vector<Nanos> bigger(ring_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) % ring_.size()];
    ring_.swap(bigger);
    head_ = 0;
  }

  Nanos window_;
  std::vector<Nanos> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  Nanos first_ = -1;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_ARRIVAL_RATE_H_
