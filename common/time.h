#ifndef SUPERSERVE_COMMON_TIME_H_
#define SUPERSERVE_COMMON_TIME_H_

#include <algorithm>
#include <cstdint>
#include <limits>

namespace superserve {

// All engine-internal times are int64 nanoseconds: on the router's clock for
// instants, plain spans for durations. Plain integers keep the policies and the
// simulator fast (a decision must cost well under 2 us).
using Nanos = int64_t;

constexpr Nanos kNanosPerMicro = 1000;
constexpr Nanos kNanosPerMilli = 1000 * 1000;
constexpr Nanos kNanosPerSecond = 1000 * 1000 * 1000;

constexpr Nanos Micros(double us) { return static_cast<Nanos>(us * kNanosPerMicro); }
constexpr Nanos Millis(double ms) { return static_cast<Nanos>(ms * kNanosPerMilli); }
constexpr Nanos Seconds(double s) { return static_cast<Nanos>(s * kNanosPerSecond); }
constexpr double ToMicros(Nanos ns) { return static_cast<double>(ns) / kNanosPerMicro; }
constexpr double ToMillis(Nanos ns) { return static_cast<double>(ns) / kNanosPerMilli; }
constexpr double ToSeconds(Nanos ns) { return static_cast<double>(ns) / kNanosPerSecond; }

// The longest a query may wait: a client's timeout (or gRPC deadline) beyond
// it is clamped to it. A day is far beyond any SLO this engine serves, and it
// keeps every deadline within a day (8.64e13 ns) of "now", so that the deadline
// arithmetic downstream (deadline - latency, slack sums, deadline + margin)
// cannot overflow however large a timeout a client sends (e.g. INT64_MAX us
// to mean "no deadline").
constexpr Nanos kMaxQueryTimeout = 24 * 3600 * kNanosPerSecond;

// a + b and a - b, saturating at the int64 limits instead of overflowing.
constexpr Nanos SaturatingAdd(Nanos a, Nanos b) {
  if (b > 0 && a > std::numeric_limits<Nanos>::max() - b) return std::numeric_limits<Nanos>::max();
  if (b < 0 && a < std::numeric_limits<Nanos>::min() - b) return std::numeric_limits<Nanos>::min();
  return a + b;
}
constexpr Nanos SaturatingSub(Nanos a, Nanos b) {
  if (b < 0 && a > std::numeric_limits<Nanos>::max() + b) return std::numeric_limits<Nanos>::max();
  if (b > 0 && a < std::numeric_limits<Nanos>::min() + b) return std::numeric_limits<Nanos>::min();
  return a - b;
}

// The deadline of a query that arrives at `now` and may take `timeout`:
// now + min(timeout, kMaxQueryTimeout), saturating. A negative timeout (a
// client deadline already passed) gives a deadline that is already past.
// Callers decide what a zero or negative timeout means before calling (e.g.
// "use the default SLO").
constexpr Nanos DeadlineAfter(Nanos now, Nanos timeout) {
  return SaturatingAdd(now, std::min(timeout, kMaxQueryTimeout));
}
// The same for a timeout in whole microseconds (the wire's timeout_us),
// clamped to [-kMaxQueryTimeout, kMaxQueryTimeout] before the conversion to
// nanoseconds (Micros() takes a double and overflows past ~9.2e12 us).
constexpr Nanos DeadlineAfterMicros(Nanos now, int64_t timeout_us) {
  constexpr int64_t kMaxUs = kMaxQueryTimeout / kNanosPerMicro;
  return DeadlineAfter(now, std::clamp<int64_t>(timeout_us, -kMaxUs, kMaxUs) * kNanosPerMicro);
}

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_TIME_H_
