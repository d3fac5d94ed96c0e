// The load generator's trace reader: the model and application columns (the
// simulator's `app` spelling too) that mix models and applications.
#include "router/client/trace_csv.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace superserve {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(TraceCsvTest, ReadsModelAndApplicationColumns) {
  auto t = ReadTraceCsv(WriteTemp("mixed.csv",
                                  "arrival_us,model,application\n"
                                  "0,fmnist,\n"
                                  "10,fmnist-exit,hard\n"
                                  "20,,easy\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].model, "fmnist");
  EXPECT_EQ((*t)[0].application, "");
  EXPECT_EQ((*t)[1].model, "fmnist-exit");
  EXPECT_EQ((*t)[1].application, "hard");
  EXPECT_EQ((*t)[1].arrival, Micros(10));
  EXPECT_EQ((*t)[2].model, "") << "no model: the replayer's default";
  EXPECT_EQ((*t)[2].application, "easy");
}

TEST(TraceCsvTest, AcceptsTheSimulatorsAppColumn) {
  auto t = ReadTraceCsv(WriteTemp("sim.csv", "arrival_us,app\n5,noisy\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].application, "noisy");
  EXPECT_EQ((*t)[0].model, "");
}

// A spreadsheet's CSV export starts with a UTF-8 byte order mark: it is not
// part of the first column's name (it was read as "\xEF\xBB\xBFarrival_us").
TEST(TraceCsvTest, SkipsAUtf8ByteOrderMark) {
  auto t = ReadTraceCsv(WriteTemp("bom.csv",
                                  "\xEF\xBB\xBF"  // apart: "\xBFa" is one escape
                                  "arrival_us,app\n5,noisy\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].arrival, Micros(5));
  EXPECT_EQ((*t)[0].application, "noisy");
}

// Numbers SimpleAtod takes but a replay cannot: inf, nan and values past
// int64 nanoseconds made superserve-loadgen wait for ever, and an SLO past
// int64 wrapped negative (every OK answer reported late). Each is an error
// naming its line, its column and the allowed range.
TEST(TraceCsvTest, RefusesNonFiniteAndOutOfRangeNumbers) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"arrival_us\n0\ninf\n",
       ":3: bad arrival_us \"inf\" (must be a number of microseconds in "
       "[0, 9.2e+15])"},
      {"arrival_us\nnan\n", ":2: bad arrival_us \"nan\""},
      {"arrival_us\n-inf\n", ":2: bad arrival_us \"-inf\""},
      {"arrival_us\n1e20\n", ":2: bad arrival_us \"1e20\""},
      {"arrival_us\n-5\n", ":2: bad arrival_us \"-5\""},
      {"arrival_us,slo_us\n0,1e300\n",
       ":2: bad slo_us \"1e300\" (must be a number of microseconds in (0, 86400000000], a day"},
      {"arrival_us,slo_us\n0,inf\n", ":2: bad slo_us \"inf\""},
      {"arrival_us,slo_us\n0,nan\n", ":2: bad slo_us \"nan\""},
      {"arrival_us,slo_us\n0,0\n", ":2: bad slo_us \"0\""},
      {"arrival_us,slo_us\n0,86400000001\n", ":2: bad slo_us \"86400000001\""},
      {"arrival_us,deadline_us\n0,1e15\n", ":2: bad deadline_us \"1e15\""},
  };
  for (const Case& c : cases) {
    auto t = ReadTraceCsv(WriteTemp("bad-number.csv", c.text));
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(t.status().message().find(c.message), absl::string_view::npos)
        << c.text << " -> " << t.status().message();
  }
  // The bounds themselves are fine.
  auto t =
      ReadTraceCsv(WriteTemp("edge-numbers.csv", "arrival_us,slo_us\n0,86400000000\n9.2e15,0.5\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].slo, kMaxQueryTimeout);
  EXPECT_EQ((*t)[1].arrival, Micros(9.2e15));
  EXPECT_EQ((*t)[1].slo, 500);
}

}  // namespace
}  // namespace superserve
