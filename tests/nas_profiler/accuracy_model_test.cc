#include "nas_profiler/accuracy_model.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "models/ofa_resnet_config.h"
#include "nas_profiler/nas_configs.h"

namespace superserve::nas {
namespace {

models::OfaResNetConfig Config() {
  auto config = NamedConfig("fmnist-s2x");
  EXPECT_TRUE(config.ok());
  return *config;
}

std::vector<ControlTuple> Sample(const models::OfaResNetConfig& config, int n, uint64_t seed) {
  auto sampled = models::SampleArchitectures(config, n, seed);
  EXPECT_TRUE(sampled.ok()) << sampled.status();
  return *sampled;
}

// An additive "true" accuracy: depth and width help, expand a little.
double Truth(const ControlTuple& a) {
  double acc = 88.0;
  for (int32_t d : a.depths) acc += 0.4 * d;
  for (float w : a.width_multipliers) acc += 1.5 * w;
  for (float e : a.expand_ratios) acc += 0.5 * e;  // inactive blocks are canonical
  return acc;
}

TEST(FittedAccuracyModelTest, EncodingIsAThermometerPerChoice) {
  const auto config = Config();
  const auto smallest = FittedAccuracyModel::Encode(config, models::SmallestArchitecture(config));
  const auto largest = FittedAccuracyModel::Encode(config, models::LargestArchitecture(config));
  ASSERT_EQ(smallest.size(), largest.size());
  // intercept + 4 stages x 2 depth levels + 5 widths x 3 + 12 blocks x 3 expand
  // levels + narrowest width x 3 + narrowest expand x 3
  EXPECT_EQ(largest.size(), 1u + 4 * 2 + 5 * 3 + 12 * 3 + 3 + 3);
  EXPECT_EQ(smallest[0], 1.0);
  for (size_t j = 1; j < smallest.size(); ++j) EXPECT_EQ(smallest[j], 0.0) << j;
  for (size_t j = 0; j < largest.size(); ++j) EXPECT_EQ(largest[j], 1.0) << j;
}

TEST(FittedAccuracyModelTest, InactiveBlocksDoNotCount) {
  const auto config = Config();
  ControlTuple a = models::SmallestArchitecture(config);
  ControlTuple b = a;
  // Block 1 of stage 0 is inactive at extra depth 0: its expand ratio is not
  // part of the network, so it must not change the encoding.
  b.expand_ratios[1] = config.expand_ratio_choices.back();
  EXPECT_EQ(FittedAccuracyModel::Encode(config, a), FittedAccuracyModel::Encode(config, b));
  b.depths[0] = 1;  // now it is active
  EXPECT_NE(FittedAccuracyModel::Encode(config, a), FittedAccuracyModel::Encode(config, b));
}

TEST(FittedAccuracyModelTest, PoolsNoisyMeasurementsIntoBetterEstimates) {
  const auto config = Config();
  const auto architectures = Sample(config, 800, 1);
  std::mt19937_64 rng(2);
  std::normal_distribution<double> noise(0.0, 0.4);  // a 5,000-image validation set
  std::vector<double> measured;
  for (const auto& a : architectures) measured.push_back(Truth(a) + noise(rng));
  auto model = FittedAccuracyModel::Fit(config, architectures, measured);
  ASSERT_TRUE(model.ok()) << model.status();
  double measured_error = 0, predicted_error = 0;
  for (size_t i = 0; i < architectures.size(); ++i) {
    const double truth = Truth(architectures[i]);
    measured_error += std::pow(measured[i] - truth, 2);
    predicted_error += std::pow(model->Predict(architectures[i]) - truth, 2);
  }
  measured_error = std::sqrt(measured_error / architectures.size());
  predicted_error = std::sqrt(predicted_error / architectures.size());
  EXPECT_GT(measured_error, 0.3);
  EXPECT_LT(predicted_error, 0.5 * measured_error);
  // Unseen architectures too.
  for (const auto& a : Sample(config, 50, 3)) EXPECT_NEAR(model->Predict(a), Truth(a), 0.4);
  EXPECT_NEAR(model->rmse(), 0.4, 0.1);
  EXPECT_NE(model->DebugString().find("800 architectures"), std::string::npos);
}

TEST(FittedAccuracyModelTest, MonotoneModelNeverPredictsLessForALargerChoice) {
  // Expand ratios do not matter here: the unconstrained fit gives some of
  // their features slightly negative weights from noise alone, so an
  // architecture can be predicted above the largest one.
  const auto config = Config();
  const auto architectures = Sample(config, 400, 5);
  std::mt19937_64 rng(6);
  std::normal_distribution<double> noise(0.0, 0.4);
  std::vector<double> measured;
  for (const auto& a : architectures) {
    double acc = 88.0;
    for (int32_t d : a.depths) acc += 0.4 * d;
    for (float w : a.width_multipliers) acc += 1.5 * w;
    measured.push_back(acc + noise(rng));
  }
  const ControlTuple largest = models::LargestArchitecture(config);
  // One choice made one step larger, for every architecture and position.
  auto larger_variants = [&](const ControlTuple& a) {
    std::vector<ControlTuple> out;
    for (size_t i = 0; i < a.expand_ratios.size(); ++i) {
      for (float e : config.expand_ratio_choices) {
        if (e > a.expand_ratios[i]) {
          ControlTuple b = a;
          b.expand_ratios[i] = e;
          out.push_back(b);
          break;
        }
      }
    }
    return out;
  };
  auto violations = [&](const FittedAccuracyModel& m) {
    int n = 0;
    for (const auto& a : architectures) {
      n += m.Predict(a) > m.Predict(largest) + 1e-9;
      for (const auto& b : larger_variants(a)) n += m.Predict(b) < m.Predict(a) - 1e-9;
    }
    return n;
  };
  auto free_fit = FittedAccuracyModel::Fit(config, architectures, measured);
  ASSERT_TRUE(free_fit.ok());
  EXPECT_GT(violations(*free_fit), 0) << "the case no longer needs the constraint";
  auto monotone = FittedAccuracyModel::Fit(config, architectures, measured, 10.0, true);
  ASSERT_TRUE(monotone.ok()) << monotone.status();
  EXPECT_EQ(violations(*monotone), 0);
  // It still fits: residuals at the noise level.
  EXPECT_NEAR(monotone->rmse(), 0.4, 0.1);
  EXPECT_NE(monotone->DebugString().find("monotone"), std::string::npos);
}

TEST(FittedAccuracyModelTest, TooFewOrMismatchedPointsAreErrors) {
  const auto config = Config();
  const auto architectures = Sample(config, 10, 4);
  auto few = FittedAccuracyModel::Fit(config, architectures, std::vector<double>(10, 90.0));
  ASSERT_FALSE(few.ok());
  EXPECT_NE(std::string(few.status().message()).find("at least"), std::string::npos);
  auto mismatched = FittedAccuracyModel::Fit(config, architectures, {90.0});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(std::string(mismatched.status().message()).find("10 architectures but 1"),
            std::string::npos);
}

}  // namespace
}  // namespace superserve::nas
