// superserve-plan's command-line contract: the last stdout line is one JSON
// object with cost and configs [{rate, machines, batch}]; bad input exits
// non-zero with a message, never a crash.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace superserve {
namespace {

struct PlanRun {
  int status = -1;
  std::string out;
};

PlanRun Plan(const std::string& args) {
  const std::string cmd =
      std::string(SUPERSERVE_TEST_BIN_DIR) + "/superserve-plan " + args + " 2>/dev/null";
  PlanRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  const int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
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

}  // namespace
}  // namespace superserve
