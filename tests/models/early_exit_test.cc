#include "models/early_exit.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <random>
#include <vector>

namespace superserve::models {
namespace {

std::vector<float> RandomInputs(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n * 28 * 28));
  for (float& v : x) v = d(rng);
  return x;
}

TEST(EarlyExitConfig, RejectsWhatCannotBeBuilt) {
  EarlyExitConfig c;
  EXPECT_TRUE(c.Validate().ok());
  c.stage_channels = {};
  EXPECT_FALSE(c.Validate().ok());
  c = EarlyExitConfig();
  c.exit_threshold = 1.5f;
  EXPECT_FALSE(c.Validate().ok());
  c = EarlyExitConfig();
  c.image_size = 2;
  c.stage_channels = {4, 4, 4, 4};
  EXPECT_FALSE(c.Validate().ok());
}

// Each sample leaves at the first exit whose confidence reaches the
// threshold; its logits are that exit's, computed over the padded batch.
TEST(EarlyExitNet, SamplesLeaveAtTheFirstConfidentExitWithThatExitsLogits) {
  EarlyExitConfig c;
  auto net = EarlyExitNet::Create(c, 3);
  ASSERT_TRUE(net.ok());
  const int64_t n = 32;
  std::vector<float> x = RandomInputs(n, 1);
  torch::NoGradGuard g;
  torch::Tensor t = torch::from_blob(x.data(), {n, 1, 28, 28}).clone();
  auto all = (*net)->ForwardAllExits(t);
  // Untrained weights give confidences just above 0.1: a threshold at the
  // median of exit 0's confidences lets about half the batch leave there.
  c.exit_threshold = std::get<0>(torch::softmax(all[0], 1).max(1)).median().item<float>();
  (*net)->set_exit_threshold(c.exit_threshold);
  auto out = (*net)->Run(x.data(), n);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->exit_taken.size(), static_cast<size_t>(n));
  int max_exit = 0;
  std::vector<int> per_exit(3, 0);
  for (int64_t s = 0; s < n; ++s) {
    const int e = out->exit_taken[s];
    ASSERT_GE(e, 0);
    ASSERT_LT(e, 3);
    ++per_exit[e];
    max_exit = std::max(max_exit, e);
    for (int i = 0; i < e; ++i) {
      const float conf = torch::softmax(all[i][s], 0).max().item<float>();
      EXPECT_LT(conf, c.exit_threshold) << "sample " << s << " should have left at " << i;
    }
    if (e < 2) {
      EXPECT_GE(torch::softmax(all[e][s], 0).max().item<float>(), c.exit_threshold);
    }
    for (int k = 0; k < 10; ++k) {
      EXPECT_NEAR(out->logits[s * 10 + k], all[e][s][k].item<float>(), 1e-4);
    }
  }
  EXPECT_EQ(out->stages_run, max_exit + 1);
  // The threshold splits this batch (otherwise the test proves little).
  EXPECT_GT(per_exit[0], 0);
  EXPECT_LT(per_exit[0], n);
}

TEST(EarlyExitNet, ThresholdOneRunsEveryStageAndMaxExitStopsEarly) {
  auto net = EarlyExitNet::Create(EarlyExitConfig(), 5);
  ASSERT_TRUE(net.ok());
  std::vector<float> x = RandomInputs(8, 2);
  (*net)->set_exit_threshold(1.0f);
  auto out = (*net)->Run(x.data(), 8);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->stages_run, 3);
  for (int e : out->exit_taken) EXPECT_EQ(e, 2);
  auto first = (*net)->Run(x.data(), 8, /*max_exit=*/0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->stages_run, 1);
  for (int e : first->exit_taken) EXPECT_EQ(e, 0);
  EXPECT_FALSE((*net)->Run(x.data(), 0).ok());
}

TEST(EarlyExitNet, SaveLoadKeepsConfigurationAndOutputs) {
  EarlyExitConfig c;
  c.exit_threshold = 0.2f;
  auto net = EarlyExitNet::Create(c, 7);
  ASSERT_TRUE(net.ok());
  const std::string path = ::testing::TempDir() + "/early_exit_test.pt";
  ASSERT_TRUE((*net)->Save(path).ok());
  auto loaded = EarlyExitNet::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FLOAT_EQ((*loaded)->config().exit_threshold, 0.2f);
  EXPECT_EQ((*loaded)->config().stage_channels, c.stage_channels);
  std::vector<float> x = RandomInputs(4, 3);
  auto a = (*net)->Run(x.data(), 4);
  auto b = (*loaded)->Run(x.data(), 4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->exit_taken, b->exit_taken);
  for (size_t i = 0; i < a->logits.size(); ++i) EXPECT_FLOAT_EQ(a->logits[i], b->logits[i]);
  EXPECT_FALSE(EarlyExitNet::Load(path + ".missing").ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace superserve::models
