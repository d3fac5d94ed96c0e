#include "policies/latency_table.h"

#include "gtest/gtest.h"
#include "policies/arrival_rate.h"
#include "policies/rolling_percentile.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

TEST(LatencyTableTest, RanksByAccuracyAndSearchesExactly) {
  // Subnet indices deliberately out of accuracy order; the middle one is
  // slower than the most accurate at batch 1 (not monotone).
  ModelProfile p = testing::HandProfile({1, 2, 4}, {80, 70, 75},
                                        {{3, 5, 9}, {1, 2, 4}, {4, 6, 10}});
  LatencyTable t(p);
  EXPECT_EQ(t.subnet_index(0), 1);
  EXPECT_EQ(t.subnet_index(2), 0);
  EXPECT_EQ(t.rank_of_subnet(0), 2);
  EXPECT_EQ(t.min_latency(), Millis(1));
  EXPECT_EQ(t.max_latency(), Millis(10));
  EXPECT_EQ(t.HighestRankWithin(0, Millis(3)), 2);    // 80 % fits at 3 ms
  EXPECT_EQ(t.HighestRankWithin(0, Millis(2.9)), 0);  // 75 % (4 ms) does not
  EXPECT_EQ(t.HighestRankWithin(0, Micros(900)), -1);
  EXPECT_EQ(t.LargestBatchWithin(2, Millis(6)), 1);
  EXPECT_EQ(t.LargestBatchWithin(2, Millis(2)), -1);
  EXPECT_EQ(t.BatchIndexFor(3), 2);
  EXPECT_EQ(t.BatchIndexFor(1), 0);
  EXPECT_EQ(t.BatchIndexFor(2), 1);
}

TEST(LatencyTableTest, RollingHighPercentileReplacesProfileAfterEnoughSamples) {
  ModelProfile p = testing::ThreeSubnetProfile();
  LatencyTable::Options o;
  o.window = 32;
  o.min_samples = 8;
  o.quantile = 0.9;
  LatencyTable t(p, o);
  uint64_t v0 = t.version();
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(t.Record(0, 0, Millis(2)));
  EXPECT_EQ(t.latency(0, 0), Millis(1));  // not enough samples yet
  EXPECT_TRUE(t.Record(0, 0, Millis(2)));
  EXPECT_EQ(t.latency(0, 0), Millis(2));
  EXPECT_GT(t.version(), v0);
  // Drift back down: after the window scrolls, the estimate follows.
  for (int i = 0; i < 32; ++i) t.Record(0, 0, Millis(1.5));
  EXPECT_EQ(t.latency(0, 0), Millis(1.5));
  EXPECT_FALSE(t.Record(7, 0, Millis(1)));  // unknown subnet index: ignored
}

TEST(LatencyTableTest, UnmeasuredTuplesFollowTheMedianMeasuredDrift) {
  ModelProfile p = testing::ThreeSubnetProfile();
  for (bool follow : {true, false}) {
    LatencyTable::Options o;
    o.min_samples = 4;
    o.unmeasured_margin = 0.06;  // until anything is measured
    o.unmeasured_follow_drift = follow;
    LatencyTable t(p, o);
    EXPECT_EQ(t.latency(2, 3), Micros(18 * 1060));
    // Three measured tuples run 1.2x, 1.5x and 2x their profile.
    for (int i = 0; i < 4; ++i) {
      t.Record(0, 0, Micros(1200));   // (70 %, 1): 1 ms -> 1.2 ms
      t.Record(1, 1, Micros(4500));   // (75 %, 2): 3 ms -> 4.5 ms
      t.Record(2, 2, Millis(20));     // (80 %, 4): 10 ms -> 20 ms
    }
    EXPECT_EQ(t.latency(0, 0), Micros(1200));
    EXPECT_EQ(t.latency(2, 2), Millis(20));
    // Unmeasured (80 %, 8): 18 ms x the median ratio 1.5, or x 1.06 without.
    EXPECT_EQ(t.latency(2, 3), follow ? Millis(27) : Micros(18 * 1060));
    EXPECT_EQ(t.max_latency(), follow ? Millis(27) : Millis(20));
  }
}

TEST(RollingPercentileTest, HighPercentileOfWindow) {
  RollingPercentile r(100, 0.99);
  for (int i = 1; i <= 100; ++i) r.Add(i);
  EXPECT_EQ(r.value(), 99);
  for (int i = 0; i < 100; ++i) r.Add(5);  // old samples scroll out
  EXPECT_EQ(r.value(), 5);
}

TEST(ArrivalRateEstimatorTest, CountsArrivalsInWindow) {
  ArrivalRateEstimator e(Millis(100));
  for (int i = 0; i < 1000; ++i) e.Add(Micros(100) * i);  // 10k q/s for 100 ms
  EXPECT_NEAR(e.Rate(Micros(100) * 999), 10000, 200);
  EXPECT_EQ(e.Rate(Seconds(10)), 0);  // everything expired
}

}  // namespace
}  // namespace superserve
