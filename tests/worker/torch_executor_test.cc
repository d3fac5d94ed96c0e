// The real executor on the bundled model: a batch whose size is not a
// profiled batch size is padded to one (the warmed-up, profiled shape) and
// still answers exactly its own rows, each as the subnet answers it alone.
#include "worker/torch_executor.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "common/model_repository.h"
#include "models/ofa_resnet.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {
namespace {

// `count` wire tensors of `shape` with uniform [0, 1) pixels, seeded.
std::vector<v1::Tensor> RandomImages(const std::vector<int64_t>& shape, int count, uint32_t seed) {
  int64_t sample = 1;
  for (int64_t d : shape) sample *= d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0.f, 1.f);
  std::vector<v1::Tensor> images(count);
  for (auto& t : images) {
    std::vector<float> v(sample);
    for (float& x : v) x = pixel(rng);
    EncodeTensor(MakeFloatTensor(shape, v), &t);
  }
  return images;
}

TEST(TorchExecutorTest, UnprofiledBatchSizesArePaddedAndAnswerOnlyTheirRows) {
  auto models = LoadModelRepository(std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models");
  ASSERT_TRUE(models.ok()) << models.status();
  ModelEntry model = models->front();
  // Two subnets and batch sizes {1, 4}: a batch of 3 runs padded to 4.
  model.profile.subnets.resize(2);
  model.profile.batch_sizes = {1, 4};
  for (auto& s : model.profile.subnets) s.latency.resize(2);
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->Load(model).ok());

  std::vector<v1::Tensor> images = RandomImages(model.profile.input_shape, 3, 5);
  const ControlTuple& control = model.profile.subnets[1].control;
  auto batch = (*executor)->Run(model.name, control, {&images[0], &images[1], &images[2]});
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto alone = (*executor)->Run(model.name, control, {&images[i]});
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_EQ((*batch)[i].num_elements(), model.profile.num_classes);
    for (int64_t k = 0; k < model.profile.num_classes; ++k) {
      EXPECT_NEAR((*batch)[i].as<float>()[k], (*alone)[0].as<float>()[k], 1e-3)
          << "row " << i << " logit " << k;
    }
  }
  // Larger than the largest profiled batch: runs unpadded, still all rows.
  std::vector<const v1::Tensor*> five(5, &images[0]);
  auto big = (*executor)->Run(model.name, control, five);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->size(), 5u);
}

// Placement's footprint of the bundled supernet: its parameters and buffers
// (every slot's statistics included), as the model library counts them.
TEST(TorchExecutorTest, TheFootprintIsTheSupernetsParametersAndBuffers) {
  auto models = LoadModelRepository(std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models");
  ASSERT_TRUE(models.ok()) << models.status();
  ModelEntry model = models->front();
  model.profile.subnets.resize(1);
  model.profile.batch_sizes = {1};
  model.profile.subnets[0].latency.resize(1);
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->Load(model).ok());
  auto checkpoint = FindCheckpoint(model.directory);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto net = models::OfaResNet::Load(*checkpoint);
  ASSERT_TRUE(net.ok()) << net.status();
  int64_t bytes = 0;
  for (const auto& p : (*net)->module().parameters()) bytes += p.nbytes();
  for (const auto& b : (*net)->module().buffers()) bytes += b.nbytes();
  ASSERT_GT(bytes, 0);
  EXPECT_EQ((*executor)->ResidentBytes(model.name), bytes);
  EXPECT_EQ((*executor)->ResidentBytes("other"), 0);
}

// --device cuda: refused naming what is missing where CUDA cannot run; where
// it can (docs/gpu.md), the bundled model served from the GPU answers what
// the CPU executor answers, every subnet of its profile.
TEST(TorchExecutorTest, CudaExecutorAnswersWhatTheCpuExecutorAnswers) {
  auto gpu = MakeTorchExecutor(1, "cuda");
  if (!torch::cuda::is_available()) {
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(gpu.status().message().find("docs/gpu.md"), std::string::npos) << gpu.status();
    return;
  }
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = MakeTorchExecutor(1, "cpu");
  ASSERT_TRUE(cpu.ok());
  auto models = LoadModelRepository(std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models");
  ASSERT_TRUE(models.ok()) << models.status();
  for (const ModelEntry& model : *models) {
    ASSERT_TRUE((*cpu)->Load(model).ok()) << model.name;
    ASSERT_TRUE((*gpu)->Load(model).ok()) << model.name;
    std::vector<v1::Tensor> images = RandomImages(model.profile.input_shape, 4, 9);
    const std::vector<const v1::Tensor*> batch = {&images[0], &images[1], &images[2], &images[3]};
    std::vector<ControlTuple> controls;
    for (const auto& s : model.profile.subnets) controls.push_back(s.control);
    if (controls.empty()) controls.push_back(ControlTuple());  // a dynamic model
    // All on one fresh thread, prepared once, as the worker's executor thread
    // is (a fresh thread per subnet took 3 s each on an H200: CUDA library
    // handles are per thread, and the test took 327 s).
    std::vector<absl::StatusOr<std::vector<HostTensor>>> got;
    std::thread batch_thread([&] {
      (*gpu)->PrepareThread();
      for (const ControlTuple& control : controls) {
        got.push_back((*gpu)->Run(model.name, control, batch));
      }
    });
    batch_thread.join();
    ASSERT_EQ(got.size(), controls.size());
    for (size_t c = 0; c < controls.size(); ++c) {
      const ControlTuple& control = controls[c];
      auto want = (*cpu)->Run(model.name, control, batch);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got[c].ok()) << got[c].status();
      ASSERT_EQ(got[c]->size(), want->size());
      for (size_t i = 0; i < got[c]->size(); ++i) {
        for (int64_t k = 0; k < (*want)[i].num_elements(); ++k) {
          // TF32 convolutions on the GPU (cuDNN's default): ~1e-3 relative per layer.
          const float w = (*want)[i].as<float>()[k];
          EXPECT_NEAR((*got[c])[i].as<float>()[k], w, 1e-2f * std::max(1.f, std::abs(w)))
              << model.name << " subnet " << control.subnet_id << " row " << i << " logit " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace superserve
