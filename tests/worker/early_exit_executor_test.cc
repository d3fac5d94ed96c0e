// The torch executor on the bundled early-exit model (family early_exit):
// a batch of mixed-difficulty inputs runs until its slowest member has left,
// and each query answers with the logits and the exit it takes alone
// (models/early_exit offline, batch of one).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <vector>

#include "common/idx_reader.h"
#include "common/image_applications.h"
#include "common/model_repository.h"
#include "models/early_exit.h"
#include "superserve/v1/tensor.pb.h"
#include "worker/torch_executor.h"

namespace superserve {
namespace {

TEST(EarlyExitExecutorTest, BatchAnswersEachQueryAsItsOfflineExit) {
  const std::string dir = std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models/dynamic/fmnist-exit";
  auto model = LoadModelDirectory(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->Load(*model).ok());
  auto offline = models::EarlyExitNet::Load(dir + "/checkpoint.pt");
  ASSERT_TRUE(offline.ok()) << offline.status();
  auto test_set = LoadFashionMnist("t10k");
  ASSERT_TRUE(test_set.ok()) << test_set.status();

  // 16 inputs: 8 easy and 8 noisy, alternating, so the batch needs its last
  // stage while some members leave at the first.
  const auto& apps = FashionMnistApplications();
  const ImageApplication* easy = FindImageApplication(apps, "easy");
  const ImageApplication* noisy = FindImageApplication(apps, "noisy");
  ASSERT_NE(easy, nullptr);
  ASSERT_NE(noisy, nullptr);
  auto easy_images = ApplicationImages(*easy, test_set->labels.data);
  const int64_t px = test_set->images.item_size();
  std::vector<v1::Tensor> wire(16);
  std::vector<std::vector<float>> plain(16, std::vector<float>(px));
  for (int i = 0; i < 16; ++i) {
    const ImageApplication& app = i % 2 == 0 ? *easy : *noisy;
    const int64_t index = i % 2 == 0 ? easy_images[i] : i;
    ApplicationInput(app, index,
                     absl::MakeConstSpan(test_set->images.data.data() + index * px, px),
                     plain[i].data());
    EncodeTensor(MakeFloatTensor(model->profile.input_shape, plain[i]), &wire[i]);
  }
  std::vector<const v1::Tensor*> inputs;
  for (const auto& t : wire) inputs.push_back(&t);
  std::vector<QueryExit> exits;
  auto out = (*executor)->RunWithExits(model->name, ControlTuple(), inputs, {}, &exits);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 16u);
  ASSERT_EQ(exits.size(), 16u);

  int max_exit = 0, min_exit = 99;
  for (int i = 0; i < 16; ++i) {
    std::vector<float> x = plain[i];
    for (float& v : x) v = (v - model->profile.input_mean) / model->profile.input_std;
    auto alone = (*offline)->Run(x.data(), 1);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(exits[i].exit, alone->exit_taken[0]) << "query " << i;
    for (int k = 0; k < model->profile.num_classes; ++k) {
      EXPECT_NEAR((*out)[i].as<float>()[k], alone->logits[k], 1e-3) << "query " << i;
    }
    EXPECT_GT(exits[i].at, 0);
    EXPECT_GT(exits[i].own, 0);
    max_exit = std::max(max_exit, exits[i].exit);
    min_exit = std::min(min_exit, exits[i].exit);
  }
  ASSERT_LT(min_exit, max_exit) << "the inputs should leave at different exits";
  // Padding semantics: a later exit is reached later in the same batch.
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      if (exits[i].exit < exits[j].exit) EXPECT_LT(exits[i].at, exits[j].at);
      if (exits[i].exit == exits[j].exit) EXPECT_EQ(exits[i].at, exits[j].at);
    }
  }
  // Run (without exits) answers the same.
  auto plain_run = (*executor)->Run(model->name, ControlTuple(), inputs);
  ASSERT_TRUE(plain_run.ok());
  EXPECT_EQ((*plain_run)[3].data, (*out)[3].data);

  // Load-adaptive exits: the batch's threshold (ControlTuple::exit_threshold)
  // applies to that batch only. At 0.05 every sample leaves at the first
  // exit (a softmax over 10 classes has a maximum >= 0.1); at 1.0 none
  // leaves earlier than at the model's own 0.9; 0 is the model's own again.
  ControlTuple low;
  low.exit_threshold = 0.05f;
  std::vector<QueryExit> low_exits;
  ASSERT_TRUE((*executor)->RunWithExits(model->name, low, inputs, {}, &low_exits).ok());
  ControlTuple high;
  high.exit_threshold = 1.0f;
  std::vector<QueryExit> high_exits;
  ASSERT_TRUE((*executor)->RunWithExits(model->name, high, inputs, {}, &high_exits).ok());
  std::vector<QueryExit> again;
  ASSERT_TRUE((*executor)->RunWithExits(model->name, ControlTuple(), inputs, {}, &again).ok());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(low_exits[i].exit, 0) << "query " << i;
    EXPECT_GE(high_exits[i].exit, exits[i].exit) << "query " << i;
    EXPECT_EQ(again[i].exit, exits[i].exit) << "query " << i;
  }
  ControlTuple bad;
  bad.exit_threshold = 1.5f;
  auto refused = (*executor)->RunWithExits(model->name, bad, inputs, {}, &low_exits);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
}

// A profile that disagrees with its checkpoint (the bundled one has 10
// classes and 3 exits) is refused at load naming the field and the file: it
// used to load and serve 10 logits under a profile of 5 classes, or report
// exit accuracies for exits the network does not have. A checkpoint of
// another family is refused without LibTorch's C++ backtrace.
TEST(EarlyExitExecutorTest, AProfileThatDisagreesWithTheCheckpointIsRefusedNamingBoth) {
  const std::string dir = std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models/dynamic/fmnist-exit";
  auto loaded = LoadModelDirectory(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  {
    ModelEntry model = *loaded;
    model.profile.num_classes = 5;
    auto executor = MakeTorchExecutor(1);
    ASSERT_TRUE(executor.ok());
    absl::Status st = (*executor)->Load(model);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("num_classes 5"), std::string::npos) << st;
    EXPECT_NE(st.message().find("checkpoint.pt has 10 classes"), std::string::npos) << st;
  }
  for (size_t exits : {2u, 5u}) {
    ModelEntry model = *loaded;
    model.profile.dynamic.exit_accuracy.assign(exits, 90.0);
    auto executor = MakeTorchExecutor(1);
    ASSERT_TRUE(executor.ok());
    absl::Status st = (*executor)->Load(model);
    ASSERT_FALSE(st.ok()) << exits;
    EXPECT_NE(st.message().find("dynamic.exit_accuracy has " + std::to_string(exits)),
              std::string::npos)
        << st;
    EXPECT_NE(st.message().find("has 3 exits"), std::string::npos) << st;
  }
  {
    ModelEntry model = *loaded;
    ASSERT_FALSE(model.profile.dynamic.applications.empty());
    model.profile.dynamic.applications[0].exit_accuracy.assign(2, 90.0);
    auto executor = MakeTorchExecutor(1);
    ASSERT_TRUE(executor.ok());
    absl::Status st = (*executor)->Load(model);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("exit_accuracy has 2 entries"), std::string::npos) << st;
  }
  {
    // A weight of another shape: the warm-up fails, and the message names
    // the checkpoint (it used to say only "early exit: mat1 and mat2 ...").
    auto net = models::EarlyExitNet::Load(dir + "/checkpoint.pt");
    ASSERT_TRUE(net.ok()) << net.status();
    std::vector<at::Tensor> params = (*net)->Parameters();
    ASSERT_FALSE(params.empty());
    {
      torch::NoGradGuard no_grad;
      params.back().set_(torch::zeros({3, 5}));
    }
    const std::string tmp = ::testing::TempDir() + "/early_exit_executor_test_" +
                            std::to_string(getpid()) + "_bad.pt";
    ASSERT_TRUE((*net)->Save(tmp).ok());
    ModelEntry model = *loaded;
    model.directory = ::testing::TempDir();
    ASSERT_TRUE(model.manifest.has_value());
    model.manifest->checkpoint = tmp.substr(::testing::TempDir().size());
    while (!model.manifest->checkpoint.empty() && model.manifest->checkpoint[0] == '/') {
      model.manifest->checkpoint.erase(0, 1);
    }
    auto executor = MakeTorchExecutor(1);
    ASSERT_TRUE(executor.ok());
    absl::Status st = (*executor)->Load(model);
    std::remove(tmp.c_str());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("_bad.pt fails its warm-up"), std::string::npos) << st;
  }
  auto other = models::EarlyExitNet::Load(std::string(SUPERSERVE_TEST_SOURCE_DIR) +
                                          "/models/fmnist/checkpoint.pt");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("config/in_channels"), std::string::npos)
      << other.status();
  EXPECT_EQ(other.status().message().find("frame #"), std::string::npos) << other.status();
}

}  // namespace
}  // namespace superserve
