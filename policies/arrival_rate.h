#ifndef SUPERSERVE_POLICIES_ARRIVAL_RATE_H_
#define SUPERSERVE_POLICIES_ARRIVAL_RATE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
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

// How bursty arrivals are on one time scale: Var(N) / E(N), N the arrivals
// in consecutive intervals of a given length, with the variance read from
// neighbouring intervals' differences (E[(N_k - N_k-1)^2] / 2, Allan's), so
// that a rate that changes slowly (a ramp, which the rate window follows)
// does not read as burstiness; averaged over about the last
// kDispersionIntervals intervals (exponentially). 1 for Poisson at any
// length; for a renewal process it tends to ca^2, the interarrivals'
// squared coefficient of variation, and unlike ca^2 it also counts bursts
// that last longer than one gap (on/off traffic). O(1) per arrival; a
// silent gap of any length costs O(1).
class CountDispersion {
 public:
  // One arrival at `t` (non-decreasing), counted in intervals of `interval`;
  // a different interval starts the count over.
  void Add(Nanos t, Nanos interval) {
    if (interval <= 0) return;
    if (interval != interval_ || start_ < 0) {
      *this = CountDispersion();
      interval_ = interval;
      start_ = t;
    }
    if (t >= start_ + interval_) {
      const int64_t passed = (t - start_) / interval_;
      Close(static_cast<double>(count_), 1);
      Close(0, passed - 1);  // the empty intervals in between
      start_ += passed * interval_;
      count_ = 0;
    }
    ++count_;
  }
  // Var(N) / E(N) over the intervals closed so far; 1 (Poisson) until
  // kMinIntervals have closed.
  double Dispersion() const {
    if (closed_ < kMinIntervals || m1_ <= 0) return 1;
    return m2_ / m1_;
  }

 private:
  static constexpr double kDispersionIntervals = 64;
  static constexpr int64_t kMinIntervals = 8;
  // `k` intervals of `c` arrivals each.
  void Close(double c, int64_t k) {
    if (k <= 0) return;
    if (closed_ > 0) Weigh(c, (c - last_) * (c - last_) / 2, 1);
    Weigh(c, 0, k - (closed_ > 0 ? 1 : 0));
    last_ = c;
    closed_ += k;
  }
  // `k` intervals of `c` arrivals, each with squared difference / 2 `d2`.
  void Weigh(double c, double d2, int64_t k) {
    if (k <= 0) return;
    const double keep = std::pow(1 - 1 / kDispersionIntervals, static_cast<double>(k));
    m1_ = keep * m1_ + (1 - keep) * c;
    m2_ = keep * m2_ + (1 - keep) * d2;
  }

  Nanos interval_ = 0;
  Nanos start_ = -1;
  int64_t count_ = 0;
  int64_t closed_ = 0;
  double last_ = 0;  // the last closed interval's count
  double m1_ = 0, m2_ = 0;  // weighted means of the counts, of d2
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_ARRIVAL_RATE_H_
