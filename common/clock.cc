#include "common/clock.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace superserve {

Nanos RealClock::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

RealClock* RealClock::Get() {
  static RealClock* clock = new RealClock();
  return clock;
}

absl::Status SimulatedClock::Advance(Nanos d) {
  if (d < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SimulatedClock::Advance: negative step ", d, " ns"));
  }
  now_.fetch_add(d, std::memory_order_acq_rel);
  return absl::OkStatus();
}

absl::Status SimulatedClock::AdvanceTo(Nanos t) {
  Nanos cur = now_.load(std::memory_order_acquire);
  while (true) {
    if (t < cur) {
      return absl::InvalidArgumentError(absl::StrCat("SimulatedClock::AdvanceTo: ", t,
                                                     " ns is before now (", cur, " ns)"));
    }
    if (now_.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) return absl::OkStatus();
  }
}

}  // namespace superserve
