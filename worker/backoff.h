#ifndef SUPERSERVE_WORKER_BACKOFF_H_
#define SUPERSERVE_WORKER_BACKOFF_H_

#include <algorithm>
#include <cstdint>

#include "common/time.h"

namespace superserve {

struct BackoffOptions {
  Nanos initial = Millis(100);  // the first delay after a Reset()
  Nanos max = Seconds(2);       // the cap
  double multiplier = 2.0;      // growth per attempt (>= 1)
  // Each delay is drawn uniformly from [(1 - jitter) * d, d], where d is the
  // capped exponential value: never above the cap, and workers that lost the
  // router at the same moment do not all dial again at the same moment.
  double jitter = 0.2;
  uint64_t seed = 0;  // same seed, same sequence of delays
};

// Capped exponential backoff with jitter: the delays before successive
// attempts are about initial, initial * m, initial * m^2, ... up to max.
// Pure (no clock, no sleeping); not thread-safe.
class Backoff {
 public:
  explicit Backoff(BackoffOptions o = {}) : o_(Sanitize(o)), rng_(o.seed) { Reset(); }

  // The delay before the next attempt; grows the following one.
  Nanos Next() {
    const Nanos d = current_;
    current_ = static_cast<double>(current_) * o_.multiplier >= static_cast<double>(o_.max)
                   ? o_.max
                   : static_cast<Nanos>(static_cast<double>(current_) * o_.multiplier);
    ++attempts_;
    // u in [0, 1) from the top 53 bits of a splitmix64 draw.
    const double u = static_cast<double>(SplitMix() >> 11) * 0x1.0p-53;
    return d - static_cast<Nanos>(static_cast<double>(d) * o_.jitter * u);
  }
  // After a success: the next delay is `initial` again.
  void Reset() {
    current_ = o_.initial;
    attempts_ = 0;
  }
  // Next() calls since the last Reset().
  int64_t attempts() const { return attempts_; }
  const BackoffOptions& options() const { return o_; }

 private:
  static BackoffOptions Sanitize(BackoffOptions o) {
    o.initial = std::max<Nanos>(o.initial, 0);
    o.max = std::max(o.max, o.initial);
    o.multiplier = std::max(o.multiplier, 1.0);
    o.jitter = std::clamp(o.jitter, 0.0, 1.0);
    return o;
  }
  uint64_t SplitMix() {
    uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  BackoffOptions o_;
  uint64_t rng_;
  Nanos current_ = 0;
  int64_t attempts_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_BACKOFF_H_
