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
  // Queries per second over the shorter window (now - window, now], window
  // <= the constructed one: O(log n) by bisection of the kept arrivals.
  double Rate(Nanos now, Nanos window) {
    Expire(now);
    if (first_ < 0) return 0;
    window = std::min(window, window_);
    size_t lo = 0, hi = count_;  // first kept arrival after now - window
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (ring_[(head_ + mid) % ring_.size()] <= now - window) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    Nanos span = std::min(window, now - first_);
    if (span <= 0) span = window;
    return static_cast<double>(count_ - lo) * kNanosPerSecond / static_cast<double>(span);
  }
  Nanos window() const { return window_; }
  // A longer window from now on; the arrivals kept so far stay.
  void Widen(Nanos window) { window_ = std::max(window_, window); }

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
