#include "policies/latency_table.h"

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

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

TEST(LatencyTableTest, LargestBatchWithinMatchesALinearScanOnRandomRows) {
  // Rows deliberately not monotonic in batch size (measured corrections can
  // make them so): the binary search over the suffix minimum must agree with
  // the scan from the largest batch down.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ms(0.5, 20.0);
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<int32_t> batches = {1, 2, 4, 8, 16, 32, 64};
    std::vector<double> acc;
    std::vector<std::vector<double>> lat;
    for (int s = 0; s < 4; ++s) {
      acc.push_back(70 + s);
      std::vector<double> row;
      for (size_t b = 0; b < batches.size(); ++b) row.push_back(ms(rng));
      lat.push_back(row);
    }
    LatencyTable t(testing::HandProfile(batches, acc, lat));
    for (int rank = 0; rank < t.num_subnets(); ++rank) {
      for (double budget_ms = 0.25; budget_ms < 21; budget_ms += 0.25) {
        const Nanos budget = Micros(budget_ms * 1000);
        int expected = -1;
        for (int b = t.num_batches() - 1; b >= 0; --b) {
          if (t.latency(rank, b) <= budget) {
            expected = b;
            break;
          }
        }
        ASSERT_EQ(t.LargestBatchWithin(rank, budget), expected)
            << "trial " << trial << " rank " << rank << " budget " << budget_ms << " ms";
      }
    }
  }
}

TEST(LatencyTableTest, RollingHighPercentileReplacesProfileAfterEnoughSamples) {
  ModelProfile p = testing::ThreeSubnetProfile();
  LatencyTable::Options o;
  o.window = 32;
  o.min_samples = 8;
  o.quantile = 0.9;
  o.unmeasured_follow_drift = false;  // this tuple alone
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

TEST(LatencyTableTest, OneStalledTupleDoesNotScaleTheOthers) {
  // Early in a run: the first measured tuple's p99 is one stalled batch
  // (90x its profile). The drift waits for drift_min_tuples (2) measured
  // tuples, so the unmeasured ones keep their profiled latency; then the
  // lower median ignores the stall.
  ModelProfile p = testing::ThreeSubnetProfile();
  LatencyTable::Options o;
  o.min_samples = 4;
  LatencyTable t(p, o);
  ASSERT_TRUE(o.unmeasured_follow_drift) << "the default";
  ASSERT_EQ(o.drift_min_tuples, 2u);
  for (int i = 0; i < 3; ++i) t.Record(0, 0, Millis(1));
  t.Record(0, 0, Millis(90));  // (70 %, 1): 1 ms, one batch stalled
  EXPECT_EQ(t.latency(0, 0), Millis(90));
  EXPECT_EQ(t.latency(2, 3), Millis(18)) << "one measured tuple: no drift";
  for (int i = 0; i < 4; ++i) t.Record(1, 1, Micros(4200));  // (75 %, 2): 3 ms -> 4.2 ms
  // Ratios 90 and 1.4: the lower median 1.4 scales (80 %, 8)'s 18 ms.
  EXPECT_EQ(t.latency(2, 3), Micros(25200));
  for (int i = 0; i < 4; ++i) t.Record(2, 2, Millis(15));  // (80 %, 4): 10 ms -> 15 ms
  // Ratios 90, 1.4, 1.5: the median 1.5.
  EXPECT_EQ(t.latency(2, 3), Millis(27));
  EXPECT_EQ(t.min_latency(), Micros(2250)) << "(70 %, 2) follows too: 1.5 ms x 1.5";
}

TEST(LatencyTableTest, TheDriftStartsFromTuplesWithFourSamples) {
  // A host 2x slower than the profile, right after start: two tuples have 4
  // samples each, none has the 16 that move its own estimate, and every
  // tuple already follows their drift (p99s, not the start-up median).
  ModelProfile p = testing::ThreeSubnetProfile();
  LatencyTable::Options o;  // the defaults: 16 samples, drift from 4, 2 tuples
  o.startup_drift = false;  // the tuple rule alone
  LatencyTable t(p, o);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(t.Record(0, 0, Millis(2)));
    EXPECT_FALSE(t.Record(1, 1, Millis(6)));
  }
  EXPECT_EQ(t.latency(2, 3), Millis(18));
  t.Record(0, 0, Millis(2));
  EXPECT_EQ(t.latency(2, 3), Millis(18)) << "one tuple with 4 samples: no drift yet";
  EXPECT_TRUE(t.Record(1, 1, Micros(6600)));
  EXPECT_EQ(t.latency(2, 3), Millis(36)) << "ratios 2 and 2.2 (p99s): the lower median";
  EXPECT_EQ(t.latency(0, 0), Millis(2)) << "the early tuples follow it too";
}

TEST(LatencyTableTest, BeforeTwoTuplesQualifyEveryBatchCountsTowardsTheDrift) {
  // Traffic at start spreads over tuples: four batches on four different
  // tuples, each 2x-3x its profile, and no tuple has 4 samples.
  ModelProfile p = testing::ThreeSubnetProfile();
  LatencyTable t(p);
  ASSERT_TRUE(LatencyTable::Options().startup_drift) << "the default";
  EXPECT_FALSE(t.Record(0, 0, Millis(2)));     // (70 %, 1): 1 ms, ratio 2
  EXPECT_FALSE(t.Record(1, 1, Millis(9)));     // (75 %, 2): 3 ms, ratio 3
  EXPECT_FALSE(t.Record(2, 2, Millis(25)));    // (80 %, 4): 10 ms, ratio 2.5
  EXPECT_EQ(t.latency(2, 3), Millis(18)) << "three batches: no drift yet";
  EXPECT_TRUE(t.Record(0, 1, Micros(3300)));  // (70 %, 2): 1.5 ms, ratio 2.2
  // Ratios 2, 2.2, 2.5, 3: the lower median 2.2 scales every tuple.
  EXPECT_EQ(t.latency(2, 3), Micros(39600));
  EXPECT_EQ(t.latency(0, 0), Micros(2200));
  // One stalled batch among them does not move the lower median much.
  EXPECT_TRUE(t.Record(1, 0, Millis(200)));   // (75 %, 1): 2 ms, ratio 100
  EXPECT_EQ(t.latency(2, 3), Millis(45)) << "ratios 2, 2.2, 2.5, 3, 100: median 2.5";
  // Once two tuples have 4 samples, their p99s take over.
  for (int i = 0; i < 3; ++i) t.Record(0, 0, Micros(1600));  // p99 of (0,0): 2 ms
  for (int i = 0; i < 3; ++i) t.Record(1, 1, Micros(4800));  // p99 of (1,1): 9 ms
  // Tuple ratios 2 and 3 (p99 = the largest of 4): the lower median 2.
  EXPECT_EQ(t.latency(2, 3), Millis(36));
}

TEST(LatencyTableTest, StartUpBatchesOnAProfiledHostLeaveTheProfile) {
  // Noise within the deadband, and one stall: the profile stands.
  ModelProfile p = testing::ThreeSubnetProfile();
  LatencyTable::Options o;
  o.unmeasured_margin = 0.06;
  LatencyTable t(p, o);
  EXPECT_FALSE(t.Record(0, 0, Micros(1050)));
  EXPECT_FALSE(t.Record(1, 1, Micros(2900)));
  EXPECT_FALSE(t.Record(2, 2, Millis(90)));  // stalled
  EXPECT_FALSE(t.Record(0, 1, Micros(1600)));
  EXPECT_FALSE(t.Record(2, 0, Micros(5200)));
  EXPECT_EQ(t.latency(2, 3), Micros(18 * 1060));
}

TEST(LatencyTableTest, ADriftWithinTheDeadbandLeavesTheProfile) {
  ModelProfile p = testing::ThreeSubnetProfile();
  LatencyTable::Options o;
  o.min_samples = 4;
  o.unmeasured_margin = 0.06;
  LatencyTable t(p, o);
  // Noise: three tuples' p99s 1.05x, 1.08x and 1.06x their profile (< 1.1).
  for (int i = 0; i < 4; ++i) {
    t.Record(0, 0, Micros(1050));
    t.Record(1, 1, Micros(3240));
    t.Record(2, 2, Micros(10600));
  }
  EXPECT_EQ(t.latency(2, 3), Micros(18 * 1060)) << "the profile and its margin stand";
  // The host slows down: (80 %, 4) now at 2x, (75 %, 2) at 1.6x: median 1.6.
  for (int i = 0; i < 64; ++i) {
    t.Record(1, 1, Micros(4800));
    t.Record(2, 2, Millis(20));
  }
  EXPECT_EQ(t.latency(2, 3), Micros(28800));
  // And recovers: back inside the band, the profile stands again.
  for (int i = 0; i < 64; ++i) {
    t.Record(1, 1, Micros(3150));
    t.Record(2, 2, Micros(10500));
  }
  EXPECT_EQ(t.latency(2, 3), Micros(18 * 1060));
}

// Two subnets 2 % apart at batch 8; the faster one measured with a p99 7 %
// above its profile (noise), the other not measured.
TEST(LatencyTableTest, ComparableLatencyPutsMeasuredAndUnmeasuredTuplesOnOneFooting) {
  ModelProfile p =
      testing::HandProfile({1, 2, 4, 8}, {70, 71}, {{1, 1.5, 2.5, 4.5}, {1, 1.5, 2.5, 4.6}});
  LatencyTable t(p);
  for (int i = 0; i < 16; ++i) {
    t.Record(0, 2, Micros(2675));
    t.Record(0, 3, Micros(4815));
  }
  // By the estimates the unmeasured subnet looks the faster...
  EXPECT_EQ(t.latency(0, 3), Micros(4815));
  EXPECT_EQ(t.latency(1, 3), Micros(4600)) << "inside the deadband the profile stands";
  // ...on one footing (the profile times the measured drift, 1.07) it is not.
  EXPECT_EQ(t.ComparableLatency(0, 3), Micros(4815));
  EXPECT_NEAR(static_cast<double>(t.ComparableLatency(1, 3)), 4600e3 * 1.07, 1e3);
  // A measurement beyond the deadband of the drift is no noise: it stands.
  for (int i = 0; i < 64; ++i) t.Record(1, 3, Micros(9200));
  EXPECT_EQ(t.ComparableLatency(1, 3), Micros(9200));
}

TEST(LatencyTableTest, TypicalLatencyIsTheComparableOneOnTheFootingOfAMedian) {
  ModelProfile p = testing::HandProfile({1, 2}, {70, 71}, {{1, 2}, {1, 2}});
  LatencyTable t(p);
  EXPECT_EQ(t.TypicalLatency(1, 1), Millis(2)) << "nothing measured: the profile";
  // (70 %, 1): 10 runs of 1 ms, 6 of 1.2 ms (median 1, p99 1.2: 0.833);
  // (71 %, 2): 10 of 2 ms, 6 of 2.2 ms (0.909). The lower median is 0.833.
  for (int i = 0; i < 16; ++i) t.Record(t.subnet_index(0), 0, Micros(i < 10 ? 1000 : 1200));
  EXPECT_EQ(t.TypicalLatency(1, 1), t.ComparableLatency(1, 1)) << "one tuple: no ratio yet";
  for (int i = 0; i < 16; ++i) t.Record(t.subnet_index(1), 1, Micros(i < 10 ? 2000 : 2200));
  // On one footing the drift is the lower median of the p99s' ratios, 1.1:
  // (71 %, 1) is 1.1 ms comparable, 1.1 / 1.2 = 0.917 ms typical.
  EXPECT_EQ(t.ComparableLatency(1, 0), Micros(1100));
  EXPECT_NEAR(static_cast<double>(t.TypicalLatency(1, 0)), 1100e3 / 1.2, 1e3);
  EXPECT_NEAR(static_cast<double>(t.TypicalLatency(0, 1)), 2200e3 / 1.2, 1e3);
  // Runs without noise: typical and comparable agree.
  for (int i = 0; i < 64; ++i) {
    t.Record(t.subnet_index(0), 0, Micros(1000));
    t.Record(t.subnet_index(1), 1, Micros(2000));
  }
  EXPECT_EQ(t.TypicalLatency(1, 0), t.ComparableLatency(1, 0));
  EXPECT_EQ(t.TypicalLatency(1, 0), Millis(1));
}

TEST(RollingPercentileTest, HighPercentileOfWindow) {
  RollingPercentile r(100, 0.99);
  for (int i = 1; i <= 100; ++i) r.Add(i);
  EXPECT_EQ(r.value(), 99);
  for (int i = 0; i < 100; ++i) r.Add(5);  // old samples scroll out
  EXPECT_EQ(r.value(), 5);
}

// Against a sort of the window, with duplicates, windows of 1 to 64 and a
// stride: the value is the percentile of the window at the last recompute.
TEST(RollingPercentileTest, MatchesASortOfTheWindowAtEachRecompute) {
  std::mt19937_64 rng(7);
  for (size_t window : {1, 2, 7, 64}) {
    for (size_t stride : {1, 16}) {
      for (double q : {0.0, 0.5, 0.99, 1.0}) {
        RollingPercentile r(window, q, stride);
        std::deque<Nanos> last;
        Nanos expected = 0;
        size_t since = 0;
        for (int i = 0; i < 500; ++i) {
          const Nanos v = static_cast<Nanos>(rng() % 20);  // many ties
          r.Add(v);
          last.push_back(v);
          if (last.size() > window) last.pop_front();
          if (last.size() < window || ++since >= stride) {
            since = 0;
            std::vector<Nanos> sorted(last.begin(), last.end());
            std::sort(sorted.begin(), sorted.end());
            expected = sorted[static_cast<size_t>(
                q * static_cast<double>(sorted.size() - 1) + 0.5)];
          }
          ASSERT_EQ(r.value(), expected) << "window " << window << " stride " << stride
                                         << " q " << q << " sample " << i;
          // Any other quantile, of the window as it is now.
          std::vector<Nanos> now(last.begin(), last.end());
          std::sort(now.begin(), now.end());
          ASSERT_EQ(r.Quantile(0.5), now[static_cast<size_t>(
                                         0.5 * static_cast<double>(now.size() - 1) + 0.5)]);
        }
      }
    }
  }
}

TEST(ArrivalRateEstimatorTest, CountsArrivalsInWindow) {
  ArrivalRateEstimator e(Millis(100));
  for (int i = 0; i < 1000; ++i) e.Add(Micros(100) * i);  // 10k q/s for 100 ms
  EXPECT_NEAR(e.Rate(Micros(100) * 999), 10000, 200);
  EXPECT_EQ(e.Rate(Seconds(10)), 0);  // everything expired
}

}  // namespace
}  // namespace superserve

namespace superserve {
namespace {

// Any batch sizes, more than 256 of them (the index table once held a byte
// per size, so index 256 wrapped to 0): a batch of n runs at the smallest
// listed size >= n, and an exact size is found among them.
TEST(LatencyTableTest, PadsToTheSmallestListedSizeForAnySizesAndManyOfThem) {
  std::vector<int32_t> batches;
  for (int32_t b = 1; b <= 300; ++b) batches.push_back(b);
  batches.push_back(301 + 6);  // 307: a gap, then the largest
  std::vector<double> row;
  for (int32_t b : batches) row.push_back(0.5 + 0.01 * b);
  LatencyTable t(testing::HandProfile(batches, {76}, {row}));
  EXPECT_EQ(t.num_batches(), 301);
  EXPECT_EQ(t.BatchIndexFor(1), 0);
  EXPECT_EQ(t.BatchIndexFor(257), 256);
  EXPECT_EQ(t.batch_size(t.BatchIndexFor(300)), 300);
  EXPECT_EQ(t.batch_size(t.BatchIndexFor(301)), 307);
  EXPECT_EQ(t.batch_size(t.BatchIndexFor(307)), 307);
  EXPECT_EQ(t.ExactBatchIndex(257), 256);
  EXPECT_EQ(t.ExactBatchIndex(303), -1);
  EXPECT_EQ(t.ExactBatchIndex(307), 300);
  // The largest batch within a budget is the largest listed one that fits.
  EXPECT_EQ(t.batch_size(t.LargestBatchWithin(0, Micros(0.5e3 + 0.01e3 * 290))), 290);

  // Sizes that are not powers of two, few of them: 3 runs at 5, 6 at 12.
  LatencyTable u(testing::HandProfile({1, 5, 12}, {76}, {{1, 2, 3}}));
  EXPECT_EQ(u.batch_size(u.BatchIndexFor(2)), 5);
  EXPECT_EQ(u.batch_size(u.BatchIndexFor(5)), 5);
  EXPECT_EQ(u.batch_size(u.BatchIndexFor(6)), 12);
  EXPECT_EQ(u.ExactBatchIndex(6), -1);
}

// Var(N) / E(N) of the counts per interval, the variance from neighbours'
// differences (E[(N_k - N_k-1)^2] / 2): counts 0 and 4 in turn, 16 / 2 = 8
// over a mean of 2, so 4 (the exponential weights move it by < 1 %); the
// same count every interval, 0; a ramp (counts 10, 11, 12, ...), 1/2 over a
// mean near 80, so nearly 0 where Var / mean would read about 8; fewer
// than 8 intervals, 1 (Poisson).
TEST(CountDispersionTest, IndexOfDispersionOfCountsPerInterval) {
  const Nanos interval = Millis(10);
  CountDispersion alternating, steady, ramp;
  for (int k = 0; k < 1000; ++k) {
    for (int i = 0; i < 3; ++i) steady.Add(interval * k + i, interval);
    if (k < 100) {
      for (int i = 0; i < 10 + k; ++i) ramp.Add(interval * k + i, interval);
    }
    if (k % 2 == 1) continue;
    for (int i = 0; i < 4; ++i) alternating.Add(interval * k + i, interval);
  }
  EXPECT_NEAR(alternating.Dispersion(), 4, 0.1);
  EXPECT_NEAR(steady.Dispersion(), 0, 1e-9);
  EXPECT_LT(ramp.Dispersion(), 0.01);
  CountDispersion young;
  for (int k = 0; k < 7; ++k) young.Add(interval * k, interval);
  EXPECT_EQ(young.Dispersion(), 1);
}

}  // namespace
}  // namespace superserve
