// ListModels' per-model summary, from the profile and the counts the core
// hands in: a subnet model's accuracy and latency range, a dynamic model's
// applications, exits and execution-time range.
#include "serving/model_summary.h"

#include <memory>

#include "gtest/gtest.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

TEST(ModelSummaryTest, SubnetModelInBrief) {
  // Subnets 70/75/80 % at 1/2/4 ms for batch 1 (ThreeSubnetProfile).
  ServedModel m(7, 3, testing::ThreeSubnetProfile(), std::make_unique<testing::IdlePolicy>());
  m.scheduler.AddWorker(0);
  m.scheduler.AddWorker(2);
  m.closed = true;
  const ModelSummary s = SummarizeModel(m, /*inflight_batches=*/5);
  EXPECT_EQ(s.name, "hand");
  EXPECT_EQ(s.version, 3);
  EXPECT_EQ(s.num_subnets, 3);
  EXPECT_DOUBLE_EQ(s.min_accuracy, 70);
  EXPECT_DOUBLE_EQ(s.max_accuracy, 80);
  EXPECT_DOUBLE_EQ(s.min_latency_us, 1000);
  EXPECT_DOUBLE_EQ(s.max_latency_us, 4000);
  EXPECT_EQ(s.batch_sizes, (std::vector<int32_t>{1, 2, 4, 8}));
  EXPECT_EQ(s.workers, 2);
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.inflight_batches, 5);
  EXPECT_TRUE(s.closed);
  EXPECT_FALSE(s.dynamic);
  EXPECT_TRUE(s.applications.empty());
}

TEST(ModelSummaryTest, DynamicModelInBrief) {
  ModelProfile p = testing::DynamicProfile(100, 1.0, {1, 2}, {{"a", 200, 300}, {"b", 50, 120}});
  p.dynamic.applications[0].exit_accuracy = {60, 90, 95};
  p.dynamic.applications[1].exit_accuracy = {55, 85};
  ServedModel m(1, 1, p, std::make_unique<testing::IdlePolicy>());
  ModelSummary s = SummarizeModel(m, 0);
  EXPECT_TRUE(s.dynamic);
  EXPECT_EQ(s.num_subnets, 0);
  EXPECT_EQ(s.applications, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.num_exits, 3);
  EXPECT_DOUBLE_EQ(s.min_exit_accuracy, 55) << "every application's exits, none measured overall";
  EXPECT_DOUBLE_EQ(s.max_exit_accuracy, 95);
  EXPECT_DOUBLE_EQ(s.min_exec_us, 50);
  EXPECT_DOUBLE_EQ(s.max_exec_us, 300);

  p.dynamic.exit_accuracy = {70, 88, 93, 96};  // measured over the whole test set
  ServedModel measured(2, 1, p, std::make_unique<testing::IdlePolicy>());
  s = SummarizeModel(measured, 0);
  EXPECT_EQ(s.num_exits, 4);
  EXPECT_DOUBLE_EQ(s.min_exit_accuracy, 70) << "the model's figures when measured";
  EXPECT_DOUBLE_EQ(s.max_exit_accuracy, 96);
}

}  // namespace
}  // namespace superserve
