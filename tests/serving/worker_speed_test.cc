#include "serving/worker_speed.h"

#include "gtest/gtest.h"

namespace superserve {
namespace {

TEST(WorkerSpeedTest, OneUntilEnoughSamplesThenFollowsAStraggler) {
  WorkerSpeed s;
  for (int i = 0; i < 3; ++i) s.Record(Millis(3), Millis(1));
  EXPECT_EQ(s.factor(), 1.0) << "3 samples: not yet";
  for (int i = 0; i < 20; ++i) s.Record(Millis(3), Millis(1));
  EXPECT_NEAR(s.factor(), 3.0, 0.05);
}

TEST(WorkerSpeedTest, OneStallMovesTheEstimateByABoundedStep) {
  WorkerSpeed s;
  for (int i = 0; i < 20; ++i) s.Record(Millis(1), Millis(1));
  ASSERT_NEAR(s.factor(), 1.0, 1e-9);
  s.Record(Millis(90), Millis(1));  // a 90x hiccup
  // Clipped to 2x, weighted 0.25: at most 2^0.25 = 1.19.
  EXPECT_LE(s.factor(), 1.19);
  EXPECT_GT(s.factor(), 1.0);
  for (int i = 0; i < 20; ++i) s.Record(Millis(1), Millis(1));
  EXPECT_NEAR(s.factor(), 1.0, 0.01) << "and it comes back";
}

TEST(WorkerSpeedTest, IgnoresNonPositiveSamples) {
  WorkerSpeed s;
  for (int i = 0; i < 10; ++i) s.Record(0, Millis(1));
  for (int i = 0; i < 10; ++i) s.Record(Millis(1), 0);
  EXPECT_EQ(s.samples(), 0);
  EXPECT_EQ(s.factor(), 1.0);
}

TEST(WorkerSpeedTest, RelativeToTheLowerMedianWithADeadband) {
  EXPECT_EQ(LowerMedian({}), 1.0);
  EXPECT_EQ(LowerMedian({1.0, 3.0}), 1.0) << "one straggler of two: the normal one is the fleet";
  EXPECT_EQ(LowerMedian({3.0, 1.1, 0.9}), 1.1);
  EXPECT_EQ(RelativeSpeed(3.0, 1.0), 3.0);
  EXPECT_EQ(RelativeSpeed(1.2, 1.0), 1.0) << "within the deadband";
  EXPECT_EQ(RelativeSpeed(0.85, 1.0), 1.0);
  EXPECT_NEAR(RelativeSpeed(0.5, 1.0), 0.5, 1e-12);
  EXPECT_NEAR(RelativeSpeed(3.0, 1.5), 2.0, 1e-12) << "a fleet slower than its profile";
  EXPECT_EQ(RelativeSpeed(3.0, 0.0), 1.0);
}

// The profiled latency a batch's measured time is divided by: its subnet
// and batch size in the profile, 0 where the profile has none.
TEST(WorkerSpeedTest, ProfiledLatencyOfABatch) {
  ModelProfile p;
  p.batch_sizes = {1, 2, 4};
  SubnetProfile fast, slow;
  fast.latency = {Millis(1), Millis(2), Millis(3)};
  slow.latency = {Millis(4), Millis(5), Millis(6)};
  p.subnets = {fast, slow};
  EXPECT_EQ(ProfiledLatency(p, 1, 2), Millis(5));
  EXPECT_EQ(ProfiledLatency(p, 0, 4), Millis(3));
  EXPECT_EQ(ProfiledLatency(p, 0, 3), 0) << "a batch size the profile does not list";
  EXPECT_EQ(ProfiledLatency(p, -1, 1), 0) << "a dynamic model's batch: no subnet";
  EXPECT_EQ(ProfiledLatency(p, 2, 1), 0) << "no such subnet";
}

}  // namespace
}  // namespace superserve
