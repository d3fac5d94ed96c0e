// superserve-sim's command-line contract for bad input: a flag out of its
// range is a usage error (exit 2) naming the flag, the value and the allowed
// range; a bad --exec_times file or a trace that does not fit the profile is
// an error (exit 1) that says what is wrong; never a crash, a silent
// fallback or a run that reports nonsense. (Runs the binary.)
#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"

namespace superserve {
namespace {

using ::testing::HasSubstr;

using SimRun = testing::CliRun;

SimRun Sim(const std::string& args) { return testing::RunTool("superserve-sim", args); }

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/sim_cli_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const std::string kStatic = std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models/fmnist/profile.json";

// Two applications: short (~0.1-0.4 ms) and long (1-8 ms).
std::string DynamicProfile() {
  return Write("dyn.json", R"({"model": "dyn", "family": "dynamic", "batch_sizes": [1, 2, 4],
    "input_shape": ["4"], "num_classes": 3, "dynamic": {"batch_overhead_us": 200,
    "per_request_factor": 0.9, "applications": [
      {"application": "short", "bin_edges_us": [100, 200, 400], "counts": [5, 1]},
      {"application": "long", "bin_edges_us": [1000, 2000, 4000, 8000], "counts": [1, 2, 1]}]}})");
}

std::string StaticRun() {
  return "--profile " + kStatic + " --trace " +
         Write("static.csv", "arrival_us\n1000\n2000\n3000\n") +
         " --policy ratefit --workers 2 --json";
}

TEST(SimCliTest, FlagsOutOfRangeNameTheFlagTheValueAndTheRange) {
  ASSERT_EQ(Sim(StaticRun()).status, 0) << Sim(StaticRun()).out;
  const struct {
    std::string flags, want;
  } cases[] = {
      {"--dispatch_overhead_us=-1e9",
       "--dispatch_overhead_us must be in [0, 8.64e+10] us (a day); got -1e+09"},
      {"--dispatch_overhead_us=nan", "--dispatch_overhead_us must be in [0, 8.64e+10] us"},
      {"--dispatch_overhead_us=1e16", "got 1e+16"},
      {"--exec_scale=inf", "--exec_scale must be in (0, 1e+06]; got inf"},
      {"--exec_scale=1e13", "--exec_scale must be in (0, 1e+06]; got 1e+13"},
      {"--exec_scale=0", "--exec_scale must be in (0, 1e+06]; got 0"},
      {"--noise_cv=nan", "--noise_cv must be finite and >= 0; got nan"},
      {"--noise_cv=-1", "--noise_cv must be finite and >= 0; got -1"},
      {"--noise_cv=inf", "--noise_cv must be finite and >= 0; got inf"},
      {"--slo-ms 1e13", "--slo_ms must be in [1e-06, 8.64e+07] ms (1 ns to a day"},
      {"--slo-ms 1e-9", "--slo_ms must be in [1e-06, 8.64e+07] ms"},
      {"--slo-ms 0", "got 0"},
      {"--fail_worker_at=nan", "--fail_worker_at must be in [0, 9.2e+09] s"},
      {"--fail_worker_at=1,-1",
       "--fail_worker_at must be in [0, 9.2e+09] s (the trace's range); got -1"},
      {"--fail_worker_at=soon",
       "--fail_worker_at must be in [0, 9.2e+09] s (the trace's range); got \"soon\""},
      {"--timeline=/dev/null --timeline_bin_s=1e12",
       "--timeline_bin_s must be in [1e-06, 86400] s (1 us to a day); got 1e+12"},
      {"--timeline=/dev/null --timeline_bin_s=1e-9", "--timeline_bin_s must be in"},
      {"--orloj_bins=100000", "--orloj_bins must be in [1, 1024]"},
      {"--orloj_bins=0", "--orloj_bins must be in [1, 1024]"},
      {"--orloj_viable_quantile=2", "--orloj_viable_quantile must be in (0, 1]; got 2"},
      {"--orloj_viable_quantile=nan", "--orloj_viable_quantile must be in (0, 1]; got nan"},
      {"--orloj_b_per_ms=inf", "--orloj_b_per_ms must be finite and >= 0; got inf"},
      {"--orloj_b_per_ms=-1", "--orloj_b_per_ms must be finite and >= 0; got -1"},
      {"--ratefit_window_ms=nan", "--ratefit_window_ms must be in"},
  };
  for (const auto& c : cases) {
    const SimRun r = Sim(StaticRun() + " " + c.flags);
    EXPECT_EQ(r.status, 2) << c.flags << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.want)) << c.flags;
  }
}

// Bad --exec_times files name the line and its text; an empty one, or one
// for a static profile, is an error instead of being ignored; a value beyond
// a day (1e17 us wrapped to 1 ns: a run that cannot meet its SLO reported
// perfect attainment) is rejected.
TEST(SimCliTest, ExecTimesErrorsSayWhatIsWrong) {
  const std::string run = "--profile " + DynamicProfile() + " --trace " +
                          Write("dyn.csv", "arrival_us,app\n1000,short\n2000,long\n3000,short\n") +
                          " --policy orloj --workers 1 --slo-ms 36 --json --exec_times ";
  SimRun r = Sim(run + Write("ok.txt", "100\n2000\n300\n"));
  EXPECT_EQ(r.status, 0) << r.out;
  r = Sim(run + Write("txt.txt", "100\nabc\n300\n"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("txt.txt line 2: not a number: \"abc\""));
  r = Sim(run + Write("empty.txt", ""));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no execution times"));
  r = Sim(run + Write("huge.txt", "100\n1e17\n300\n"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("huge.txt line 2: 1e17 us is outside [0, 8.64e+10] us"));
  r = Sim(run + Write("short.txt", "100\n200\n"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("holds 2 execution times for the trace's 3 queries"));
  r = Sim(StaticRun() + " --exec_times " + Write("static_ok.txt", "100\n200\n300\n"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--exec_times replays a dynamic model's per-query times"));
}

// A dynamic profile with several applications and a trace without an app
// column: every query would silently have been the first application.
TEST(SimCliTest, DynamicProfileNeedsTheTracesAppColumn) {
  const SimRun r = Sim("--profile " + DynamicProfile() + " --trace " +
                       Write("noapp.csv", "arrival_us\n1000\n2000\n") +
                       " --policy orloj --workers 1 --slo-ms 36 --json");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out,
              HasSubstr("has no application (or app) column, and profile dyn has 2 applications"));
}

// One trace format (issue 44): a trace whose application column is named
// `application` (the load generator's name; superserve-sim refused it as
// having no app column) replays as the same trace with `app`: the same
// result, and an application the profile lacks is named.
TEST(SimCliTest, ReplaysATraceWithAnApplicationColumn) {
  const std::string run = "--profile " + DynamicProfile() + " --policy orloj --workers 1 " +
                          "--slo-ms 36 --seed 3 --json --trace ";
  const std::string rows = "1000,short\n2000,long\n3000,short\n4000,long\n";
  const SimRun app = Sim(run + Write("app.csv", "arrival_us,app\n" + rows));
  ASSERT_EQ(app.status, 0) << app.out;
  const SimRun application = Sim(run + Write("application.csv", "arrival_us,application\n" + rows));
  ASSERT_EQ(application.status, 0) << application.out;
  EXPECT_THAT(application.out, HasSubstr("\"queries\":4")) << application.out;
  EXPECT_EQ(application.out, app.out);
  const SimRun unknown = Sim(run + Write("unknown.csv", "arrival_us,application\n1000,medium\n"));
  EXPECT_EQ(unknown.status, 1) << unknown.out;
  EXPECT_THAT(unknown.out, HasSubstr("trace application \"medium\" is not in profile dyn"));
}

// A trace saved with a UTF-8 byte order mark reads as without one.
TEST(SimCliTest, TraceWithAByteOrderMark) {
  const SimRun r = Sim("--profile " + kStatic + " --trace " +
                       Write("bom.csv",
                             "\xEF\xBB\xBF"
                             "arrival_us\n1000\n2000\n") +
                       " --policy ratefit --workers 1 --json");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"queries\":2"));
}

}  // namespace
}  // namespace superserve
