// superserve-trace's and superserve-symphony-repro's flag checks: an out-of-
// range number is a usage error (exit 2) whose message names the flag, its
// value and the range, never a crash, a hang or a silently empty trace.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cli_run.h"

namespace superserve {
namespace {

using testing::CliRun;
using testing::RunTool;

const std::string kOut = ::testing::TempDir() + "/bench_cli_trace.csv";

CliRun Trace(const std::string& args) {
  return RunTool("superserve-trace", args + " --out " + kOut + " --json");
}

TEST(TraceCliTest, OutOfRangeFlagsAreUsageErrorsNamingTheFlag) {
  // {arguments, what the message must contain}
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"poisson --rate nan", "--rate nan: must be a finite number in (0, 1e+09]"},
      {"poisson --rate inf --duration_s 1", "--rate inf"},
      {"poisson --rate 1e300", "--rate 1e+300"},
      {"poisson --rate -5", "--rate -5"},
      {"poisson --rate 0", "--rate 0"},
      {"poisson --rate 1e-4 --duration_s 1e10",
       "--duration_s 1e+10: must be a finite number in [1e-09, 1e+08]"},
      {"poisson --duration_s -1", "--duration_s -1"},
      {"poisson --duration_s nan", "--duration_s nan"},
      {"poisson --duration_s 0", "--duration_s 0"},
      {"bursty --cv2 -1", "--cv2 -1: must be a finite number in [0, 10000]"},
      {"bursty --cv2 1e300", "--cv2 1e+300"},
      {"bursty --base_rate -5", "--base_rate -5"},
      {"bursty --base_rate 0 --variant_rate 0", "--base_rate and --variant_rate are both 0"},
      {"time-varying --rate1 0", "--rate1 0"},
      {"time-varying --rate2 nan", "--rate2 nan"},
      {"time-varying --accel -1", "--accel -1: must be a finite number >= 0"},
      {"time-varying --hold_s inf", "--hold_s inf"},
      {"time-varying --cv2 nan", "--cv2 nan"},
      {"maf --rate nan", "--rate nan"},
      {"multi --model_cv2 nan --duration_s 1", "--model_cv2 nan: must be a finite number in (0, "},
      {"multi --model_cv2 0", "--model_cv2 0"},
      {"multi --models 0", "--models 0"},
      {"multi --models 2000000000", "--models 2e+09"},
      {"multi --zipf -1", "--zipf -1"},
      {"multi --zipf nan", "--zipf nan"},
      // The expected arrivals, rate x duration, are bounded (1e8).
      {"poisson --rate 1e12 --duration_s 1", "--rate 1e+12: must be a finite number in (0, 1e+09]"},
      {"poisson --rate 1e9 --duration_s 1",
       "--rate 1e+09 q/s x --duration_s 1 s is 1e+09 expected arrivals, more than the 1e+08"},
      {"poisson --rate 1e8 --duration_s 100", "expected arrivals"},
      {"multi --rate 1e7 --duration_s 60", "expected arrivals"},
      {"maf --rate 1e7 --duration_s 60", "expected arrivals"},
      {"bursty --base_rate 1e9 --variant_rate 1e9 --duration_s 1",
       "(--base_rate + --variant_rate) 2e+09 q/s"},
      {"time-varying --rate2 1e9 --duration_s 1", "max(--rate1, --rate2) 1e+09 q/s"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = Trace(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("superserve-trace: "), std::string::npos) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  }
}

TEST(TraceCliTest, InRangeFlagsStillWriteATrace) {
  for (const std::string args :
       {"poisson --rate 1000 --duration_s 2", "bursty --duration_s 2 --cv2 0",
        "time-varying --duration_s 2 --hold_s 1", "multi --duration_s 2 --zipf 0.9",
        "maf --duration_s 2 --rate 500"}) {
    const CliRun r = Trace(args);
    ASSERT_EQ(r.status, 0) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("\"mean_rate_qps\":"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("null"), std::string::npos) << r.out;
  }
  std::remove(kOut.c_str());
}

TEST(SymphonyReproCliTest, OutOfRangeFlagsAreUsageErrorsNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--duration_s 0", "--duration_s 0: must be a finite number in [0.001, 3600]"},
      {"--duration_s -1", "--duration_s -1"},
      {"--duration_s nan", "--duration_s nan"},
      {"--duration_s 1e10", "--duration_s 1e+10"},
      {"--duration_s 1 --dispatch_overhead_us nan",
       "--dispatch_overhead_us nan: must be a finite number in [0, 1e+06]"},
      {"--duration_s 1 --dispatch_overhead_us -1e9", "--dispatch_overhead_us -1e+09"},
      {"--duration_s 1 --dispatch_overhead_us 1e13", "--dispatch_overhead_us 1e+13"},
      {"--duration_s 1 --noise_cv -1", "--noise_cv -1"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = RunTool("superserve-symphony-repro", "--only single --json " + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("superserve-symphony-repro: " + message), std::string::npos)
        << args << "\n"
        << r.out;
  }
}

// The ResNet50 profile file is read before any run; a bad one is a usage
// error naming the flag and the file.
TEST(SymphonyReproCliTest, ABadResNet50ProfileFileIsAUsageError) {
  const CliRun missing = RunTool("superserve-symphony-repro",
                                 "--only table2 --resnet50_profile /nonexistent/r50.json");
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("superserve-symphony-repro: --resnet50_profile: "), std::string::npos)
      << missing.out;
  EXPECT_NE(missing.out.find("/nonexistent/r50.json"), std::string::npos) << missing.out;
}

// superserve-repro: a NaN, negative, zero, infinite or huge --duration_s ran
// all 99 cells on empty traces and exited 0; an unknown --only ran nothing
// and exited 0; a stray word was ignored.
TEST(ReproCliTest, OutOfRangeFlagsAndUnknownExperimentsAreUsageErrors) {
  // Its own folder: a regression writes results.csv there, not in TempDir.
  const std::string dir = ::testing::TempDir() + "/repro_cli_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string out = "--out " + dir + " --profile " +
                          SUPERSERVE_TEST_SOURCE_DIR + "/bench/data/paper_ofa_resnet50_profile.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--duration_s nan --only bursty", "--duration_s=nan must be in (0, 86400] seconds"},
      {"--duration_s -1 --only bursty", "--duration_s=-1 must be in (0, 86400]"},
      {"--duration_s 0 --only bursty", "--duration_s=0 must be in (0, 86400]"},
      {"--duration_s inf --only bursty", "--duration_s=inf must be in (0, 86400]"},
      {"--duration_s 1e300 --only bursty", "--duration_s=1e+300 must be in (0, 86400]"},
      {"--duration_s 1 --only bogus", "--only=bogus is not an experiment (known: bursty,"},
      {"--duration_s 1 --only bursty --dispatch_overhead_us inf",
       "--dispatch_overhead_us=inf must be in [0, 8.64e+10] us"},
      {"--duration_s 1 --only bursty stray", "unexpected argument 'stray'"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = RunTool("superserve-repro", out + " " + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("superserve-repro: " + message), std::string::npos) << args << "\n"
                                                                             << r.out;
  }
  std::filesystem::remove_all(dir);
}

// superserve-bench's live benchmarks refuse out-of-range flags before they
// start anything: router-throughput --throughput_trial_s=nan aborted
// (std::length_error), router-overhead with 0 queries and early-exit-live
// with a NaN duration or a zero rate reported numbers and exited 0, an
// infinite trial or probe length ran forever, and every usage error left an
// empty scratch folder behind ("logs kept in ...").
TEST(BenchCliTest, LiveBenchmarksRefuseOutOfRangeFlagsBeforeStarting) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"router-throughput --throughput_trial_s nan", "router-throughput: need --throughput_trial_s"},
      {"router-throughput --throughput_start_qps 0", "router-throughput: need"},
      {"router-throughput --throughput_workers 100000", "router-throughput: need"},
      {"router-throughput --throughput_connections 0", "router-throughput: need"},
      {"router-throughput --throughput_past_peak 0.5", "router-throughput: --throughput_past_peak"},
      {"router-overhead --overhead_queries 0", "router-overhead: need --overhead_queries in [1, 1e7]"},
      {"early-exit-live --eelive_seconds nan", "early-exit-live: need --eelive_seconds in (0, 86400]"},
      {"early-exit-live --eelive_qps 0", "early-exit-live: need"},
      {"registration --registration_qps 0", "registration: need --registration_qps in (0, 1e6]"},
      {"overload --overload_trial_s inf", "overload: need --overload_scale in (0, 1000]"},
      {"overload --overload_workers 100000", "overload: need"},
      {"scaling --probe_s inf", "scaling: need --max_workers in [1, 4096]"},
      {"scaling --max_workers 1000000", "scaling: need"},
      {"faults --duration_s 1e300", "faults: need --duration_s and --kill_every_s in (0, 86400]"},
      {"faults --workers 100000", "faults: need"},
      {"faults --faults_probe_s inf", "faults: need"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = RunTool("superserve-bench", args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("logs kept in"), std::string::npos) << args << "\n" << r.out;
  }
}

// `superserve-bench policy-case`: a missing policy, or a Poisson load that
// is not a number in (0, 100], is a usage error (inf ran an empty trace
// into the simulator); poisson=X replaces the case's trace with the one the
// goodput promise runs (one simulation of about 6,000 queries).
TEST(BenchCliTest, PolicyCaseRunsTheGoodputTraceOnAsk) {
  const CliRun missing = RunTool("superserve-bench", "policy-case 424");
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("policy-case: SEED POLICY [SUBNET_ID] [poisson=X]"), std::string::npos)
      << missing.out;
  for (const std::string x : {"-1", "0", "nan", "inf", "1e300", "abc", "0.5x"}) {
    const CliRun r = RunTool("superserve-bench", "policy-case 424 symphony poisson=" + x);
    EXPECT_EQ(r.status, 2) << x << "\n" << r.out;
    EXPECT_NE(r.out.find("policy-case: poisson=X needs X in (0, 100]; got \"" + x + "\""),
              std::string::npos)
        << x << "\n" << r.out;
  }
  const CliRun r = RunTool("superserve-bench", "policy-case 424 symphony poisson=0.3");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| Poisson at 0.30x capacity"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("symphony: attainment"), std::string::npos) << r.out;
}

// `superserve-bench many-models --quick` (issue 43): the simulated placement
// run ends with its JSON line, loads happened, and no cold start is shorter
// than the 10-ms load it waits for (the simulation is deterministic: these
// do not depend on the host).
TEST(BenchCliTest, ManyModelsQuickRunReportsPlacement) {
  const CliRun r = RunTool("superserve-bench", "many-models --json --quick");
  ASSERT_EQ(r.status, 0) << r.out;
  const size_t last = r.out.rfind("{\"benchmark\":\"many-models\"");
  ASSERT_NE(last, std::string::npos) << r.out;
  const std::string json = r.out.substr(last);
  for (const char* key : {"\"attainment\":", "\"attainment_hottest_10pct\":",
                          "\"attainment_ratio_vs_unlimited\":", "\"loads_per_s\":",
                          "\"cold_start_ms_p99\":", "\"router_cpu_us_per_query\":"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << "\n" << json;
  }
  const auto number = [&](const std::string& key) {
    const size_t at = json.find("\"" + key + "\":");
    return at == std::string::npos ? -1.0 : std::stod(json.substr(at + key.size() + 3));
  };
  EXPECT_GT(number("loads_per_s"), 0);
  EXPECT_GE(number("cold_start_ms_p50"), 10);
  EXPECT_GT(number("attainment"), 0);
  EXPECT_LE(number("attainment"), 1);
}

}  // namespace
}  // namespace superserve
