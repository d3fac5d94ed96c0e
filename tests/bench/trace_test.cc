#include "bench/sim/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/sim/trace_generators.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

// Arrivals in [from, to) and their inter-arrival CV².
std::vector<Nanos> Window(const std::vector<Nanos>& a, Nanos from, Nanos to) {
  std::vector<Nanos> w;
  for (Nanos t : a) {
    if (t >= from && t < to) w.push_back(t);
  }
  return w;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(TraceGeneratorsTest, PoissonHasRateAndUnitCv2) {
  auto a = PoissonArrivals(5000, Seconds(60), 3);
  EXPECT_NEAR(a.size() / 60.0, 5000, 5000 * 0.01);
  EXPECT_NEAR(InterArrivalCv2(a), 1.0, 0.03);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(a, PoissonArrivals(5000, Seconds(60), 3));  // seeded
  EXPECT_NE(a, PoissonArrivals(5000, Seconds(60), 4));
}

TEST(TraceGeneratorsTest, GammaHasRequestedCv2) {
  for (double cv2 : {2.0, 4.0, 8.0}) {
    auto a = GammaArrivals(4000, cv2, Seconds(100), 5);
    EXPECT_NEAR(a.size() / 100.0, 4000, 4000 * 0.02) << cv2;
    EXPECT_NEAR(InterArrivalCv2(a), cv2, cv2 * 0.08) << cv2;
  }
}

TEST(TraceGeneratorsTest, BurstyIsBasePlusVariant) {
  auto a = BurstyArrivals(1500, 5550, 8, Seconds(100), 9);
  EXPECT_NEAR(a.size() / 100.0, 7050, 7050 * 0.02);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  // The deterministic base alone has CV² 0; the gamma variant alone CV² 8.
  auto base = BurstyArrivals(1500, 0, 8, Seconds(10), 9);
  EXPECT_EQ(base.size(), 15000u);
  EXPECT_NEAR(InterArrivalCv2(base), 0.0, 1e-6);
  auto variant = BurstyArrivals(0, 5550, 8, Seconds(100), 9);
  EXPECT_NEAR(InterArrivalCv2(variant), 8.0, 8 * 0.08);
}

TEST(TraceGeneratorsTest, TimeVaryingHoldsRampsAndHolds) {
  // 2500 for 20 s, +500 q/s² for 8.6 s, then 6800 until 100 s.
  auto a = TimeVaryingArrivals(2500, 6800, 500, 4, Seconds(20), Seconds(100), 11);
  auto start = Window(a, 0, Seconds(20));
  auto end = Window(a, Seconds(40), Seconds(100));
  EXPECT_NEAR(start.size() / 20.0, 2500, 2500 * 0.05);
  EXPECT_NEAR(end.size() / 60.0, 6800, 6800 * 0.03);
  EXPECT_NEAR(InterArrivalCv2(end), 4.0, 4 * 0.12);
  EXPECT_DOUBLE_EQ(TimeVaryingRate(2500, 6800, 500, Seconds(20), Seconds(24)), 4500);
  EXPECT_DOUBLE_EQ(TimeVaryingRate(2500, 6800, 500, Seconds(20), Seconds(90)), 6800);
}

TEST(TraceGeneratorsTest, SyntheticMafHitsTargetMeanWithDiurnalSwing) {
  MafOptions o;
  o.mean_rate = 4000;
  o.duration = Seconds(120);
  auto a = MafArrivals(o);
  ASSERT_TRUE(a.ok());
  EXPECT_NEAR(a->size() / 120.0, 4000, 4000 * 0.08);
  // Afternoon peak (minute ~960 -> 80 s) busier than the night (minute ~240 -> 20 s).
  auto night = Window(*a, Seconds(15), Seconds(25));
  auto peak = Window(*a, Seconds(75), Seconds(85));
  EXPECT_GT(peak.size(), 1.3 * night.size());
}

TEST(TraceGeneratorsTest, ReplaysAzureFunctionsMinuteCounts) {
  std::string path = TempPath("maf_d01.csv");
  {
    std::ofstream f(path);
    f << "HashOwner,HashApp,HashFunction,Trigger";
    for (int m = 1; m <= 1440; ++m) f << "," << m;
    f << "\n";
    for (int fn = 0; fn < 2; ++fn) {
      f << "o,a,f" << fn << ",http";
      // First half of the day 1 invocation/min per function, second half 3.
      for (int m = 0; m < 1440; ++m) f << "," << (m < 720 ? 1 : 3);
      f << "\n";
    }
  }
  auto counts = ReadMafMinuteCounts(path);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ((*counts)[0], 2);
  EXPECT_EQ((*counts)[1439], 6);
  MafOptions o;
  o.file = path;
  o.mean_rate = 2000;
  o.duration = Seconds(60);
  auto a = MafArrivals(o);
  ASSERT_TRUE(a.ok());
  EXPECT_NEAR(a->size() / 60.0, 2000, 2000 * 0.03);
  auto first = Window(*a, 0, Seconds(30)), second = Window(*a, Seconds(30), Seconds(60));
  EXPECT_NEAR(static_cast<double>(second.size()) / first.size(), 3.0, 0.2);
  o.file = TempPath("missing.csv");
  EXPECT_FALSE(MafArrivals(o).ok());
}

// A NaN or infinite count would make the minutes' rates NaN: the arrival
// loop never ends. The file is rejected, naming the line and the minute.
TEST(TraceGeneratorsTest, MafCountsMustBeFiniteAndNonNegative) {
  for (const char* bad : {"nan", "inf", "-1"}) {
    std::string path = TempPath("maf_bad.csv");
    {
      std::ofstream f(path);
      f << "HashOwner,HashApp,HashFunction,Trigger";
      for (int m = 1; m <= 1440; ++m) f << "," << m;
      f << "\no,a,f,http";
      for (int m = 1; m <= 1440; ++m) f << "," << (m == 5 ? bad : "1");
      f << "\n";
    }
    auto counts = ReadMafMinuteCounts(path);
    ASSERT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(counts.status().message().find("line 2 minute 5"), absl::string_view::npos)
        << counts.status();
  }
}

// NaN or infinite rates (and a NaN CV²) give empty traces instead of an
// impossible reservation or a loop that never advances; the tools reject such
// inputs before they get here (superserve-trace, MultiModelArrivals).
TEST(TraceGeneratorsTest, NonFiniteInputsGiveNoArrivals) {
  EXPECT_TRUE(PoissonArrivals(NAN, Seconds(1), 1).empty());
  EXPECT_TRUE(PoissonArrivals(INFINITY, Seconds(1), 1).empty());
  EXPECT_TRUE(GammaArrivals(100, NAN, Seconds(1), 1).empty());
  EXPECT_TRUE(BurstyArrivals(INFINITY, 0, 1, Seconds(1), 1).empty());
  EXPECT_TRUE(BurstyArrivals(NAN, NAN, 1, Seconds(1), 1).empty());
  EXPECT_TRUE(TimeVaryingArrivals(NAN, 100, 10, 1, 0, Seconds(1), 1).empty());
  EXPECT_TRUE(TimeVaryingArrivals(INFINITY, 100, 10, 1, 0, Seconds(1), 1).empty());
  EXPECT_TRUE(ArrivalsFromBinCounts({1, 2, 3}, NAN, Seconds(1), 1).empty());
  EXPECT_TRUE(ArrivalsFromBinCounts({1, 2, 3}, INFINITY, Seconds(1), 1).empty());
}

TEST(TraceGeneratorsTest, MultiModelRejectsOutOfRangeOptions) {
  MultiModelTraceOptions ok;
  ok.models = 2;
  ok.rate = 1000;
  ok.duration = Seconds(1);
  ASSERT_TRUE(MultiModelArrivals(ok).ok());
  std::vector<std::pair<std::string, MultiModelTraceOptions>> bad;
  auto with = [&](const std::string& what, auto change) {
    MultiModelTraceOptions o = ok;
    change(o);
    bad.emplace_back(what, o);
  };
  with("cv2 nan", [](auto& o) { o.cv2 = NAN; });
  with("cv2 inf", [](auto& o) { o.cv2 = INFINITY; });
  with("cv2 1e300", [](auto& o) { o.cv2 = 1e300; });
  with("cv2 0", [](auto& o) { o.cv2 = 0; });
  with("rate nan", [](auto& o) { o.rate = NAN; });
  with("rate inf", [](auto& o) { o.rate = INFINITY; });
  with("rate 1e12", [](auto& o) { o.rate = 1e12; });
  with("rate 1e8 for 100 s", [](auto& o) {
    o.rate = 1e8;
    o.duration = Seconds(100);
  });
  with("duration 0", [](auto& o) { o.duration = 0; });
  with("duration -1 s", [](auto& o) { o.duration = -Seconds(1); });
  with("zipf nan", [](auto& o) { o.zipf_s = NAN; });
  with("zipf -1", [](auto& o) { o.zipf_s = -1; });
  with("models 0", [](auto& o) { o.models = 0; });
  with("models 2e9", [](auto& o) { o.models = 2000000000; });
  for (const auto& [what, o] : bad) {
    auto t = MultiModelArrivals(o);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << what;
  }
  ok.rate = 1e12;
  const absl::Status st = MultiModelArrivals(ok).status();
  EXPECT_NE(st.message().find("expected arrivals, more than the 1e+08"), absl::string_view::npos)
      << st;
}

TEST(TraceTest, CsvRoundTripWithOptionalColumns) {
  Trace t;
  t.arrivals = {0, 1500, 1500, Micros(2000) + 7};
  t.app_names = {"cam", "bot"};
  t.app = {0, 1, 0, 1};
  std::string path = TempPath("trace.csv");
  ASSERT_TRUE(t.WriteCsv(path).ok());
  auto r = Trace::ReadCsv(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->arrivals, t.arrivals);
  ASSERT_EQ(r->app.size(), 4u);
  EXPECT_EQ(r->app_names[r->app[3]], "bot");
  EXPECT_TRUE(r->model.empty());
}

TEST(TraceTest, RejectsBadFiles) {
  std::string path = TempPath("bad.csv");
  {
    std::ofstream f(path);
    f << "time\n1\n";
  }
  auto r = Trace::ReadCsv(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("arrival_us"), std::string::npos);
  {
    std::ofstream f(path);
    f << "arrival_us\n10\n5\n";
  }
  r = Trace::ReadCsv(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("line 3"), std::string::npos);
  {
    std::ofstream f(path);
    f << "arrival_us\nabc\n";
  }
  EXPECT_FALSE(Trace::ReadCsv(path).ok());
  // Regressions (found by trace_fuzzer): a NUL byte inside a name was read
  // but cut when the trace was written back; one inside arrival_us ended the
  // number early ("12\0x" read as 12).
  {
    std::ofstream f(path, std::ios::binary);
    f << "arrival_us,app,model\n1,a,fmn" << std::string(1, '\0') << "ist\n";
  }
  r = Trace::ReadCsv(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("line 2: column model contains a NUL byte"),
            std::string::npos)
      << r.status();
  {
    std::ofstream f(path, std::ios::binary);
    f << "arrival_us\n12" << std::string(1, '\0') << "x\n";
  }
  r = Trace::ReadCsv(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("bad arrival_us"), std::string::npos)
      << r.status();
  // Regression (found while writing trace_fuzzer): a finite arrival_us beyond the int64
  // nanosecond range (1e300) was rounded with llround, whose result is then
  // unspecified (INT64_MIN here): the trace started at a negative time.
  for (const char* big : {"1e300", "9.3e15"}) {
    {
      std::ofstream f(path);
      f << "arrival_us\n" << big << "\n";
    }
    r = Trace::ReadCsv(path);
    ASSERT_FALSE(r.ok()) << big;
    EXPECT_NE(std::string(r.status().message()).find("bad arrival_us"), std::string::npos)
        << r.status();
  }
}

// A spreadsheet's CSV export starts with a UTF-8 byte order mark: it is not
// part of the first column's name (the header was "\xEF\xBB\xBFarrival_us",
// rejected as having no arrival_us column).
TEST(TraceTest, SkipsAUtf8ByteOrderMark) {
  std::string path = TempPath("bom.csv");
  {
    std::ofstream f(path, std::ios::binary);
    f << "\xEF\xBB\xBF"  // apart: "\xBFa" would be one escape
         "arrival_us,app\n1,cam\n2,bot\n";
  }
  auto r = Trace::ReadCsv(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->arrivals, (std::vector<Nanos>{Micros(1), Micros(2)}));
  ASSERT_EQ(r->app_names.size(), 2u);
  EXPECT_EQ(r->app_names[0], "cam");
}

// One trace format (issue 44): the load generator's `application` column
// name reads as the simulator's `app`, into the same names and indices
// (tests/router/load_generator_test.cc replays the same kind of file).
TEST(TraceTest, ReadsAnApplicationColumnAsApp) {
  std::vector<Trace> read;
  for (const char* column : {"app", "application"}) {
    const std::string path = TempPath(std::string("named-") + column + ".csv");
    {
      std::ofstream f(path);
      f << "arrival_us,model," << column << "\n0,fmnist-exit,easy\n10,fmnist-exit,hard\n"
        << "20,fmnist,easy\n";
    }
    auto r = Trace::ReadCsv(path);
    ASSERT_TRUE(r.ok()) << column << ": " << r.status();
    read.push_back(*std::move(r));
  }
  const Trace& app = read[0];
  const Trace& application = read[1];
  ASSERT_EQ(application.app.size(), 3u);
  EXPECT_EQ(application.app_names, (std::vector<std::string>{"easy", "hard"}));
  EXPECT_EQ(application.app, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(application.model_names, (std::vector<std::string>{"fmnist-exit", "fmnist"}));
  EXPECT_EQ(application.arrivals, app.arrivals);
  EXPECT_EQ(application.app, app.app);
  EXPECT_EQ(application.app_names, app.app_names);
  EXPECT_EQ(application.model, app.model);
}

// --exec_times: one value in us per line; errors name the line and its text
// (a non-number used to end the read early: "1 execution times for 3
// arrivals"), an empty file is an error (it used to be ignored), and a value
// beyond a day is one (1e17 us wrapped to 1 ns and made a run perfect).
TEST(TraceTest, ReadsExecTimesAndNamesTheBadLine) {
  std::string path = TempPath("exec_us.txt");
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  write("100\n 200.5 \n\n300\r\n");
  auto r = ReadExecTimes(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<double>{100, 200.5, 300}));
  write("8.64e10\n0\n");  // a day and nothing are the bounds
  EXPECT_TRUE(ReadExecTimes(path).ok());

  const struct {
    std::string text, want;
  } bad[] = {
      {"100\nabc\n300\n", "line 2: not a number: \"abc\""},
      {"100\n12x\n", "line 2: not a number: \"12x\""},
      {"", "no execution times"},
      {"\n \n", "no execution times"},
      {"100\n1e17\n300\n", "line 2: 1e17 us is outside [0, 8.64e+10] us"},
      {"-1\n", "line 1: -1 us is outside"},
      {"nan\n", "line 1: nan us is outside"},
      {"inf\n", "line 1: inf us is outside"},
      {"1e400\n", "line 1: 1e400 us is outside"},
  };
  for (const auto& c : bad) {
    write(c.text);
    r = ReadExecTimes(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(std::string(r.status().message()).find(c.want), std::string::npos)
        << r.status() << " (want " << c.want << ")";
    EXPECT_NE(std::string(r.status().message()).find(path), std::string::npos) << r.status();
  }
  EXPECT_EQ(ReadExecTimes(TempPath("no-such-file.txt")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TraceGeneratorsTest, MultiModelSplitsTheRateByPopularity) {
  MultiModelTraceOptions o;
  o.models = 20;
  o.rate = 10000;
  o.duration = Seconds(20);
  o.zipf_s = 0.9;
  auto t = MultiModelArrivals(o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->model.size(), t->arrivals.size());
  ASSERT_EQ(t->model_names.size(), 20u);
  EXPECT_EQ(t->model_names[19], "m19");
  EXPECT_TRUE(std::is_sorted(t->arrivals.begin(), t->arrivals.end()));
  EXPECT_NEAR(t->mean_rate(), 10000, 200);
  std::vector<int64_t> count(20, 0);
  for (int32_t m : t->model) ++count[m];
  const std::vector<double> shares = ZipfShares(20, 0.9);
  // Zipf 0.9: model 0 gets 20^0.9 ≈ 14.8x model 19's share.
  EXPECT_NEAR(shares[0] / shares[19], std::pow(20.0, 0.9), 1e-9);
  for (int m = 0; m < 20; ++m) {
    const double expected = shares[m] * 10000 * 20;
    EXPECT_NEAR(static_cast<double>(count[m]), expected, 5 * std::sqrt(expected)) << "model " << m;
  }
  o.zipf_s = 0;
  o.cv2 = 4;
  auto equal = MultiModelArrivals(o);
  ASSERT_TRUE(equal.ok());
  std::vector<Nanos> m0;
  for (size_t i = 0; i < equal->size(); ++i) {
    if (equal->model[i] == 0) m0.push_back(equal->arrivals[i]);
  }
  EXPECT_NEAR(static_cast<double>(m0.size()), 10000.0, 600) << "equal shares: 500 q/s each";
  EXPECT_NEAR(InterArrivalCv2(m0), 4, 0.8) << "each model its own gamma process";
  o.models = 0;
  EXPECT_FALSE(MultiModelArrivals(o).ok());
}

}  // namespace
}  // namespace superserve
