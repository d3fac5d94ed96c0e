#ifndef SUPERSERVE_WORKER_BACKOFF_H_
#define SUPERSERVE_WORKER_BACKOFF_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

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

// Which failed attempts in a row a worker logs while it cannot reach its
// router: the first three, each power of two (4, 8, 16: within seconds, a
// user watching sees it is still trying), one whose reason differs from the
// last logged, and otherwise one at least every `interval`, so that a worker
// down for an hour says so about every interval however long each attempt
// and its backoff take (a count of attempts, every 20th, was minutes apart
// with 5-s attempt timeouts or a large --reconnect_max_backoff_ms). Pure (the
// caller passes the time); not thread-safe.
class ReconnectLogSchedule {
 public:
  explicit ReconnectLogSchedule(Nanos interval) : interval_(interval) {}

  // Attempt `n` (1-based, failures in a row) failed at `now` because of `why`.
  bool Due(int64_t n, Nanos now, std::string_view why) const {
    return n <= 3 || (n & (n - 1)) == 0 || why != last_why_ || now - last_at_ >= interval_;
  }
  // A line about a failure for `why` was logged at `now`.
  void Logged(Nanos now, std::string_view why) {
    last_at_ = now;
    last_why_ = std::string(why);
  }
  // Registered: the next failure is attempt 1 again.
  void Reset() { last_why_.clear(); }

 private:
  Nanos interval_;
  Nanos last_at_ = 0;
  std::string last_why_;
};

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_BACKOFF_H_
