#ifndef SUPERSERVE_COMMON_TIME_H_
#define SUPERSERVE_COMMON_TIME_H_

#include <cstdint>

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

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_TIME_H_
