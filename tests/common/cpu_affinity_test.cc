#include "common/cpu_affinity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace superserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseCpuList, SinglesRangesAndDuplicates) {
  EXPECT_THAT(*ParseCpuList("0"), ElementsAre(0));
  EXPECT_THAT(*ParseCpuList("3-5"), ElementsAre(3, 4, 5));
  EXPECT_THAT(*ParseCpuList("6, 0-2,1"), ElementsAre(0, 1, 2, 6));
}

TEST(ParseCpuList, ErrorsQuoteTheBadPart) {
  EXPECT_THAT(std::string(ParseCpuList("").status().message()), HasSubstr("empty"));
  EXPECT_THAT(std::string(ParseCpuList("0,x").status().message()), HasSubstr("\"x\""));
  EXPECT_THAT(std::string(ParseCpuList("1-").status().message()), HasSubstr("\"1-\""));
  EXPECT_THAT(std::string(ParseCpuList("-1").status().message()), HasSubstr("\"-1\""));
  EXPECT_THAT(std::string(ParseCpuList("4-2").status().message()), HasSubstr("reversed"));
  EXPECT_THAT(std::string(ParseCpuList("99999").status().message()), HasSubstr("99999"));
}

std::vector<int> ThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(PinProcessToCpus, PinsExistingAndLaterThreads) {
  const std::vector<int> before = AllowedCpus();
  ASSERT_FALSE(before.empty());
  const int cpu = before.back();
  // A thread that exists before the call, and checks its mask after it.
  std::vector<int> early_thread;
  bool pinned = false;
  std::mutex mu;
  std::condition_variable cv;
  std::thread early([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return pinned; });
    early_thread = ThreadCpus();
  });
  ASSERT_TRUE(PinProcessToCpus({cpu}).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    pinned = true;
  }
  cv.notify_all();
  early.join();
  std::vector<int> late_thread;
  std::thread late([&] { late_thread = ThreadCpus(); });
  late.join();
  EXPECT_THAT(ThreadCpus(), ElementsAre(cpu));
  EXPECT_THAT(early_thread, ElementsAre(cpu));
  EXPECT_THAT(late_thread, ElementsAre(cpu));
  EXPECT_THAT(AllowedCpus(), ElementsAre(cpu));
  // Back to the original mask, so that the other tests in this binary run
  // as before.
  ASSERT_TRUE(PinProcessToCpus(before).ok());
  EXPECT_EQ(AllowedCpus(), before);
}

TEST(PinProcessToCpus, RefusesCpusThisProcessMayNotUse) {
  const std::vector<int> allowed = AllowedCpus();
  absl::Status st = PinProcessToCpus({allowed.back() + 1});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("not available"));
  EXPECT_THAT(std::string(st.message()), HasSubstr(std::to_string(allowed.back() + 1)));
  EXPECT_THAT(PinProcessToCpus({}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AllowedCpus(), allowed);
}

}  // namespace
}  // namespace superserve
