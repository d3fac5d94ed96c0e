#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "operators/layer_select.h"
#include "operators/subnet_norm.h"
#include "operators/subnet_ops.h"
#include "operators/weight_slice.h"

namespace superserve::ops {
namespace {

TEST(WeightSliceConv2dTest, EqualsDenseConvWithCopiedPrefix) {
  torch::manual_seed(1);
  WeightSliceConv2d conv(16, 24, 3, 2);
  torch::Tensor x = torch::randn({2, 10, 9, 9});
  torch::Tensor got = conv(x, 13);
  torch::Tensor dense_w = conv->weight.slice(0, 0, 13).slice(1, 0, 10).clone();
  torch::Tensor want = torch::conv2d(x, dense_w, {}, 2, 1);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6));
}

TEST(WeightSliceConv2dTest, FullWidthUsesTheWholeWeight) {
  WeightSliceConv2d conv(8, 8, 1, 1);
  torch::Tensor x = torch::randn({1, 8, 4, 4});
  EXPECT_TRUE(torch::allclose(conv(x, 8), torch::conv2d(x, conv->weight), 1e-5, 1e-6));
}

TEST(WeightSliceConv2dTest, RejectsWidthsBeyondTheWeight) {
  WeightSliceConv2d conv(8, 8, 3, 1);
  EXPECT_THROW(conv(torch::randn({1, 8, 4, 4}), 9), c10::Error);
  EXPECT_THROW(conv(torch::randn({1, 9, 4, 4}), 4), c10::Error);
  EXPECT_THROW(conv(torch::randn({1, 8, 4, 4}), 0), c10::Error);
}

TEST(WeightSliceConv2dTest, InferenceViewsFollowTheWeights) {
  WeightSliceConv2d conv(8, 8, 3, 1);
  torch::NoGradGuard g;
  torch::Tensor x = torch::randn({1, 5, 6, 6});
  torch::Tensor first = conv(x, 6);
  conv(torch::randn({1, 8, 6, 6}), 8);  // a second cached width pair
  conv->weight.mul_(2);                 // in-place update (optimizer step)
  EXPECT_TRUE(torch::allclose(conv(x, 6), first * 2, 1e-5, 1e-5));
  conv->weight.set_(torch::randn({8, 8, 3, 3}));  // storage replaced (checkpoint load)
  torch::Tensor want =
      torch::conv2d(x, conv->weight.slice(0, 0, 6).slice(1, 0, 5).clone(), {}, 1, 1);
  EXPECT_TRUE(torch::allclose(conv(x, 6), want, 1e-5, 1e-5));
}

// Off the CPU a strided slice is a contiguous copy (weight_slice.h); the
// switch runs that path here. A copy must follow in-place writes and storage
// replacement as a view does.
TEST(WeightSliceConv2dTest, StridedSliceCopiesFollowTheWeights) {
  WeightSliceConv2d conv(8, 8, 3, 1);
  conv->slices().set_copy_strided_slices(true);
  torch::NoGradGuard g;
  torch::Tensor x = torch::randn({1, 5, 6, 6});
  torch::Tensor first = conv(x, 6);
  torch::Tensor want = torch::conv2d(x, conv->weight.slice(0, 0, 6).slice(1, 0, 5).clone(), {}, 1, 1);
  EXPECT_TRUE(torch::allclose(first, want, 1e-5, 1e-5));
  const auto& strided = conv->slices().Get(conv->weight, conv->bias, 5, 6);
  EXPECT_TRUE(strided.weight.is_contiguous());
  EXPECT_NE(strided.weight.data_ptr(), conv->weight.data_ptr());  // a copy
  const auto& full_rows = conv->slices().Get(conv->weight, conv->bias, 8, 6);
  EXPECT_EQ(full_rows.weight.data_ptr(), conv->weight.data_ptr());  // already contiguous: a view
  conv(torch::randn({1, 8, 6, 6}), 8);
  conv->weight.mul_(2);  // in-place update: the copy is stale
  EXPECT_TRUE(torch::allclose(conv(x, 6), first * 2, 1e-5, 1e-5));
  conv->weight.slice(1, 0, 1).zero_();  // a write through a view of the weight
  want = torch::conv2d(x, conv->weight.slice(0, 0, 6).slice(1, 0, 5).clone(), {}, 1, 1);
  EXPECT_TRUE(torch::allclose(conv(x, 6), want, 1e-5, 1e-5));
  conv->weight.set_(torch::randn({8, 8, 3, 3}));  // storage replaced (checkpoint load)
  want = torch::conv2d(x, conv->weight.slice(0, 0, 6).slice(1, 0, 5).clone(), {}, 1, 1);
  EXPECT_TRUE(torch::allclose(conv(x, 6), want, 1e-5, 1e-5));
}

TEST(WeightSliceLinearTest, StridedSliceCopiesFollowTheWeights) {
  WeightSliceLinear fc(32, 10);
  fc->slices().set_copy_strided_slices(true);
  torch::NoGradGuard g;
  torch::Tensor x = torch::randn({3, 20});
  auto want = [&] {
    return torch::linear(x, fc->weight.slice(0, 0, 7).slice(1, 0, 20).clone(),
                         fc->bias.slice(0, 0, 7));
  };
  EXPECT_TRUE(torch::allclose(fc(x, 7), want(), 1e-5, 1e-6));
  fc->weight.add_(1);
  fc->bias.mul_(3);
  EXPECT_TRUE(torch::allclose(fc(x, 7), want(), 1e-5, 1e-5));
}

TEST(WeightSliceLinearTest, EqualsDenseLinearWithCopiedPrefix) {
  WeightSliceLinear fc(32, 10);
  torch::Tensor x = torch::randn({3, 20});
  torch::Tensor want = torch::linear(x, fc->weight.slice(1, 0, 20).clone(), fc->bias);
  EXPECT_TRUE(torch::allclose(fc(x, 10), want, 1e-5, 1e-6));
  torch::Tensor want7 =
      torch::linear(x, fc->weight.slice(0, 0, 7).slice(1, 0, 20).clone(), fc->bias.slice(0, 0, 7));
  EXPECT_TRUE(torch::allclose(fc(x, 7), want7, 1e-5, 1e-6));
  EXPECT_THROW(fc(torch::randn({3, 33}), 10), c10::Error);
}

torch::Tensor ManualNorm(const torch::Tensor& x, const torch::Tensor& mean,
                         const torch::Tensor& var, const torch::Tensor& w, const torch::Tensor& b) {
  auto v = [](const torch::Tensor& t) { return t.view({1, -1, 1, 1}); };
  return (x - v(mean)) / torch::sqrt(v(var) + 1e-5) * v(w) + v(b);
}

TEST(SubnetNormTest, EachSlotUsesItsOwnStatisticsAndSharedAffine) {
  SubnetNorm norm(8);
  norm->ResetSlots({4, 0, 6});
  EXPECT_EQ(norm->mean_storage.numel(), 10);  // compact: only used channels
  {
    torch::NoGradGuard g;
    norm->weight.copy_(torch::linspace(0.5, 2, 8));
    norm->bias.copy_(torch::linspace(-1, 1, 8));
  }
  torch::Tensor m0 = torch::randn({4}), v0 = torch::rand({4}) + 0.5;
  torch::Tensor m2 = torch::randn({6}), v2 = torch::rand({6}) + 0.5;
  norm->SetSlotStatistics(0, m0, v0);
  norm->SetSlotStatistics(2, m2, v2);
  torch::NoGradGuard g;
  torch::Tensor x4 = torch::randn({2, 4, 3, 3}), x6 = torch::randn({2, 6, 3, 3});
  EXPECT_TRUE(torch::allclose(
      norm(x4, 0), ManualNorm(x4, m0, v0, norm->weight.slice(0, 0, 4), norm->bias.slice(0, 0, 4)),
      1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(
      norm(x6, 2), ManualNorm(x6, m2, v2, norm->weight.slice(0, 0, 6), norm->bias.slice(0, 0, 6)),
      1e-5, 1e-5));
}

TEST(SubnetNormTest, HalfStorageUsesTheRoundedStatisticsInPlace) {
  SubnetNorm norm(6, 1e-5, torch::kHalf);
  norm->ResetSlots({6});
  EXPECT_EQ(norm->mean_storage.scalar_type(), torch::kHalf);
  torch::Tensor m = torch::randn({6}), v = torch::rand({6}) + 0.5;
  norm->SetSlotStatistics(0, m, v);
  torch::Tensor x = torch::randn({2, 6, 3, 3});
  torch::Tensor want =
      ManualNorm(x, m.to(torch::kHalf).to(torch::kFloat), v.to(torch::kHalf).to(torch::kFloat),
                 norm->weight.detach(), norm->bias.detach());
  {
    torch::NoGradGuard g;  // raw-pointer inference kernel
    EXPECT_TRUE(torch::allclose(norm(x, 0), want, 1e-5, 1e-5));
  }
  // Grad mode takes the differentiable ATen path; same numbers.
  EXPECT_TRUE(torch::allclose(norm(x, 0).detach(), want, 1e-5, 1e-5));
  EXPECT_THROW(norm->SetSlotStatistics(0, m, v * 1e5), c10::Error);  // beyond float16
  EXPECT_THROW(norm->SetSlotStatistics(0, m, -v), c10::Error);       // negative variance
}

TEST(SubnetNormTest, InferenceKernelMatchesDenseBatchNormToRounding) {
  SubnetNorm norm(32);
  norm->ResetSlots({32});
  norm->SetSlotStatistics(0, torch::randn({32}), torch::rand({32}) + 0.1);
  torch::nn::BatchNorm2d dense(32);
  torch::NoGradGuard g;
  dense->weight.uniform_(0.5, 1.5);
  dense->bias.uniform_(-1, 1);
  norm->weight.copy_(dense->weight);
  norm->bias.copy_(dense->bias);
  dense->running_mean.copy_(norm->SlotMean(0));
  dense->running_var.copy_(norm->SlotVar(0));
  dense->eval();
  for (int64_t w : {8, 9}) {  // with and without a vector tail
    torch::Tensor x = torch::randn({3, 32, 7, w});
    torch::Tensor a = norm(x, 0), b = dense(x);
    // Same folded formula; ATen rounds the per-channel terms slightly
    // differently, so allow one or two ulps.
    EXPECT_TRUE(torch::allclose(a, b, 1e-6, 2e-6))
        << "width " << w << " max diff " << (a - b).abs().max().item<float>() << " where "
        << (a != b).nonzero().size(0) << " elements differ";
  }
}

TEST(SubnetNormTest, RejectsUnknownSlotsAndWrongWidths) {
  SubnetNorm norm(8);
  norm->ResetSlots({4, 0});
  torch::Tensor x = torch::randn({1, 4, 2, 2});
  EXPECT_THROW(norm(x, 2), c10::Error);
  EXPECT_THROW(norm(x, -1), c10::Error);
  EXPECT_THROW(norm(x, 1), c10::Error);  // slot 1 skips this layer
  EXPECT_THROW(norm(torch::randn({1, 5, 2, 2}), 0), c10::Error);
  EXPECT_THROW(norm->ResetSlots({9}), c10::Error);
}

// A checkpoint's slot table is input: offset + channels overflowing int64,
// or a negative width, passed the range check (and failed later, in a
// forward, or read outside the storage).
TEST(SubnetNormTest, SlotTablesFromACheckpointAreRangeChecked) {
  SubnetNorm norm(8);
  norm->ResetSlots({4, 4});
  norm->SyncSlotTableFromBuffers();  // the table as written is fine
  const int64_t big = int64_t{1} << 62;
  for (const auto& [offset, channels] :
       std::vector<std::pair<int64_t, int64_t>>{{big, big}, {0, -3}, {7, 2}, {-1, 2}}) {
    norm->slot_offsets.fill_(offset);
    norm->slot_channels.fill_(channels);
    EXPECT_THROW(norm->SyncSlotTableFromBuffers(), c10::Error) << offset << " " << channels;
  }
}

// The op a scripted module calls (torch.ops.superserve.subnet_norm) with
// tensors of its choosing: a weight or storages of shape [C, 0] were read past
// their empty data on the raw-pointer path (SIGSEGV in the worker), and an
// offset near INT64_MAX overflowed offset + C past the range check.
TEST(SubnetNormTest, TheOpRefusesHostileShapesAndOffsetsInsteadOfReadingPastThem) {
  const torch::Tensor x = torch::randn({2, 10});
  const torch::Tensor w = torch::ones({10}), b = torch::zeros({10});
  const torch::Tensor mean = torch::zeros({10}), var = torch::ones({10});
  EXPECT_NO_THROW(SubnetNormWithStatistics(x, w, b, mean, var, 0, 1e-5));
  EXPECT_THROW(SubnetNormWithStatistics(x, torch::ones({10, 0}), b, mean, var, 0, 1e-5),
               c10::Error);
  EXPECT_THROW(SubnetNormWithStatistics(x, w, torch::zeros({10, 0}), mean, var, 0, 1e-5),
               c10::Error);
  EXPECT_THROW(SubnetNormWithStatistics(x, w, b, torch::zeros({10, 0}), torch::zeros({10, 0}), 0,
                                        1e-5),
               c10::Error);
  EXPECT_THROW(SubnetNormWithStatistics(x, w, b, mean, torch::ones({4}), 0, 1e-5), c10::Error);
  EXPECT_THROW(SubnetNormWithStatistics(x, w, b, mean, var, INT64_MAX - 7, 1e-5), c10::Error);
  EXPECT_THROW(SubnetNormWithStatistics(x, w, b, mean, var, 1, 1e-5), c10::Error);
}

TEST(SubnetNormTest, AddSlotKeepsExistingStatistics) {
  SubnetNorm norm(8);
  norm->ResetSlots({3});
  torch::Tensor m = torch::tensor({1.f, 2.f, 3.f}), v = torch::tensor({4.f, 5.f, 6.f});
  norm->SetSlotStatistics(0, m, v);
  EXPECT_EQ(norm->AddSlot(8), 1);
  EXPECT_TRUE(torch::equal(norm->SlotMean(0), m));
  EXPECT_TRUE(torch::equal(norm->SlotVar(0), v));
  EXPECT_EQ(norm->SlotMean(1).numel(), 8);
  EXPECT_EQ(norm->slot_offsets[1].item<int64_t>(), 3);
}

// Off the CPU inference keeps each slot's slices (subnet_norm.h); the switch
// runs that path here. The kept slices must follow statistics written later,
// in-place affine updates, added slots, and (half storage: cast copies) writes.
TEST(SubnetNormTest, KeptSlotSlicesFollowWritesAndNewSlots) {
  for (auto dtype : {torch::kFloat, torch::kHalf}) {
    SCOPED_TRACE(dtype == torch::kHalf ? "half statistics" : "float statistics");
    SubnetNorm norm(8, 1e-5, dtype);
    norm->set_keep_slot_slices(true);
    norm->ResetSlots({4, 8});
    torch::NoGradGuard g;
    torch::manual_seed(3);
    norm->weight.uniform_(0.5, 1.5);
    norm->bias.uniform_(-1, 1);
    auto stats = [&](int64_t c) {
      return std::make_pair(torch::randn({c}), torch::rand({c}) + 0.5);
    };
    auto check = [&](int64_t slot, const torch::Tensor& x) {
      const int64_t c = x.size(1);
      torch::Tensor want =
          ManualNorm(x, norm->SlotMean(slot).to(torch::kFloat), norm->SlotVar(slot).to(torch::kFloat),
                     norm->weight.slice(0, 0, c), norm->bias.slice(0, 0, c));
      EXPECT_TRUE(torch::allclose(norm(x, slot), want, 1e-4, 1e-4));
    };
    torch::Tensor x4 = torch::randn({2, 4, 3, 3}), x8 = torch::randn({2, 8, 3, 3});
    auto [m0, v0] = stats(4);
    norm->SetSlotStatistics(0, m0, v0);
    check(0, x4);
    check(1, x8);
    auto [m1, v1] = stats(8);
    norm->SetSlotStatistics(1, m1, v1);  // written after slot 1 was sliced
    check(1, x8);
    norm->weight.mul_(2);
    check(0, x4);
    const int64_t added = norm->AddSlot(4);  // storage reallocated
    auto [m2, v2] = stats(4);
    norm->SetSlotStatistics(added, m2, v2);
    check(added, x4);
    check(0, x4);
  }
}

TEST(SubnetNormTest, CalibrationAveragesBatchStatisticsIntoTheSlot) {
  SubnetNorm norm(4);
  norm->ResetSlots({4, 4});
  norm->set_mode(NormMode::kCalibrate);
  norm->BeginCalibration();
  torch::Tensor a = torch::randn({8, 4, 5, 5}) * 2 + 3, b = torch::randn({8, 4, 5, 5}) - 1;
  torch::Tensor out = norm(a, -1);
  // Calibration normalises with the batch's own statistics.
  EXPECT_NEAR(out.mean().item<float>(), 0.f, 1e-4);
  norm(b, -1);
  norm->FinishCalibration(1);
  torch::Tensor both = torch::cat({a, b});
  torch::Tensor want_mean = both.mean({0, 2, 3});
  torch::Tensor want_var = (a.var({0, 2, 3}, false) + b.var({0, 2, 3}, false)) / 2;
  EXPECT_TRUE(torch::allclose(norm->SlotMean(1), want_mean, 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(norm->SlotVar(1), want_var, 1e-4, 1e-5));
  EXPECT_TRUE(torch::equal(norm->SlotMean(0), torch::zeros({4})));  // untouched slot
  norm->BeginCalibration();
  EXPECT_THROW(norm->FinishCalibration(0), c10::Error);  // no batch seen
}

struct DoubleImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return x * 2; }
};
TORCH_MODULE(Double);

TEST(LayerSelectTest, RunsTheBlockOnlyWithinTheActiveDepth) {
  auto select = MakeLayerSelect(2, Double());
  torch::Tensor x = torch::ones({2});
  EXPECT_TRUE(torch::equal(select->forward(x, 3), x * 2));
  torch::Tensor skipped = select->forward(x, 2);
  EXPECT_EQ(skipped.data_ptr(), x.data_ptr());  // passed through, not copied
  EXPECT_FALSE(select->IsActive(0));
  EXPECT_TRUE(LayerSelectActive(0, 1));
  EXPECT_THROW(LayerSelectActive(-1, 1), c10::Error);
}

// Resolves `superserve.<op>` to the custom ops (the C++ frontend's default
// resolver only knows `torch`), as a Python `torch.ops.superserve` would.
struct SuperserveResolver : torch::jit::Resolver {
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name,
                                                         torch::jit::GraphFunction&,
                                                         const torch::jit::SourceRange&) override {
    if (name == "torch") return std::make_shared<torch::jit::BuiltinModule>("aten");
    if (name == "superserve") return std::make_shared<torch::jit::BuiltinModule>("superserve");
    return nullptr;
  }
  c10::TypePtr resolveType(const std::string&, const torch::jit::SourceRange&) override {
    return nullptr;
  }
};

std::string TempPath(const std::string& name) {
  return testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + ".pt";
}

TEST(TorchScriptOpsTest, ScriptedModuleMatchesTheCppModules) {
  torch::manual_seed(3);
  WeightSliceConv2d conv(8, 12, 3, 1);
  SubnetNorm norm(12);
  norm->ResetSlots({6, 10});
  norm->SetSlotStatistics(1, torch::randn({10}), torch::rand({10}) + 0.5);
  norm->set_mode(NormMode::kSlotStatistics);
  WeightSliceLinear fc(12, 5);

  torch::jit::Module m("SubnetActProbe");
  m.register_parameter("conv_w", conv->weight.detach(), false);
  m.register_parameter("norm_w", norm->weight.detach(), false);
  m.register_parameter("norm_b", norm->bias.detach(), false);
  m.register_buffer("mean", norm->mean_storage);
  m.register_buffer("var", norm->var_storage);
  m.register_buffer("offsets", norm->slot_offsets);
  m.register_buffer("channels", norm->slot_channels);
  m.register_parameter("fc_w", fc->weight.detach(), false);
  m.register_parameter("fc_b", fc->bias.detach(), false);
  m.define(R"JIT(
def forward(self, x, depth: int):
    h = superserve.weight_slice_conv2d(x, self.conv_w, None, 10, 1)
    h = superserve.subnet_norm(h, self.norm_w, self.norm_b, self.mean, self.var,
                               self.offsets, self.channels, 1, 1e-5)
    if superserve.layer_select(0, depth):
        h = torch.relu(h)
    return superserve.weight_slice_linear(h.mean([2, 3]), self.fc_w, self.fc_b, 5)
)JIT",
           std::make_shared<SuperserveResolver>());
  const std::string path = TempPath("subnetact_ops");
  m.save(path);
  torch::jit::Module loaded = torch::jit::load(path);
  std::remove(path.c_str());

  torch::NoGradGuard g;
  torch::Tensor x = torch::randn({2, 7, 6, 6});
  for (int64_t depth : {0, 1}) {
    torch::Tensor h = norm(conv(x, 10), 1);
    if (depth > 0) h = torch::relu(h);
    torch::Tensor want = fc(h.mean({2, 3}), 5);
    torch::Tensor got = loaded.forward({x, depth}).toTensor();
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << "depth " << depth;
  }
  // The ops validate inside TorchScript too.
  try {
    loaded.forward({torch::randn({2, 9, 6, 6}), int64_t{1}});
    ADD_FAILURE() << "9 input channels on an 8-channel weight must be rejected";
  } catch (const std::exception& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("9 input channels"));
  }
}

}  // namespace
}  // namespace superserve::ops
