#include "common/time.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace superserve {
namespace {

constexpr Nanos kMax = std::numeric_limits<Nanos>::max();
constexpr Nanos kMin = std::numeric_limits<Nanos>::min();

TEST(SaturatingTest, AddsAndSubtractsWithoutOverflow) {
  EXPECT_EQ(SaturatingAdd(1, 2), 3);
  EXPECT_EQ(SaturatingAdd(-5, 2), -3);
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax - 1, kMax), kMax);
  EXPECT_EQ(SaturatingAdd(kMin, -1), kMin);
  EXPECT_EQ(SaturatingAdd(kMin, kMax), -1);
  EXPECT_EQ(SaturatingSub(5, 7), -2);
  EXPECT_EQ(SaturatingSub(kMax, -1), kMax);
  EXPECT_EQ(SaturatingSub(kMin, 1), kMin);
  EXPECT_EQ(SaturatingSub(0, kMin), kMax);
  EXPECT_EQ(SaturatingSub(-1, kMin), kMax);
  EXPECT_EQ(SaturatingSub(kMax, kMax), 0);
  static_assert(SaturatingAdd(kMax, kMax) == kMax, "usable in constant expressions");
}

TEST(DeadlineAfterTest, AddsTheTimeoutToNow) {
  const Nanos now = Seconds(100);
  EXPECT_EQ(DeadlineAfter(now, Millis(5)), now + Millis(5));
  EXPECT_EQ(DeadlineAfterMicros(now, 2500), now + Micros(2500));
  EXPECT_EQ(DeadlineAfterMicros(now, 0), now);
  EXPECT_EQ(DeadlineAfter(now, kMaxQueryTimeout), now + kMaxQueryTimeout);
}

TEST(DeadlineAfterTest, ClampsAHugeTimeoutToTheMaximum) {
  const Nanos now = Seconds(100);
  EXPECT_EQ(DeadlineAfter(now, kMax), now + kMaxQueryTimeout);
  EXPECT_EQ(DeadlineAfter(now, kMaxQueryTimeout + 1), now + kMaxQueryTimeout);
  EXPECT_EQ(DeadlineAfterMicros(now, std::numeric_limits<int64_t>::max()), now + kMaxQueryTimeout);
  // Just past the clamp, in microseconds (where a naive * 1000 overflows).
  EXPECT_EQ(DeadlineAfterMicros(now, kMax / 1000 + 1), now + kMaxQueryTimeout);
  EXPECT_GT(DeadlineAfterMicros(now, std::numeric_limits<int64_t>::max()), now)
      << "a huge timeout must not wrap into a deadline already passed";
}

TEST(DeadlineAfterTest, NegativeTimeoutGivesADeadlineAlreadyPassed) {
  const Nanos now = Seconds(100);
  EXPECT_EQ(DeadlineAfter(now, -Millis(3)), now - Millis(3));
  EXPECT_EQ(DeadlineAfterMicros(now, -1), now - 1000);
  EXPECT_LT(DeadlineAfter(now, kMin), now);
  EXPECT_LT(DeadlineAfterMicros(now, std::numeric_limits<int64_t>::min()), now);
  EXPECT_EQ(DeadlineAfterMicros(now, std::numeric_limits<int64_t>::min()), now - kMaxQueryTimeout);
}

TEST(DeadlineAfterTest, SaturatesNearTheEndsOfTime) {
  EXPECT_EQ(DeadlineAfter(kMax - 10, Seconds(1)), kMax);
  EXPECT_EQ(DeadlineAfterMicros(kMax - 10, std::numeric_limits<int64_t>::max()), kMax);
  EXPECT_EQ(DeadlineAfter(kMax, 0), kMax);
  EXPECT_EQ(DeadlineAfter(kMin + 10, kMin), kMin);
  EXPECT_EQ(DeadlineAfterMicros(kMin + 10, std::numeric_limits<int64_t>::min()), kMin);
  EXPECT_EQ(DeadlineAfter(kMin, kMax), kMin + kMaxQueryTimeout);
}

}  // namespace
}  // namespace superserve
