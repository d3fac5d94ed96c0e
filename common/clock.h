#ifndef SUPERSERVE_COMMON_CLOCK_H_
#define SUPERSERVE_COMMON_CLOCK_H_

#include <atomic>

#include "absl/status/status.h"
#include "common/time.h"

namespace superserve {

// Source of "now" for everything that schedules. The live router uses
// RealClock; the simulator and unit tests use SimulatedClock so that a policy
// behaves identically in both and tests never sleep.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds since an arbitrary epoch.
  virtual Nanos Now() const = 0;
};

// std::chrono::steady_clock.
class RealClock final : public Clock {
 public:
  Nanos Now() const override;
  // Process-wide instance.
  static RealClock* Get();
};

// A clock that only moves when told to. Thread-safe; time never goes back.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(Nanos start = 0) : now_(start) {}
  Nanos Now() const override { return now_.load(std::memory_order_acquire); }

  // Moves the clock forward by `d` (d >= 0).
  absl::Status Advance(Nanos d);
  // Moves the clock to `t` (t >= Now()).
  absl::Status AdvanceTo(Nanos t);

 private:
  std::atomic<Nanos> now_;
};

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_CLOCK_H_
