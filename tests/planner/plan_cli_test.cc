// superserve-plan's command-line contract: the last stdout line is one JSON
// object with cost and configs [{rate, machines, batch}]; bad input exits
// non-zero with a message, never a crash.
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_run.h"

namespace superserve {
namespace {

using PlanRun = testing::CliRun;

// stdout only: the last line must be the JSON plan.
PlanRun Plan(const std::string& args) {
  return testing::RunTool("superserve-plan", args, /*with_stderr=*/false);
}

std::string LastLine(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.find_last_of('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

const std::string kData = std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/tests/planner/testdata/";

TEST(PlanCliTest, LastLineIsTheJsonPlan) {
  const PlanRun s3 = Plan("--profile " + kData +
                          "harpagon_m3_profile.json --rate 198 --slo-ms 1000 "
                          "--method s3 --json");
  ASSERT_EQ(s3.status, 0) << s3.out;
  const std::string line = LastLine(s3.out);
  EXPECT_EQ(line.front(), '{');
  EXPECT_EQ(line.back(), '}');
  EXPECT_NE(line.find("\"cost\":5.3,"), std::string::npos) << line;
  EXPECT_NE(line.find("\"rate\":160,\"machines\":4,\"batch\":32"), std::string::npos) << line;
  EXPECT_NE(line.find("\"rate\":6,\"machines\":0.3,\"batch\":2"), std::string::npos) << line;

  const PlanRun full =
      Plan("--profile " + kData + "table1_chain.json --rate 100 --slo-ms 1600 --json");
  ASSERT_EQ(full.status, 0) << full.out;
  EXPECT_NE(LastLine(full.out).find("\"method\":\"harpagon\""), std::string::npos);
  EXPECT_NE(LastLine(full.out).find("\"module\":\"M3\""), std::string::npos);
}

TEST(PlanCliTest, BadInputExitsWithAnError) {
  const std::string m3 = "--profile " + kData + "harpagon_m3_profile.json";
  EXPECT_EQ(Plan("--rate 1 --slo-ms 1").status, 2);
  EXPECT_EQ(Plan(m3 + " --rate -1 --slo-ms 1000").status, 2);
  EXPECT_EQ(Plan(m3 + " --rate 1 --slo-ms 0").status, 2);
  EXPECT_EQ(Plan(m3 + " --rate 1 --slo-ms 1000 --method s9").status, 2);
  EXPECT_EQ(Plan(m3 + " --rate 100 --slo-ms 10").status, 1);
  EXPECT_EQ(Plan("--profile /nonexistent.json --rate 1 --slo-ms 1000").status, 1);
  EXPECT_EQ(
      Plan("--profile " + kData + "table1_chain.json --rate 1 --slo-ms 1000 --subnet 7").status, 1);
}

// Edge cases an adversarial sweep found: an objective below
// the fastest batch, a count beyond int32 and a tiny positive rate.
TEST(PlanCliTest, EdgeRatesAndObjectives) {
  const std::string m3 = "--profile " + kData + "harpagon_m3_profile.json";
  // No batch finishes within 1 ns (M3's fastest: batch 2, 100 ms), at any rate.
  for (const char* rate : {"1e-9", "198"}) {
    const PlanRun tight = Plan(m3 + " --rate " + rate + " --slo-ms 1e-6 --json");
    EXPECT_EQ(tight.status, 1) << tight.out;
  }
  // A tiny positive rate still gets a machine.
  const PlanRun tiny = Plan(m3 + " --rate 1e-9 --slo-ms 1000 --json");
  ASSERT_EQ(tiny.status, 0) << tiny.out;
  EXPECT_NE(LastLine(tiny.out).find("\"workers\":1,"), std::string::npos) << tiny.out;
  // 2.5e9 workers: an error, never a negative count.
  const PlanRun huge = Plan(m3 + " --rate 1e11 --slo-ms 1000 --json");
  EXPECT_EQ(huge.status, 1) << huge.out;
  EXPECT_EQ(huge.out.find("-2147483648"), std::string::npos) << huge.out;
  const std::string file = ::testing::TempDir() + "/plan_cli_huge_rate_factor.json";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"application\":\"x\",\"modules\":[{\"name\":\"A\",\"rate_factor\":1e300,"
             "\"batches\":[{\"batch\":1,\"duration_ms\":10}]}]}",
             f);
  std::fclose(f);
  const PlanRun factor = Plan("--profile " + file + " --rate 100 --slo-ms 200 --json");
  EXPECT_EQ(factor.status, 1) << factor.out;
  EXPECT_EQ(factor.out.find("-2147483648"), std::string::npos) << factor.out;
  std::remove(file.c_str());
}

}  // namespace
}  // namespace superserve
