// What an answer says served its query: a subnet model's subnet, and an
// early-exit model's threshold, exit and that exit's accuracy (at the
// batch's threshold, the application's figure first; an unreported exit:
// the application's expected accuracy).
#include "serving/served_by.h"

#include "gtest/gtest.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

TEST(ServedByTest, ASubnetModelNamesItsSubnet) {
  const ModelProfile p = testing::ThreeSubnetProfile();  // ids 100..102, 70/75/80 %
  QueryAnswer a;
  DescribeServed(p, 2, -1, "app", 3, &a);
  EXPECT_EQ(a.subnet_id, 102);
  EXPECT_DOUBLE_EQ(a.accuracy, 80);
  EXPECT_EQ(a.exit, -1) << "no exits: a reported one is not an answer's";
  EXPECT_DOUBLE_EQ(a.exit_threshold, 0);
}

TEST(ServedByTest, AnEarlyExitModelNamesThresholdExitAndItsAccuracy) {
  ModelProfile p = testing::DynamicProfile(100, 1.0, {1, 2}, {{"a", 200, 300}, {"b", 50, 120}});
  DynamicModelProfile& d = p.dynamic;
  d.default_threshold = 0.8;
  d.exit_accuracy = {50, 70, 90};  // the model's, over the whole test set
  d.applications[0].exit_accuracy = {60, 80, 95};
  d.applications[0].accuracy = 88;
  ExitThresholdProfile low;  // threshold index 0
  low.threshold = 0.5;
  low.accuracy = 75;
  low.applications = d.applications;
  low.applications[0].exit_accuracy = {40, 65, 85};
  low.applications[0].accuracy = 70;
  ExitThresholdProfile high = low;  // index 1: the default
  high.threshold = 0.8;
  high.accuracy = 86;
  high.applications = d.applications;
  d.thresholds = {low, high};

  QueryAnswer a;
  DescribeServed(p, -1, -1, "a", 1, &a);
  EXPECT_EQ(a.subnet_id, -1);
  EXPECT_DOUBLE_EQ(a.exit_threshold, 0.8) << "the model's default";
  EXPECT_EQ(a.exit, 1);
  EXPECT_DOUBLE_EQ(a.accuracy, 80) << "the application's exit 1";

  DescribeServed(p, -1, 0, "a", 1, &a);
  EXPECT_DOUBLE_EQ(a.exit_threshold, 0.5);
  EXPECT_DOUBLE_EQ(a.accuracy, 65) << "exit 1 at the batch's threshold";

  DescribeServed(p, -1, 0, "b", 2, &a);
  EXPECT_DOUBLE_EQ(a.accuracy, 90) << "b has no exit figures: the model's";

  DescribeServed(p, -1, 0, "a", -1, &a);
  EXPECT_EQ(a.exit, -1);
  EXPECT_DOUBLE_EQ(a.accuracy, 70) << "exit not reported: a's expected accuracy there";
  DescribeServed(p, -1, 1, "b", -1, &a);
  EXPECT_DOUBLE_EQ(a.accuracy, 86) << "b's not measured: the threshold's own";
}

}  // namespace
}  // namespace superserve
