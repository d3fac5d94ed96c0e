#include "common/process_cpu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

namespace superserve {
namespace {

using ::testing::HasSubstr;

// Spins on this thread for `wall` of wall time.
void BusyLoop(std::chrono::milliseconds wall) {
  const auto end = std::chrono::steady_clock::now() + wall;
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

Nanos RusageCpu() {
  rusage ru{};
  EXPECT_EQ(getrusage(RUSAGE_SELF, &ru), 0);
  auto ns = [](const timeval& t) {
    return static_cast<Nanos>(t.tv_sec) * kNanosPerSecond + static_cast<Nanos>(t.tv_usec) * 1000;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

TEST(ProcessCpuTime, OwnCpuTimeGrowsWithABusyLoopAndAgreesWithGetrusage) {
  auto before = ProcessCpuTime(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  const Nanos rusage_before = RusageCpu();
  // Spins until getrusage has counted 150 ms of CPU (not for a wall time: on
  // a loaded 2-core machine 300 ms of wall time gave 70 ms of CPU and the
  // test failed), at most 60 s.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (RusageCpu() - rusage_before < Millis(150) && std::chrono::steady_clock::now() < give_up) {
    BusyLoop(std::chrono::milliseconds(5));
  }
  auto after = ProcessCpuTime(getpid());
  ASSERT_TRUE(after.ok()) << after.status();
  const Nanos rusage_after = RusageCpu();
  ASSERT_GE(rusage_after - rusage_before, Millis(150)) << "no CPU in 60 s of spinning";
  // /proc counts in clock ticks (10 ms), so allow two.
  EXPECT_GE(*after - *before, Millis(130));
  EXPECT_NEAR(ToMillis(*after - *before), ToMillis(rusage_after - rusage_before), 20.0);
  // Never more than getrusage's total (both count the same threads).
  EXPECT_LE(*after, RusageCpu() + Millis(20));
}

TEST(ProcessCpuTime, AnotherProcess) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    BusyLoop(std::chrono::milliseconds(200));
    _exit(0);
  }
  // The child has not been reaped yet: its stat file stays readable (a
  // zombie) and holds all the CPU it used.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  auto cpu = ProcessCpuTime(child);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_GE(*cpu, Millis(50));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // Reaped: gone.
  EXPECT_EQ(ProcessCpuTime(child).status().code(), absl::StatusCode::kNotFound);
}

TEST(ProcessCpuTime, NonExistentPidIsNotFound) {
  // Above the kernel's pid_max (at most 2^22), so never a live process.
  auto cpu = ProcessCpuTime(99999999);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(cpu.status().message()), HasSubstr("99999999"));
}

}  // namespace
}  // namespace superserve
