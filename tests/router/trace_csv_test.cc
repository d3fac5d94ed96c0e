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

}  // namespace
}  // namespace superserve
