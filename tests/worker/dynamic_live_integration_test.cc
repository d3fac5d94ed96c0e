// Both bundled models served by one router at once, with real processes on
// 127.0.0.1: the supernet (models/fmnist, its default policy) and the
// early-exit network (models/dynamic/fmnist-exit, orloj), one torch worker
// hosting both. Queries mix the two models and the three applications
// (easy, hard, noisy). Every query is answered; each early-exit answer's
// prediction equals models/early_exit's offline prediction for that input
// (batch of one), each supernet answer equals its serving subnet's offline
// prediction; the router's metrics count both models and each application.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "bench/harness/local_cluster.h"
#include "common/idx_reader.h"
#include "common/image_applications.h"
#include "common/model_repository.h"
#include "models/early_exit.h"
#include "models/ofa_resnet.h"
#include "router/client/load_generator.h"
#include "superserve/v1/tensor.pb.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

constexpr int kQueries = 300;  // half per model
const char* const kApplications[] = {"easy", "hard", "noisy"};

int32_t Predicted(const float* logits, int64_t classes) {
  return static_cast<int32_t>(std::max_element(logits, logits + classes) - logits);
}

TEST(DynamicLiveIntegration, BothModelsServedAndEveryAnswerIsTheOfflinePrediction) {
  namespace fs = std::filesystem;
  const std::string source = testing::SourceDir();
  const std::string work = testing::MakeWorkDir();
  // A repository with both bundled models. The supernet keeps 8 of its
  // subnets (spread over its Pareto front): the worker warms up every
  // (subnet, batch size) before registering, ~10 s for all 100 on 2 cores.
  const std::string repo = work + "/repo";
  fs::create_directories(repo + "/fmnist");
  {
    auto full = ModelProfile::LoadFile(source + "/models/fmnist/profile.json");
    ASSERT_TRUE(full.ok()) << full.status();
    ModelProfile trimmed = *full;
    trimmed.subnets.clear();
    const size_t n = full->subnets.size();
    for (size_t i = 0; i < 8 && i < n; ++i) trimmed.subnets.push_back(full->subnets[i * (n - 1) / 7]);
    ASSERT_TRUE(trimmed.SaveFile(repo + "/fmnist/profile.json").ok());
    fs::create_symlink(source + "/models/fmnist/checkpoint.pt", repo + "/fmnist/checkpoint.pt");
  }
  fs::create_directory_symlink(source + "/models/dynamic/fmnist-exit", repo + "/fmnist-exit");
  auto models = LoadModelRepository(repo);
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 2u);
  const ModelEntry& supernet = (*models)[0];
  const ModelEntry& dynamic = (*models)[1];
  ASSERT_EQ(supernet.name, "fmnist");
  ASSERT_EQ(dynamic.name, "fmnist-exit");

  auto test_set = LoadFashionMnist("t10k");
  ASSERT_TRUE(test_set.ok()) << test_set.status();
  auto supernet_inputs =
      MakeImageRequests(*test_set, supernet.name, supernet.profile.input_shape, 0, 1, kQueries);
  ASSERT_TRUE(supernet_inputs.ok());
  std::map<std::string, LabelledRequests> app_inputs;
  for (const char* name : kApplications) {
    const ImageApplication* app = FindImageApplication(FashionMnistApplications(), name);
    ASSERT_NE(app, nullptr);
    auto in = MakeApplicationRequests(*test_set, dynamic.name, dynamic.profile.input_shape, *app,
                                      kQueries);
    ASSERT_TRUE(in.ok()) << in.status();
    app_inputs.emplace(name, *std::move(in));
  }
  // Alternate the models; the early-exit rows cycle through the applications.
  std::vector<TraceArrival> trace = testing::PoissonTrace(kQueries, 60, 11);
  for (size_t i = 0; i < trace.size(); ++i) {
    if (i % 2 == 0) {
      trace[i].model = supernet.name;
    } else {
      trace[i].model = dynamic.name;
      trace[i].application = kApplications[(i / 2) % 3];
    }
  }
  auto inputs_for = [&](const TraceArrival& a) -> const LabelledRequests* {
    if (a.model == supernet.name) return &*supernet_inputs;
    auto it = app_inputs.find(a.application);
    return it == app_inputs.end() ? nullptr : &it->second;
  };

  LocalClusterOptions o;
  o.bin_dir = testing::BinDir();
  o.model_repo = repo;
  o.work_dir = work;
  o.workers = 1;
  o.worker_flags = {"--threads=1"};
  o.startup_timeout = Seconds(60);
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->WaitForWorkers(1, Seconds(60)).ok());
  InferenceClient client((*cluster)->router_address());
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  ReplayOptions ro;
  ro.default_slo = Millis(1000);  // low load: far above the batch latencies
  ro.progress = false;
  auto records = ReplayTrace(client, trace, inputs_for, ro);
  ASSERT_TRUE(records.ok()) << records.status();
  auto metrics = (*cluster)->ScrapeMetrics();
  (*cluster)->Stop();
  for (const std::string& line : SummarizeGroupsJson(*records)) std::printf("%s\n", line.c_str());

  // Served or refused as late, nothing else; how many in time is the host's
  // speed. The checks below need at least half of each model's queries.
  int answered_ok = 0;
  for (const auto& r : *records) {
    ASSERT_TRUE(r.answered);
    EXPECT_TRUE(r.code == absl::StatusCode::kOk || r.code == absl::StatusCode::kDeadlineExceeded)
        << absl::StatusCodeToString(r.code);
    answered_ok += r.code == absl::StatusCode::kOk;
  }
  EXPECT_GE(answered_ok, kQueries / 2);

  // Early exit: offline, each input alone through models/early_exit.
  auto net = models::EarlyExitNet::Load(dynamic.directory + "/checkpoint.pt");
  ASSERT_TRUE(net.ok()) << net.status();
  const int64_t classes = dynamic.profile.num_classes;
  int exit_compared = 0, exit_agree = 0, exits_agree = 0;
  std::map<std::string, int> exit_per_app;
  const float own_threshold = (*net)->config().exit_threshold;
  const auto& thresholds = dynamic.profile.dynamic.thresholds;
  for (const auto& r : *records) {
    if (r.model != dynamic.name || r.code != absl::StatusCode::kOk) continue;
    // Load-adaptive exits: the answer names the threshold its batch ran at,
    // one of the profile's; offline runs at it too.
    int32_t ti = -1;
    for (size_t t = 0; t < thresholds.size(); ++t) {
      if (static_cast<float>(thresholds[t].threshold) == r.exit_threshold) ti = static_cast<int32_t>(t);
    }
    ASSERT_TRUE(thresholds.empty() || ti >= 0) << "threshold " << r.exit_threshold;
    (*net)->set_exit_threshold(r.exit_threshold > 0 ? r.exit_threshold : own_threshold);
    const v1::Tensor& in = app_inputs.at(r.application).requests[r.input]->input();
    std::vector<float> x(in.data().size() / sizeof(float));
    std::memcpy(x.data(), in.data().data(), in.data().size());
    for (float& v : x) v = (v - dynamic.profile.input_mean) / dynamic.profile.input_std;
    auto alone = (*net)->Run(x.data(), 1);
    ASSERT_TRUE(alone.ok()) << alone.status();
    ++exit_compared;
    exit_agree += Predicted(alone->logits.data(), classes) == r.predicted;
    ++exit_per_app[r.application];
    exits_agree += r.exit == alone->exit_taken[0] + 1;
    // The answer carries the profiled accuracy of its application's exit.
    ASSERT_GE(r.exit, 1) << "an early-exit answer names its exit";
    EXPECT_DOUBLE_EQ(r.accuracy,
                     dynamic.profile.dynamic.ExitAccuracy(r.application, r.exit - 1, ti))
        << r.application << " exit " << r.exit << " threshold " << r.exit_threshold;
    EXPECT_GT(r.accuracy, 0) << "the bundled profile has every exit's accuracy";
  }
  std::printf("early exit: %d of %d answers equal the offline prediction\n", exit_agree,
              exit_compared);
  EXPECT_GE(exit_compared, kQueries / 4);  // half of this model's queries served
  for (const char* name : kApplications) EXPECT_GT(exit_per_app[name], 0) << name;
  // Batching changes the float summation order; a confidence within ~1e-6 of
  // the exit threshold could leave at another exit. Allow no more than that.
  EXPECT_GE(exit_agree, exit_compared - std::max(1, exit_compared / 200))
      << exit_agree << " of " << exit_compared
      << " early-exit answers match the offline prediction";
  EXPECT_GE(exits_agree, exit_compared - std::max(1, exit_compared / 200))
      << exits_agree << " of " << exit_compared << " early-exit answers left at the offline exit";

  // Supernet: each answer against its serving subnet, offline, one image at
  // a time (models/ofa_resnet directly: the executor's warm-up of every
  // subnet and batch size would double this test's time).
  auto ofa = models::OfaResNet::Load(supernet.directory + "/checkpoint.pt");
  ASSERT_TRUE(ofa.ok()) << ofa.status();
  (*ofa)->Eval();
  c10::InferenceMode guard;
  int super_compared = 0, super_agree = 0;
  for (const auto& r : *records) {
    if (r.model != supernet.name || r.code != absl::StatusCode::kOk) continue;
    const int index = supernet.profile.SubnetIndex(r.subnet_id);
    ASSERT_GE(index, 0) << "answer names unknown subnet " << r.subnet_id;
    const v1::Tensor& in = supernet_inputs->requests[r.input]->input();
    std::vector<int64_t> shape = {1};
    shape.insert(shape.end(), supernet.profile.input_shape.begin(),
                 supernet.profile.input_shape.end());
    torch::Tensor x = torch::empty(shape, torch::kFloat32);
    std::memcpy(x.data_ptr(), in.data().data(), in.data().size());
    x.sub_(supernet.profile.input_mean).div_(supernet.profile.input_std);
    ASSERT_TRUE((*ofa)->Actuate(supernet.profile.subnets[index].control).ok());
    auto logits = (*ofa)->Infer(x);
    ASSERT_TRUE(logits.ok()) << logits.status();
    torch::Tensor out = logits->contiguous().to(torch::kFloat32);
    ++super_compared;
    super_agree += Predicted(out.data_ptr<float>(), out.size(1)) == r.predicted;
  }
  std::printf("supernet: %d of %d answers equal the offline prediction\n", super_agree,
              super_compared);
  EXPECT_GE(super_compared, kQueries / 4);  // half of this model's queries served
  EXPECT_GE(super_agree, super_compared - std::max(1, super_compared / 200))
      << super_agree << " of " << super_compared
      << " supernet answers match their subnet's offline prediction";

  // Per-model and per-application metrics.
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NE(metrics->find("superserve_slo_attainment{model=\"fmnist\"}"), std::string::npos);
  EXPECT_NE(metrics->find("superserve_slo_attainment{model=\"fmnist-exit\"}"), std::string::npos);
  for (const char* name : kApplications) {
    EXPECT_NE(metrics->find(absl::StrCat("superserve_application_slo_attainment{application=\"",
                                         name, "\",model=\"fmnist-exit\"}")),
              std::string::npos)
        << name;
  }
}

}  // namespace
}  // namespace superserve
