// models/device.h and the models' MoveTo. Everywhere: device names are
// checked and a CUDA request on a machine or build without CUDA is refused
// naming what is missing. Where CUDA runs (docs/gpu.md): the bundled
// supernet, a slot added after the move and the early-exit model compute on
// the GPU what they compute on the CPU.
#include "models/device.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <string>
#include <vector>

#include "models/early_exit.h"
#include "models/ofa_resnet.h"

namespace superserve::models {
namespace {

TEST(DeviceTest, NamesAreChecked) {
  EXPECT_TRUE(CheckDevice("cpu").ok());
  absl::Status bad = CheckDevice("gpu0");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("gpu0"), std::string::npos) << bad;
  absl::Status other = CheckDevice("meta");
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.message().find("only cpu and cuda"), std::string::npos) << other;
}

TEST(DeviceTest, CudaIsRefusedWhereItCannotRunAndCountedWhereItCan) {
  absl::Status cuda = CheckDevice("cuda");
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(cuda.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(cuda.message().find("docs/gpu.md"), std::string::npos) << cuda;
    auto net = OfaResNet::Create(OfaResNetConfig::FashionMnist(), 1);
    ASSERT_TRUE(net.ok());
    EXPECT_EQ((*net)->MoveTo("cuda").code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ((*net)->device(), "cpu");  // a refused move changes nothing
    return;
  }
  EXPECT_TRUE(cuda.ok()) << cuda;
  const std::string past =
      "cuda:" + std::to_string(static_cast<int>(torch::cuda::device_count()));
  EXPECT_EQ(CheckDevice(past).code(), absl::StatusCode::kInvalidArgument);
}

// The device half: only where CUDA runs (the GPU session's check in
// scripts/gpu-check); elsewhere the refusal above is what is tested.
TEST(DeviceTest, SupernetOnCudaComputesWhatItComputesOnTheCpu) {
  if (!torch::cuda::is_available()) {
    EXPECT_FALSE(CheckDevice("cuda").ok());
    return;
  }
  torch::NoGradGuard no_grad;
  const OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  auto cpu = OfaResNet::Create(c, 7);
  auto gpu = OfaResNet::Create(c, 7);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  std::vector<ControlTuple> archs = *SampleArchitectures(c, 3, 7);
  archs.push_back(SmallestArchitecture(c));
  for (size_t i = 0; i < archs.size(); ++i) archs[i].subnet_id = static_cast<int32_t>(i);
  ASSERT_TRUE((*cpu)->SetSlots(archs).ok());
  ASSERT_TRUE((*gpu)->SetSlots({archs[0], archs[1], archs[2]}).ok());
  const torch::Tensor calib = torch::randn({16, 1, 28, 28});
  for (auto* net : {&*cpu, &*gpu}) {
    for (int s = 0; s < (*net)->NumSlots(); ++s) {
      ASSERT_TRUE((*net)->BeginCalibration(s).ok());
      (*net)->Forward(calib);
      ASSERT_TRUE((*net)->FinishCalibration().ok());
    }
  }
  ASSERT_TRUE((*gpu)->MoveTo("cuda").ok());
  // A slot added after the move lives on the GPU too.
  auto added = (*gpu)->AddSlot(archs[3]);
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_TRUE((*gpu)->BeginCalibration(*added).ok());
  (*gpu)->Forward(calib);
  ASSERT_TRUE((*gpu)->FinishCalibration().ok());
  (*cpu)->Eval();
  (*gpu)->Eval();
  const torch::Tensor x = torch::randn({8, 1, 28, 28});
  for (const ControlTuple& a : archs) {
    ASSERT_TRUE((*cpu)->Actuate(a).ok());
    ASSERT_TRUE((*gpu)->Actuate(a).ok());
    torch::Tensor want = (*cpu)->Forward(x);
    torch::Tensor got = (*gpu)->Forward(x);  // input on the CPU: copied over
    EXPECT_TRUE(got.device().is_cuda());
    // cuDNN convolutions run in TF32 by default (a 10-bit mantissa): logits
    // agree to about 1e-3 relative per layer, not to the CPU's float32 bits.
    EXPECT_TRUE(torch::allclose(got.cpu(), want, 1e-2, 1e-2))
        << "subnet " << a.subnet_id << " max diff "
        << (got.cpu() - want).abs().max().item<float>();
  }
}

TEST(DeviceTest, EarlyExitOnCudaTakesTheSameExits) {
  if (!torch::cuda::is_available()) {
    auto net = EarlyExitNet::Create(EarlyExitConfig(), 3);
    ASSERT_TRUE(net.ok());
    EXPECT_FALSE((*net)->MoveTo("cuda").ok());
    return;
  }
  EarlyExitConfig c;
  auto cpu = EarlyExitNet::Create(c, 3);
  auto gpu = EarlyExitNet::Create(c, 3);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  ASSERT_TRUE((*gpu)->MoveTo("cuda").ok());
  std::mt19937_64 rng(2);
  std::normal_distribution<float> d(0.f, 1.f);
  const int64_t n = 32;
  std::vector<float> x(static_cast<size_t>(n * 28 * 28));
  for (float& v : x) v = d(rng);
  // Untrained confidences sit just above 0.1: a threshold in that range
  // sends samples out at every exit.
  for (auto* net : {&*cpu, &*gpu}) (*net)->set_exit_threshold(0.105f);
  auto want = (*cpu)->Run(x.data(), n);
  auto got = (*gpu)->Run(x.data(), n);
  ASSERT_TRUE(want.ok() && got.ok());
  int differ = 0;
  for (int64_t s = 0; s < n; ++s) differ += want->exit_taken[s] != got->exit_taken[s];
  // A confidence within float noise of the threshold may flip one sample.
  EXPECT_LE(differ, 1);
  EXPECT_EQ(got->logits.size(), want->logits.size());
}

}  // namespace
}  // namespace superserve::models
