#include "common/empirical_distribution.h"

#include <cmath>
#include <random>

#include "common/model_profile.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

// Two bins: [0, 10) with 1/4 of the mass, [10, 30) with 3/4.
EmpiricalDistribution TwoBins() {
  auto d = EmpiricalDistribution::FromHistogram({0, 10, 30}, {1, 3});
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

TEST(EmpiricalDistributionTest, CdfIsPiecewiseLinear) {
  EmpiricalDistribution d = TwoBins();
  EXPECT_DOUBLE_EQ(d.Cdf(-1), 0);
  EXPECT_DOUBLE_EQ(d.Cdf(0), 0);
  EXPECT_DOUBLE_EQ(d.Cdf(5), 0.125);
  EXPECT_DOUBLE_EQ(d.Cdf(10), 0.25);
  EXPECT_DOUBLE_EQ(d.Cdf(20), 0.625);
  EXPECT_DOUBLE_EQ(d.Cdf(30), 1);
  EXPECT_DOUBLE_EQ(d.Cdf(1e9), 1);
}

TEST(EmpiricalDistributionTest, QuantileInvertsTheCdf) {
  EmpiricalDistribution d = TwoBins();
  EXPECT_DOUBLE_EQ(d.Quantile(0), 0);
  EXPECT_DOUBLE_EQ(d.Quantile(0.125), 5);
  EXPECT_DOUBLE_EQ(d.Quantile(0.25), 10);
  EXPECT_DOUBLE_EQ(d.Quantile(0.625), 20);
  EXPECT_DOUBLE_EQ(d.Quantile(1), 30);
  for (double p = 0.01; p < 1; p += 0.07) EXPECT_NEAR(d.Cdf(d.Quantile(p)), p, 1e-12);
  // Empty bins are skipped: the 0.5 quantile of mass in [0,1) and [2,3) is 1
  // (the end of the first bin), never inside the empty [1, 2).
  auto gap = EmpiricalDistribution::FromHistogram({0, 1, 2, 3}, {1, 0, 1});
  ASSERT_TRUE(gap.ok());
  EXPECT_DOUBLE_EQ(gap->Quantile(0.5), 1);
  EXPECT_DOUBLE_EQ(gap->Quantile(0.75), 2.5);
}

TEST(EmpiricalDistributionTest, MeanAndSeededSampling) {
  EmpiricalDistribution d = TwoBins();
  EXPECT_DOUBLE_EQ(d.Mean(), 0.25 * 5 + 0.75 * 20);
  std::mt19937_64 a(7), b(7);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = d.Sample(a);
    ASSERT_EQ(x, d.Sample(b)) << "same seed, same draws";
    ASSERT_GE(x, 0);
    ASSERT_LT(x, 30);
    sum += x;
  }
  EXPECT_NEAR(sum / n, d.Mean(), 0.1);
}

TEST(EmpiricalDistributionTest, FromSamplesAndMixture) {
  auto s = EmpiricalDistribution::FromSamples({1, 2, 3, 12, -5, 99}, {0, 10, 20});
  ASSERT_TRUE(s.ok());
  // -5 clamps into the first bin, 99 into the last: 4 of 6 below 10.
  EXPECT_NEAR(s->Cdf(10), 4.0 / 6, 1e-12);
  auto lo = EmpiricalDistribution::FromHistogram({0, 10}, {1});
  auto hi = EmpiricalDistribution::FromHistogram({20, 40}, {1});
  ASSERT_TRUE(lo.ok() && hi.ok());
  auto mix = EmpiricalDistribution::Mixture({*lo, *hi}, {3, 1});
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_NEAR(mix->Cdf(10), 0.75, 1e-12);
  EXPECT_NEAR(mix->Cdf(15), 0.75, 1e-12);
  EXPECT_NEAR(mix->Cdf(30), 0.875, 1e-12);
  EXPECT_NEAR(mix->Mean(), 0.75 * 5 + 0.25 * 30, 1e-9);
}

TEST(EmpiricalDistributionTest, RejectsBadHistograms) {
  EXPECT_FALSE(EmpiricalDistribution::FromHistogram({0, 1}, {1, 1}).ok());
  EXPECT_FALSE(EmpiricalDistribution::FromHistogram({0, 1, 1}, {1, 1}).ok());
  EXPECT_FALSE(EmpiricalDistribution::FromHistogram({0, 1}, {0}).ok());
  EXPECT_FALSE(EmpiricalDistribution::FromHistogram({0, 1}, {-1}).ok());
  EXPECT_FALSE(EmpiricalDistribution::FromSamples({}, {0, 1}).ok());
  ApplicationHistogram h{"video", {0, 5}, {0}};
  auto d = EmpiricalDistribution::FromProfile(h);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("video"), std::string_view::npos);
}

TEST(EmpiricalDistributionTest, ConstantIsAPointMass) {
  EmpiricalDistribution d = EmpiricalDistribution::Constant(5000);
  EXPECT_EQ(d.Cdf(4999.999), 0);
  EXPECT_EQ(d.Cdf(5000.01), 1);
  EXPECT_NEAR(d.Mean(), 5000, 1e-3);
  EXPECT_NEAR(d.Quantile(0.99), 5000, 1e-3);
}

}  // namespace
}  // namespace superserve
