// superserve-router, superserve-sim and superserve-repro share one set of
// policy flags (policies/policy_flags.h): --print_policy_config must print the
// same configuration from all three, with the defaults and with flags set.
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"

namespace superserve {
namespace {

using ::testing::HasSubstr;

std::string BinDir() {
  const char* v = std::getenv("SUPERSERVE_BIN_DIR");
  return v != nullptr ? v : SUPERSERVE_TEST_BIN_DIR;
}

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

RunResult RunBinary(const std::string& name, std::vector<std::string> args) {
  RunResult r;
  std::string tmpl = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                     "/superserve-policy-config-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return r;
  const std::string log = tmpl + "/out.txt";
  args.insert(args.begin(), BinDir() + "/" + name);
  auto p = Subprocess::Start(args, log);
  if (!p.ok()) {
    r.output = p.status().ToString();
    return r;
  }
  auto st = p->Wait(Seconds(20));
  if (!st.has_value()) {
    r.output = name + " did not exit";
    return r;
  }
  if (WIFEXITED(*st)) r.exit_code = WEXITSTATUS(*st);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  std::remove(log.c_str());
  std::remove(tmpl.c_str());
  return r;
}

// The one JSON line a binary prints with --print_policy_config (and `flags`).
std::string PolicyConfigOf(const std::string& binary, std::vector<std::string> flags) {
  flags.push_back("--print_policy_config");
  RunResult r = RunBinary(binary, flags);
  EXPECT_EQ(r.exit_code, 0) << binary << ": " << r.output;
  std::string line(absl::StripSuffix(r.output, "\n"));
  EXPECT_EQ(line.find('\n'), std::string::npos) << binary << " printed more than one line:\n"
                                                << r.output;
  return line;
}

const std::vector<std::string> kBinaries = {"superserve-router", "superserve-sim",
                                            "superserve-repro"};

TEST(PolicyConfigIntegration, RouterSimAndReproPrintTheSameDefaults) {
  const std::string router = PolicyConfigOf("superserve-router", {});
  EXPECT_THAT(router, HasSubstr("\"policy\":\"ratefit\""));
  EXPECT_THAT(router, HasSubstr("\"num_buckets\":8"));
  EXPECT_THAT(router, HasSubstr("\"drop_below_first_bucket\":false"));
  EXPECT_THAT(router, HasSubstr("\"unmeasured_follow_drift\":true"));
  EXPECT_THAT(router, HasSubstr("\"initial_overhead_ns\":500000"));
  EXPECT_THAT(router, HasSubstr("\"overhead_quantile\":0.5"));
  // Every policy's options: the product's and the baselines' the flags set.
  for (const char* policy : {"\"ratefit\":{", "\"symphony\":{", "\"fixed-subnet\":{",
                             "\"orloj\":{", "\"slackfit\":{"}) {
    EXPECT_THAT(router, HasSubstr(policy));
  }
  EXPECT_EQ(router.front(), '{');
  EXPECT_EQ(router.back(), '}');
  for (const std::string& b : kBinaries) EXPECT_EQ(PolicyConfigOf(b, {}), router) << b;
}

TEST(PolicyConfigIntegration, TheSameFlagsGiveTheSameConfiguration) {
  // Underscored and dashed spellings both work, on every binary.
  const std::vector<std::string> flags = {
      "--policy=slackfit", "--buckets=12", "--drop-below-first-bucket", "--follow_drift=false",
      "--bucket_ties=accuracy", "--ratefit-window-ms=250", "--overhead_quantile=0.9",
      "--initial_overhead_us=750", "--fixed-subnet=3"};
  const std::string router = PolicyConfigOf("superserve-router", flags);
  EXPECT_THAT(router, HasSubstr("\"policy\":\"slackfit\""));
  EXPECT_THAT(router, HasSubstr("\"rate_window_ns\":250000000"));
  EXPECT_THAT(router, HasSubstr("\"fixed-subnet\":{\"subnet_id\":3}"));
  EXPECT_THAT(router, HasSubstr("\"num_buckets\":12"));
  EXPECT_THAT(router, HasSubstr("\"drop_below_first_bucket\":true"));
  EXPECT_THAT(router, HasSubstr("\"unmeasured_follow_drift\":false"));
  EXPECT_THAT(router, HasSubstr("\"bucket_ties\":\"accuracy\""));
  EXPECT_THAT(router, HasSubstr("\"initial_overhead_ns\":750000"));
  for (const std::string& b : kBinaries) EXPECT_EQ(PolicyConfigOf(b, flags), router) << b;
}

// superserve-sim's own Orloj flags are options in force too: printed with
// the shared ones.
TEST(PolicyConfigIntegration, TheSimulatorPrintsItsOrlojOptions) {
  const std::string sim = PolicyConfigOf(
      "superserve-sim", {"--orloj_bins=64", "--orloj_every_batch_size", "--orloj_b_per_ms=0.002"});
  EXPECT_THAT(sim, HasSubstr("\"grid_bins\":64"));
  EXPECT_THAT(sim, HasSubstr("\"every_batch_size\":true"));
  EXPECT_THAT(sim, HasSubstr("\"b_per_us\":2e-06"));
}

TEST(PolicyConfigIntegration, BadPolicyFlagsAreUsageErrorsNamingTheFlag) {
  for (const std::string& b : kBinaries) {
    // The removed policies and their flags are gone.
    RunResult r = RunBinary(b, {"--policy=slackfit-rg", "--print_policy_config"});
    EXPECT_EQ(r.exit_code, 2) << b << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("--policy must be one of")) << b;
    r = RunBinary(b, {"--guard_headroom=1.1", "--print_policy_config"});
    EXPECT_NE(r.exit_code, 0) << b << ": " << r.output;
    r = RunBinary(b, {"--buckets=0", "--print_policy_config"});
    EXPECT_EQ(r.exit_code, 2) << b << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("--buckets must be >= 1")) << b;
    r = RunBinary(b, {"--overhead_quantile=2"});
    EXPECT_EQ(r.exit_code, 2) << b << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("--overhead_quantile")) << b;
  }
}

}  // namespace
}  // namespace superserve
