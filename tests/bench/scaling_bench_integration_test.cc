// `superserve-bench scaling` end to end on a tiny fleet (1 and 2 emulated
// workers, short probes): the JSON's fields are there and consistent, and two
// workers serve more than one.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/subprocess.h"

namespace superserve {
namespace {

std::string BinDir() {
  const char* v = std::getenv("SUPERSERVE_BIN_DIR");
  return v != nullptr ? v : SUPERSERVE_TEST_BIN_DIR;
}

std::string LastLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

double Num(const google::protobuf::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << "missing field " << key;
  return it == s.fields().end() ? -1 : it->second.number_value();
}

TEST(ScalingBenchTest, ProbesOneAndTwoWorkersAndTheJsonAddsUp) {
  std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                    "/superserve-scaling-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  // Through sh for stdout (the JSON) and stderr (progress) in separate files.
  auto p = Subprocess::Start({"/bin/sh", "-c",
                              "exec '" + BinDir() +
                                  "/superserve-bench' scaling --json --max_workers=2 --probe_s=0.5 "
                                  "--probes=4 --out_dir='" +
                                  dir + "' >'" + dir + "/stdout.txt' 2>'" + dir + "/stderr.txt'"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto status = p->Wait(Seconds(60));
  ASSERT_TRUE(status.has_value()) << "superserve-bench scaling did not exit";
  std::stringstream out, err;
  out << std::ifstream(dir + "/stdout.txt").rdbuf();
  err << std::ifstream(dir + "/stderr.txt").rdbuf();
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out.str() << err.str();
  // A progress line per point on stderr.
  EXPECT_NE(err.str().find("scaling: N=1 workers"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("scaling: N=2 workers"), std::string::npos) << err.str();

  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(LastLine(out.str()), &json).ok())
      << out.str();
  EXPECT_EQ(json.fields().at("benchmark").string_value(), "scaling");
  const double rate1 = Num(json, "max_qps_1");
  const double rate2 = Num(json, "max_qps");
  // Rates only as the JSON's own arithmetic: whether 2 workers beat 1 on
  // this host is what the benchmark measures, not what a test may assert.
  EXPECT_GT(rate1, 0);
  EXPECT_GT(rate2, 0);
  // One worker cannot serve more than its emulated capacity.
  EXPECT_LE(rate1, Num(json, "worker_capacity_qps"));
  // JsonWriter prints 10 significant digits.
  EXPECT_NEAR(Num(json, "ideal_qps"), 2 * rate1, 1e-6 * rate1);
  EXPECT_NEAR(Num(json, "ratio_vs_ideal"), rate2 / (2 * rate1), 1e-6);
  const auto& points = json.fields().at("points").list_value().values();
  ASSERT_EQ(points.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto& pt = points[i].struct_value();
    EXPECT_EQ(Num(pt, "workers"), 1 << i);
    EXPECT_GE(Num(pt, "slo_attainment"), 0.999);
    EXPECT_NEAR(Num(pt, "efficiency"), Num(pt, "max_qps") / ((1 << i) * rate1), 1e-6);
    // The CPU times were read from /proc (-1 = not measured). A short probe
    // may use less than one 10-ms clock tick, so 0 is a valid reading.
    EXPECT_GE(Num(pt, "router_cpu_us_per_query"), 0);
    EXPECT_GE(Num(pt, "loadgen_cpu_us_per_query"), 0);
    EXPECT_GE(Num(pt, "worker_cpu_us_per_query"), 0);
    EXPECT_GE(Num(pt, "router_cores"), 0);
    EXPECT_GE(Num(pt, "machine_busy_cores"), 0);
    // Batches of the scaling model's sizes (1, 2, 4).
    EXPECT_GE(Num(pt, "mean_batch"), 1);
    EXPECT_LE(Num(pt, "mean_batch"), 4);
  }
  // --out_dir got the files the plot script reads.
  std::ifstream csv(dir + "/scaling.csv");
  std::string header;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_EQ(header.rfind("workers,routers,max_qps,ideal_qps,efficiency", 0), 0u) << header;
  EXPECT_TRUE(std::ifstream(dir + "/scaling.json").good());
  std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
}  // namespace superserve
