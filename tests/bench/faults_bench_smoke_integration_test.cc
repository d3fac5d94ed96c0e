// A short run of `superserve-bench faults` (the 60-s benchmark is not part
// of the suite): two workers, 2 s per variant, the no-fault baseline and the
// SIGKILL variant. The exactly-once counts must hold; the JSON must carry the
// fields docs/faults.md documents; the timeline CSV must have a row per second.
// (No PNG: importing matplotlib alone takes seconds here.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::MakeWorkDir;

// The number after "key": in the first object that contains `after`.
double Field(const std::string& json, const std::string& after, const std::string& key) {
  size_t at = json.find(after);
  if (at == std::string::npos) return -1e9;
  at = json.find("\"" + key + "\":", at);
  if (at == std::string::npos) return -1e9;
  return std::atof(json.c_str() + at + key.size() + 3);
}

TEST(FaultsBenchSmoke, ShortRunKeepsExactlyOnceAndWritesTheTimeline) {
  const std::string dir = MakeWorkDir();
  const std::string log = dir + "/bench.txt";
  auto p = Subprocess::Start({BinDir() + "/superserve-bench", "faults", "--json",
                              "--duration_s=2", "--kill_every_s=0.7", "--workers=2",
                              "--faults_probe_s=1.5", "--variants=none,sigkill", "--faults_plot=false", "--out_dir=" + dir},
                             log);
  ASSERT_TRUE(p.ok());
  auto st = p->Wait(Seconds(60));
  ASSERT_TRUE(st.has_value()) << "did not finish; see " << log;
  auto text = WaitForFile(log, Seconds(1));
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << *text;
  std::vector<std::string> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  const std::string& json = lines.back();
  ASSERT_TRUE(absl::StartsWith(json, "{\"benchmark\":\"faults\"")) << *text;
  for (const char* variant : {"\"variant\":\"none\"", "\"variant\":\"sigkill\""}) {
    EXPECT_EQ(Field(json, variant, "lost"), 0) << variant;
    EXPECT_EQ(Field(json, variant, "duplicated"), 0) << variant;
    EXPECT_GT(Field(json, variant, "queries"), 100) << variant;
    EXPECT_EQ(Field(json, variant, "answered"), Field(json, variant, "queries")) << variant;
    EXPECT_EQ(Field(json, variant, "router_answered"), Field(json, variant, "router_accepted"))
        << variant;
    EXPECT_GT(Field(json, variant, "mean_accuracy_before"), 0) << variant;
    EXPECT_GT(Field(json, variant, "slo_attainment"), 0) << variant;
  }
  EXPECT_EQ(Field(json, "\"variant\":\"none\"", "ratio_vs_none"), 1);
  EXPECT_TRUE(absl::StrContains(json, "\"kind\":\"kill-worker\"")) << json;
  std::ifstream csv(dir + "/faults_timeline.csv");
  std::stringstream ss;
  ss << csv.rdbuf();
  std::vector<std::string> rows = absl::StrSplit(ss.str(), '\n', absl::SkipEmpty());
  EXPECT_EQ(rows.size(), 1u + 2 * 2) << ss.str();  // header + 2 s x 2 variants
}

}  // namespace
}  // namespace superserve
