#include "models/ofa_resnet_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace superserve::models {
namespace {

using ::testing::HasSubstr;

TEST(OfaResNetConfigTest, ResNet50LayoutMatchesOfa) {
  OfaResNetConfig c = OfaResNetConfig::ImageNetResNet50();
  ASSERT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(c.num_stages(), 4);
  EXPECT_EQ(c.num_blocks(), 18);  // (2+2) + (2+2) + (4+2) + (2+2)
  ArchitectureShape max = MaxShape(c);
  EXPECT_EQ(max.stem_channels, 64);
  EXPECT_EQ(max.final_channels, 2048);
  EXPECT_EQ(max.blocks[0].mid_channels, 88);       // make_divisible(round(256 * 0.35))
  EXPECT_EQ(max.blocks.back().mid_channels, 720);  // make_divisible(round(2048 * 0.35))
  ArchitectureShape min = ShapeOf(c, SmallestArchitecture(c));
  EXPECT_EQ(min.stem_channels, 40);        // make_divisible(64 * 0.65)
  EXPECT_EQ(min.stage_channels[3], 1328);  // make_divisible(2048 * 0.65)
  EXPECT_GT(SubnetParameterCount(c, LargestArchitecture(c)),
            4 * SubnetParameterCount(c, SmallestArchitecture(c)));
}

TEST(OfaResNetConfigTest, MakeDivisibleFollowsOfa) {
  EXPECT_EQ(MakeDivisible(89.6), 88);
  EXPECT_EQ(MakeDivisible(6.4), 8);
  EXPECT_EQ(MakeDivisible(12.0), 16);  // 8 would round down by a third
  EXPECT_EQ(MakeDivisible(41.6), 40);
}

TEST(OfaResNetConfigTest, ValidArchitecturesPass) {
  OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  EXPECT_TRUE(ValidateArchitecture(c, SmallestArchitecture(c)).ok());
  EXPECT_TRUE(ValidateArchitecture(c, LargestArchitecture(c)).ok());
}

TEST(OfaResNetConfigTest, RejectionsNameTheFieldAndValue) {
  OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  ControlTuple t = LargestArchitecture(c);
  ControlTuple bad = t;
  bad.depths.pop_back();
  EXPECT_THAT(std::string(ValidateArchitecture(c, bad).message()),
              HasSubstr("depths has 3 entries, want 4"));
  bad = t;
  bad.depths[1] = 3;
  EXPECT_THAT(std::string(ValidateArchitecture(c, bad).message()), HasSubstr("depths[1] = 3"));
  bad = t;
  bad.expand_ratios[5] = 0.3f;
  EXPECT_THAT(std::string(ValidateArchitecture(c, bad).message()),
              HasSubstr("expand_ratios[5] = 0.3"));
  bad = t;
  bad.width_multipliers.push_back(1.0f);
  EXPECT_THAT(std::string(ValidateArchitecture(c, bad).message()),
              HasSubstr("width_multipliers has 6 entries, want 5"));
  bad = t;
  bad.width_multipliers[0] = 0.5f;
  EXPECT_THAT(std::string(ValidateArchitecture(c, bad).message()),
              HasSubstr("width_multipliers[0] = 0.5"));
  bad = t;
  bad.kernel_sizes = {3};
  EXPECT_THAT(std::string(ValidateArchitecture(c, bad).message()), HasSubstr("kernel_sizes"));
}

TEST(OfaResNetConfigTest, CanonicalizeOnlyTouchesSkippedBlocks) {
  OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  ControlTuple t = LargestArchitecture(c);
  t.depths = {0, 2, 1, 0};  // stage 0 runs 1 of 3 blocks
  ControlTuple k = Canonicalize(c, t);
  EXPECT_FLOAT_EQ(k.expand_ratios[0], 0.35f);  // active
  EXPECT_FLOAT_EQ(k.expand_ratios[1], 0.2f);   // skipped
  EXPECT_FLOAT_EQ(k.expand_ratios[2], 0.2f);
  EXPECT_FLOAT_EQ(k.expand_ratios[5], 0.35f);  // stage 1, all active
  EXPECT_FLOAT_EQ(k.expand_ratios[8], 0.2f);   // stage 2 block 2 skipped
}

TEST(OfaResNetConfigTest, SamplingIsSeededDistinctAndValid) {
  OfaResNetConfig c = OfaResNetConfig::ImageNetResNet50();
  auto a = SampleArchitectures(c, 500, 7);
  auto b = SampleArchitectures(c, 500, 7);
  auto other = SampleArchitectures(c, 500, 8);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  ASSERT_EQ(a->size(), 500u);
  std::set<std::string> distinct;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i], (*b)[i]);
    EXPECT_EQ((*a)[i].subnet_id, static_cast<int>(i));
    EXPECT_TRUE(ValidateArchitecture(c, (*a)[i]).ok());
    distinct.insert((*a)[i].DebugString());
  }
  EXPECT_EQ(distinct.size(), 500u);
  EXPECT_NE((*a)[0], (*other)[0]);
  OfaResNetConfig tiny = c;
  tiny.base_depths = {1};
  tiny.stage_widths = {8};
  tiny.stage_strides = {1};
  tiny.depth_choices = {0};
  tiny.expand_ratio_choices = {0.25f};
  EXPECT_FALSE(SampleArchitectures(tiny, 10, 1).ok());  // only 9 networks exist
}

TEST(OfaResNetConfigTest, ManifestArchitectureMustMatchTheCheckpointsConfig) {
  OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  c.stage_widths = {32, 64, 128, 256};
  c.base_depths = {1, 1, 1, 1};
  c.expand_ratio_choices = {0.2f, 0.25f};
  EXPECT_TRUE(CheckManifestArchitecture(c, "").ok());
  EXPECT_TRUE(CheckManifestArchitecture(c, "{}").ok());
  EXPECT_TRUE(CheckManifestArchitecture(
                  c, R"({"stage_widths": [32, 64, 128, 256], "base_depths": [1, 1, 1, 1],
                         "expand_ratio_choices": [0.2, 0.25]})")
                  .ok());
  auto wrong = CheckManifestArchitecture(c, R"({"stage_widths": [32, 64, 128, 512]})");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.message(),
              ::testing::HasSubstr("field architecture.stage_widths: [32, 64, 128, 512] but the "
                                   "checkpoint's is [32, 64, 128, 256]"));
  EXPECT_THAT(CheckManifestArchitecture(c, R"({"stage_widths": [32, 64, 128]})").message(),
              ::testing::HasSubstr("architecture.stage_widths"));
  EXPECT_THAT(CheckManifestArchitecture(c, R"({"stem_width": 17})").message(),
              ::testing::HasSubstr("architecture.stem_width: 17 but the checkpoint's is 16"));
  EXPECT_THAT(CheckManifestArchitecture(c, R"({"stem_width": [16]})").message(),
              ::testing::HasSubstr("architecture.stem_width: not a number"));
  EXPECT_THAT(CheckManifestArchitecture(c, R"({"base_depths": "1,1,1,1"})").message(),
              ::testing::HasSubstr("architecture.base_depths: not a list of numbers"));
  EXPECT_THAT(CheckManifestArchitecture(c, R"({"stage_width": [32, 64, 128, 256]})").message(),
              ::testing::HasSubstr("architecture.stage_width: not a field of the ofa_resnet"));
  EXPECT_THAT(CheckManifestArchitecture(c, R"({"expand_ratio_choices": [0.2, 0.3]})").message(),
              ::testing::HasSubstr("architecture.expand_ratio_choices: [0.2, 0.3]"));
  EXPECT_THAT(CheckManifestArchitecture(c, "[1, 2]").message(),
              ::testing::HasSubstr("field architecture: not a JSON object"));
}

}  // namespace
}  // namespace superserve::models
