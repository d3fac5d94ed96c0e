#include "models/ofa_resnet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace superserve::models {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + ".pt";
}

// fp32 agreement of two computations of the same network that differ only in
// rounding order (a fused multiply-add in ATen's batch norm, our SubnetNorm
// kernel without): rtol 1e-4 plus an absolute slack of 1e-5 of the output's
// scale, since deep random-weight nets reach logits in the hundreds. A wrong
// weight slice or statistics slot changes outputs by O(1) relative.
bool CloseFp32(const torch::Tensor& got, const torch::Tensor& want) {
  const double scale = std::max(1.0, want.abs().max().item<double>());
  return torch::allclose(got, want, 1e-4, 1e-5 * scale);
}

// Calibrates every slot on its own random batches so that statistics are
// neither the defaults nor shared between slots.
void CalibrateAll(OfaResNet& model, int64_t size, uint64_t seed) {
  const OfaResNetConfig& c = model.config();
  for (int s = 0; s < model.NumSlots(); ++s) {
    torch::manual_seed(seed + s);
    ASSERT_TRUE(model.BeginCalibration(s).ok());
    for (int b = 0; b < 2; ++b) {
      model.Forward(torch::randn({4, c.input_channels, size, size}) * (1 + s % 3) + 0.1 * s);
    }
    ASSERT_TRUE(model.FinishCalibration().ok());
  }
}

void ExpectActuatedEqualsExtracted(OfaResNet& model, int64_t batch, int64_t size) {
  model.Eval();
  torch::Tensor x = torch::randn({batch, model.config().input_channels, size, size});
  for (int s = 0; s < model.NumSlots(); ++s) {
    auto arch = model.SlotArchitecture(s);
    ASSERT_TRUE(arch.ok());
    ASSERT_TRUE(model.Actuate(*arch).ok()) << arch->DebugString();
    torch::Tensor actuated = model.Forward(x);
    auto extracted = model.Extract(*arch);
    ASSERT_TRUE(extracted.ok()) << extracted.status();
    torch::Tensor dense = (*extracted)->Forward(x);
    ASSERT_EQ(actuated.sizes(), dense.sizes());
    EXPECT_EQ(actuated.size(1), model.config().num_classes);
    EXPECT_TRUE(CloseFp32(actuated, dense))
        << "slot " << s << " " << arch->DebugString() << " max abs "
        << dense.abs().max().item<float>() << " max diff "
        << (actuated - dense).abs().max().item<float>();
  }
}

std::unique_ptr<OfaResNet> FashionMnistWithSlots(int slots, uint64_t seed) {
  OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  auto model = OfaResNet::Create(c, seed);
  EXPECT_TRUE(model.ok());
  auto archs = SampleArchitectures(c, slots - 2, seed);
  EXPECT_TRUE(archs.ok());
  archs->push_back(SmallestArchitecture(c));
  archs->push_back(LargestArchitecture(c));
  EXPECT_TRUE((*model)->SetSlots(*archs).ok());
  return std::move(*model);
}

TEST(OfaResNetTest, FashionMnistActuatedEqualsExtractedForRandomSubnets) {
  auto model = FashionMnistWithSlots(8, 11);
  CalibrateAll(*model, 28, 100);
  ExpectActuatedEqualsExtracted(*model, 3, 28);
}

TEST(OfaResNetTest, ImageNetSizeActuatedEqualsExtractedAtBatchOne) {
  // Full OFA-ResNet50 supernet (224x224 nominal); a 64x64 input keeps this to
  // seconds while exercising every layer, stride and the stem max pool.
  OfaResNetConfig c = OfaResNetConfig::ImageNetResNet50();
  auto model = OfaResNet::Create(c, 5);
  ASSERT_TRUE(model.ok());
  auto archs = SampleArchitectures(c, 1, 5);
  ASSERT_TRUE(archs.ok());
  archs->push_back(SmallestArchitecture(c));
  archs->push_back(LargestArchitecture(c));
  ASSERT_TRUE((*model)->SetSlots(*archs).ok());
  CalibrateAll(**model, 64, 200);
  ExpectActuatedEqualsExtracted(**model, 1, 64);
}

TEST(OfaResNetTest, TwoSlotsKeepTheirOwnStatistics) {
  OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  auto created = OfaResNet::Create(c, 3);
  ASSERT_TRUE(created.ok());
  OfaResNet& model = **created;
  ControlTuple arch = SampleArchitectures(c, 1, 3)->front();
  arch.subnet_id = kNoSlot;
  ASSERT_TRUE(model.SetSlots({arch, arch}).ok());  // same subnet, two slots
  ASSERT_TRUE(model.BeginCalibration(0).ok());
  model.Forward(torch::randn({8, 1, 28, 28}));
  ASSERT_TRUE(model.FinishCalibration().ok());
  ASSERT_TRUE(model.BeginCalibration(1).ok());
  model.Forward(torch::randn({8, 1, 28, 28}) * 3 + 1);
  ASSERT_TRUE(model.FinishCalibration().ok());

  torch::Tensor x = torch::randn({2, 1, 28, 28});
  ControlTuple t0 = arch, t1 = arch;
  t0.subnet_id = 0;
  t1.subnet_id = 1;
  ASSERT_TRUE(model.Actuate(t0).ok());
  torch::Tensor y0 = model.Forward(x);
  ASSERT_TRUE(model.Actuate(t1).ok());
  torch::Tensor y1 = model.Forward(x);
  EXPECT_FALSE(torch::allclose(y0, y1, 1e-3, 1e-3));  // statistics differ
  EXPECT_TRUE(CloseFp32(y0, (*model.Extract(t0))->Forward(x)));
  EXPECT_TRUE(CloseFp32(y1, (*model.Extract(t1))->Forward(x)));
  ASSERT_TRUE(model.Actuate(t0).ok());  // switching back restores slot 0 exactly
  EXPECT_TRUE(torch::equal(model.Forward(x), y0));
}

TEST(OfaResNetTest, BadControlTuplesAreRejectedAndLeaveTheActiveSubnet) {
  auto model = FashionMnistWithSlots(4, 21);
  CalibrateAll(*model, 28, 300);
  model->Eval();
  ControlTuple good = *model->SlotArchitecture(1);
  ASSERT_TRUE(model->Actuate(good).ok());
  torch::Tensor x = torch::randn({2, 1, 28, 28});
  torch::Tensor before = model->Forward(x);

  auto expect_rejected = [&](const ControlTuple& t, const std::string& message) {
    absl::Status s = model->Actuate(t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t.DebugString();
    EXPECT_THAT(std::string(s.message()), HasSubstr(message));
    EXPECT_EQ(model->active(), good);
    EXPECT_TRUE(torch::equal(model->Forward(x), before));
  };
  ControlTuple t = good;
  t.depths.push_back(0);
  expect_rejected(t, "depths has 5 entries, want 4");
  t = good;
  t.expand_ratios.pop_back();
  expect_rejected(t, "expand_ratios has 11 entries, want 12");
  t = good;
  t.width_multipliers[2] = 0.7f;
  expect_rejected(t, "width_multipliers[2] = 0.7");
  t = good;
  t.depths[0] = -1;
  expect_rejected(t, "depths[0] = -1");
  t = good;
  t.subnet_id = 4;
  expect_rejected(t, "subnet_id 4 is not a slot");
  t = good;
  t.subnet_id = kNoSlot;
  expect_rejected(t, "only valid in training mode");
  t = *model->SlotArchitecture(0);
  t.subnet_id = 1;  // slot 1 holds a different architecture
  expect_rejected(t, "does not match the architecture of slot 1");
  EXPECT_FALSE(model->Extract(t).ok());
  EXPECT_FALSE(model->Infer(torch::randn({1, 3, 28, 28})).ok());  // wrong channel count
}

TEST(OfaResNetTest, ReplacingSlotsRequiresANewActuationBeforeInference) {
  auto model = FashionMnistWithSlots(3, 51);
  model->Eval();
  ASSERT_TRUE(model->Actuate(*model->SlotArchitecture(2)).ok());
  torch::Tensor x = torch::randn({1, 1, 28, 28});
  ASSERT_TRUE(model->Infer(x).ok());
  auto archs = SampleArchitectures(model->config(), 2, 52);
  ASSERT_TRUE(model->SetSlots(*archs).ok());
  EXPECT_EQ(model->NumSlots(), 2);
  EXPECT_FALSE(model->is_training());
  auto stale = model->Infer(x);
  ASSERT_FALSE(stale.ok());
  EXPECT_THAT(std::string(stale.status().message()), HasSubstr("needs an actuated slot"));
  ASSERT_TRUE(model->Actuate((*archs)[1]).ok());
  EXPECT_TRUE(model->Infer(x).ok());
}

TEST(OfaResNetTest, ElasticChoicesWidenWithoutTouchingWeightsAndRejectOtherNetworks) {
  auto model = OfaResNet::Create(OfaResNetConfig::FashionMnist(), 61);
  ASSERT_TRUE(model.ok());
  const int64_t bytes = (*model)->ResidentBytes();
  OfaResNetConfig wider = OfaResNetConfig::FashionMnist();
  wider.width_multiplier_choices = {0.35f, 0.65f, 0.8f, 1.0f};
  wider.expand_ratio_choices = {0.1f, 0.2f, 0.25f, 0.35f};
  ControlTuple thin = SmallestArchitecture(wider);
  EXPECT_FALSE((*model)->Actuate(thin).ok());  // 0.35 is not a choice yet
  ASSERT_TRUE((*model)->SetElasticChoices(wider).ok());
  EXPECT_EQ((*model)->config().width_multiplier_choices, wider.width_multiplier_choices);
  EXPECT_EQ((*model)->ResidentBytes(), bytes);
  ASSERT_TRUE((*model)->Actuate(thin).ok());
  EXPECT_EQ((*model)->Forward(torch::randn({2, 1, 28, 28})).size(1), 10);

  OfaResNetConfig larger_max = wider;
  larger_max.width_multiplier_choices = {0.5f, 1.25f};  // would need bigger weights
  auto s = (*model)->SetElasticChoices(larger_max);
  EXPECT_THAT(std::string(s.message()), HasSubstr("largest architecture's shape"));
  OfaResNetConfig other = wider;
  other.stem_stride = 2;
  s = (*model)->SetElasticChoices(other);
  EXPECT_THAT(std::string(s.message()), HasSubstr("fixed fields differ"));
  EXPECT_EQ((*model)->config().width_multiplier_choices, wider.width_multiplier_choices);

  // A slot using a choice that would disappear keeps the old choices.
  ASSERT_TRUE((*model)->SetSlots({thin}).ok());
  s = (*model)->SetElasticChoices(OfaResNetConfig::FashionMnist());
  EXPECT_THAT(std::string(s.message()), HasSubstr("slot 0 would be invalid"));
  EXPECT_EQ((*model)->config().width_multiplier_choices, wider.width_multiplier_choices);
}

TEST(OfaResNetTest, SaveAndLoadKeepWeightsStatisticsAndSlots) {
  auto model = FashionMnistWithSlots(3, 31);
  CalibrateAll(*model, 28, 400);
  model->Eval();
  const std::string path = TempPath("ofa_fmnist");
  ASSERT_TRUE(model->Save(path).ok());
  auto loaded = OfaResNet::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ((*loaded)->NumSlots(), 3);
  EXPECT_EQ((*loaded)->ResidentBytes(), model->ResidentBytes());
  (*loaded)->Eval();
  torch::Tensor x = torch::randn({2, 1, 28, 28});
  for (int s = 0; s < 3; ++s) {
    ControlTuple arch = *model->SlotArchitecture(s);
    EXPECT_EQ(*(*loaded)->SlotArchitecture(s), arch);
    ASSERT_TRUE(model->Actuate(arch).ok());
    ASSERT_TRUE((*loaded)->Actuate(arch).ok());
    EXPECT_TRUE(torch::equal(model->Forward(x), (*loaded)->Forward(x))) << "slot " << s;
  }
  EXPECT_FALSE(OfaResNet::Load(path + ".missing").ok());
}

TEST(OfaResNetTest, ExtractedSubnetSurvivesSaveAndLoad) {
  auto model = FashionMnistWithSlots(2, 41);
  CalibrateAll(*model, 28, 500);
  auto extracted = model->Extract(*model->SlotArchitecture(0));
  ASSERT_TRUE(extracted.ok());
  const std::string path = TempPath("ofa_extracted");
  ASSERT_TRUE((*extracted)->Save(path).ok());
  auto loaded = ExtractedSubnet::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  torch::Tensor x = torch::randn({2, 1, 28, 28});
  EXPECT_TRUE(torch::equal((*extracted)->Forward(x), (*loaded)->Forward(x)));
  EXPECT_LT((*loaded)->ResidentBytes(), model->ResidentBytes());
}

TEST(OfaResNetTest, TrainingUsesBatchStatisticsAndGradientsReachOnlyTheSlice) {
  OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  auto created = OfaResNet::Create(c, 9);
  ASSERT_TRUE(created.ok());
  OfaResNet& model = **created;
  model.Train();
  ControlTuple small = SmallestArchitecture(c);  // subnet_id -1: no slot needed
  ASSERT_TRUE(model.Actuate(small).ok());
  torch::Tensor y = model.Forward(torch::randn({4, 1, 28, 28}));
  torch::nn::functional::cross_entropy(y, torch::tensor({0, 1, 2, 3})).backward();
  torch::Tensor grad;
  for (const auto& p : model.module().named_parameters()) {
    if (p.key() == "classifier.weight") grad = p.value().grad();
  }
  ASSERT_TRUE(grad.defined());
  const int64_t active = ShapeOf(c, small).final_channels;  // classifier input width
  ASSERT_LT(active, grad.size(1));
  EXPECT_GT(grad.slice(1, 0, active).abs().sum().item<float>(), 0.f);
  EXPECT_EQ(grad.slice(1, active).abs().sum().item<float>(), 0.f);
  EXPECT_EQ(model.Parameters().size(), model.module().parameters().size());
}

}  // namespace
}  // namespace superserve::models
