#include "common/clock.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace superserve {
namespace {

TEST(SimulatedClockTest, StartsWhereToldAndMovesOnlyWhenAdvanced) {
  SimulatedClock clock(Millis(5));
  EXPECT_EQ(clock.Now(), Millis(5));
  EXPECT_EQ(clock.Now(), Millis(5));
  ASSERT_TRUE(clock.Advance(Micros(250)).ok());
  EXPECT_EQ(clock.Now(), Millis(5) + Micros(250));
  ASSERT_TRUE(clock.AdvanceTo(Seconds(1)).ok());
  EXPECT_EQ(clock.Now(), Seconds(1));
}

TEST(SimulatedClockTest, RefusesToGoBackwards) {
  SimulatedClock clock(Seconds(2));
  absl::Status st = clock.AdvanceTo(Seconds(1));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("before now"), std::string::npos) << st;
  EXPECT_EQ(clock.Advance(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(clock.Now(), Seconds(2));
  // Advancing to "now" is allowed and changes nothing.
  EXPECT_TRUE(clock.AdvanceTo(Seconds(2)).ok());
}

TEST(SimulatedClockTest, ConcurrentAdvancesAllCount) {
  SimulatedClock clock;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(clock.Advance(3).ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(clock.Now(), 4 * 1000 * 3);
}

TEST(RealClockTest, IsMonotonic) {
  Nanos a = RealClock::Get()->Now();
  Nanos b = RealClock::Get()->Now();
  EXPECT_LE(a, b);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GE(RealClock::Get()->Now() - a, Millis(2));
}

TEST(TimeTest, Conversions) {
  EXPECT_EQ(Micros(1.5), 1500);
  EXPECT_EQ(Millis(36), 36'000'000);
  EXPECT_DOUBLE_EQ(ToMillis(Micros(2500)), 2.5);
  EXPECT_DOUBLE_EQ(ToSeconds(Seconds(12)), 12.0);
}

}  // namespace
}  // namespace superserve
