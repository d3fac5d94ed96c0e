// The emulated executor on a dynamic model: per-query times drawn from the
// query's application histogram (seeded), the batch sleeping
// c0 + c1·k·max(l), and RunBatch putting each query's times on the wire.
#include <gtest/gtest.h>

#include <vector>

#include "common/clock.h"
#include "common/tensor_codec.h"
#include "superserve/v1/tensor.pb.h"
#include "worker/batch_runner.h"
#include "worker/emulated_executor.h"

namespace superserve {
namespace {

ModelEntry DynamicEntry() {
  ModelEntry e;
  e.name = "dyn";
  e.profile.model = "dyn";
  e.profile.family = "early_exit";
  e.profile.batch_sizes = {1, 2, 4};
  e.profile.num_classes = 4;
  e.profile.input_shape = {2};
  e.profile.is_dynamic = true;
  e.profile.dynamic.batch_overhead_us = 1000;
  e.profile.dynamic.per_request_factor = 0.5;
  // easy: 100-200 us; hard: 3000-4000 us (one bin each).
  e.profile.dynamic.applications = {{"easy", {100, 200}, {1}}, {"hard", {3000, 4000}, {1}}};
  return e;
}

TEST(EmulatedDynamicTest, DrawsEachQueryFromItsApplicationAndSleepsTheSlowest) {
  EmulatedExecutor ex(/*slowdown=*/1.0, /*seed=*/7);
  ASSERT_TRUE(ex.Load(DynamicEntry()).ok());
  v1::Tensor x;
  EncodeTensor(MakeFloatTensor({2}, std::vector<float>{1, 2}), &x);
  const std::string easy = "easy", hard = "hard", unknown = "other";
  std::vector<const v1::Tensor*> in = {&x, &x, &x};
  std::vector<const std::string*> apps = {&easy, &hard, &unknown};
  std::vector<QueryExit> exits;
  Nanos t0 = RealClock::Get()->Now();
  auto out = ex.RunWithExits("dyn", ControlTuple(), in, apps, &exits);
  Nanos took = RealClock::Get()->Now() - t0;
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_GE(exits[0].own, Micros(100));
  EXPECT_LE(exits[0].own, Micros(200));
  EXPECT_GE(exits[1].own, Micros(3000));
  EXPECT_LE(exits[1].own, Micros(4000));
  // An unknown application draws from the mixture: one of the two bins.
  const bool in_easy = exits[2].own >= Micros(100) && exits[2].own <= Micros(200);
  const bool in_hard = exits[2].own >= Micros(3000) && exits[2].own <= Micros(4000);
  EXPECT_TRUE(in_easy || in_hard) << exits[2].own;
  // Each query leaves at c0 + c1·k·l; the batch sleeps for its slowest.
  Nanos slowest = 0;
  for (const QueryExit& e : exits) {
    EXPECT_EQ(e.exit, -1) << "emulation knows no exit";
    EXPECT_NEAR(ToMicros(e.at), 1000 + 0.5 * 3 * ToMicros(e.own), 1);
    slowest = std::max(slowest, e.at);
  }
  EXPECT_GE(took, slowest);

  // Seeded: a second executor with the same seed draws the same times.
  EmulatedExecutor again(/*slowdown=*/1.0, /*seed=*/7);
  ASSERT_TRUE(again.Load(DynamicEntry()).ok());
  std::vector<QueryExit> exits2;
  ASSERT_TRUE(again.RunWithExits("dyn", ControlTuple(), in, apps, &exits2).ok());
  for (size_t i = 0; i < exits.size(); ++i) EXPECT_EQ(exits[i].own, exits2[i].own);
}

// Load-adaptive exits: the batch's threshold picks that threshold's
// histograms; one the profile did not measure is refused.
TEST(EmulatedDynamicTest, TheBatchsExitThresholdPicksItsHistograms) {
  ModelEntry e = DynamicEntry();
  e.profile.dynamic.default_threshold = 0.9;
  e.profile.dynamic.thresholds = {{0.6, 80, {{"easy", {10, 20}, {1}}, {"hard", {30, 40}, {1}}}},
                                  {0.9, 90, e.profile.dynamic.applications}};
  EmulatedExecutor ex(/*slowdown=*/1.0, /*seed=*/7);
  ASSERT_TRUE(ex.Load(e).ok());
  v1::Tensor x;
  EncodeTensor(MakeFloatTensor({2}, std::vector<float>{1, 2}), &x);
  const std::string hard = "hard";
  std::vector<const v1::Tensor*> in = {&x};
  std::vector<const std::string*> apps = {&hard};
  ControlTuple low;
  low.exit_threshold = 0.6f;
  std::vector<QueryExit> exits;
  ASSERT_TRUE(ex.RunWithExits("dyn", low, in, apps, &exits).ok());
  EXPECT_GE(exits[0].own, Micros(30));
  EXPECT_LE(exits[0].own, Micros(40));
  ASSERT_TRUE(ex.RunWithExits("dyn", ControlTuple(), in, apps, &exits).ok());
  EXPECT_GE(exits[0].own, Micros(3000)) << "0: the default's";
  ControlTuple unknown;
  unknown.exit_threshold = 0.7f;
  EXPECT_EQ(ex.RunWithExits("dyn", unknown, in, apps, &exits).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EmulatedDynamicTest, RunBatchReportsPerQueryTimesOnTheWire) {
  EmulatedExecutor ex;
  std::vector<ModelEntry> models = {DynamicEntry()};
  ASSERT_TRUE(ex.Load(models[0]).ok());
  v1::Batch b;
  b.set_batch_id(5);
  b.set_model("dyn");
  for (int i = 0; i < 2; ++i) {
    v1::BatchQuery* q = b.add_queries();
    q->set_query_id(10 + i);
    q->set_application(i == 0 ? "easy" : "hard");
    EncodeTensor(MakeFloatTensor({2}, std::vector<float>{1, 2}), q->mutable_input());
  }
  v1::BatchResult r;
  RunBatch(b, RealClock::Get()->Now(), models, &ex, &r);
  ASSERT_TRUE(r.error().empty()) << r.error();
  ASSERT_EQ(r.results_size(), 2);
  EXPECT_EQ(r.results(0).exit(), 0) << "unknown exit is 0 on the wire";
  EXPECT_GE(r.results(0).own_us(), 100);
  EXPECT_LE(r.results(0).own_us(), 200);
  EXPECT_GE(r.results(1).own_us(), 3000);
  EXPECT_LE(r.results(1).own_us(), 4000);
  EXPECT_GE(r.results(1).exit_us(), r.results(0).exit_us()) << "the hard one left last";
  EXPECT_GE(r.exec_us(), r.results(1).exit_us());
}

TEST(EmulatedDynamicTest, StaticModelsReportNoExits) {
  EmulatedExecutor ex;
  ModelEntry e;
  e.name = "m";
  e.profile.model = "m";
  e.profile.batch_sizes = {1};
  e.profile.num_classes = 2;
  SubnetProfile s;
  s.id = 1;
  s.latency = {Micros(100)};
  e.profile.subnets.push_back(s);
  ASSERT_TRUE(ex.Load(e).ok());
  v1::Tensor x;
  EncodeTensor(MakeFloatTensor({1}, std::vector<float>{1}), &x);
  std::vector<const v1::Tensor*> in = {&x};
  ControlTuple c;
  c.subnet_id = 1;
  std::vector<QueryExit> exits = {QueryExit{}};
  ASSERT_TRUE(ex.RunWithExits("m", c, in, {}, &exits).ok());
  EXPECT_TRUE(exits.empty());
}

}  // namespace
}  // namespace superserve
