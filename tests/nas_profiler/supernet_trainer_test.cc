// The NAS profiler's torch side on the "tiny" config and a few hundred
// Fashion-MNIST images: seconds, not minutes.
#include "nas_profiler/supernet_trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "common/model_profile.h"
#include "models/ofa_resnet.h"
#include "models/ofa_resnet_config.h"
#include "nas_profiler/nas_configs.h"
#include "nas_profiler/search.h"

namespace superserve::nas {
namespace {

using models::OfaResNet;

// Disjoint slices of the t10k split (smaller to read than the training split).
struct TinyData {
  FashionMnistSplits splits;
};

const TinyData& Data() {
  static const TinyData* data = [] {
    auto raw = LoadFashionMnist("t10k");
    EXPECT_TRUE(raw.ok()) << raw.status();
    auto slice = [&](int64_t begin, int64_t n) {
      std::vector<int64_t> idx(n);
      std::iota(idx.begin(), idx.end(), begin);
      auto set = ImageDataset::FromLabeledImages(*raw, idx);
      EXPECT_TRUE(set.ok()) << set.status();
      return *set;
    };
    auto* d = new TinyData;
    d->splits.train = slice(0, 1024);
    d->splits.validation = slice(1024, 256);
    d->splits.test = slice(1280, 256);
    return d;
  }();
  return *data;
}

std::unique_ptr<OfaResNet> TinyModel(uint64_t seed = 3) {
  auto config = NamedConfig("tiny");
  EXPECT_TRUE(config.ok());
  auto model = OfaResNet::Create(*config, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid())))
      .string();
}

// One tiny supernet trained for 3 epochs on 1024 images, shared by the
// calibration/eval/search tests; each loads its own copy.
const std::string& TrainedTinyCheckpoint() {
  static const std::string* path = [] {
    SetTorchThreads(1);
    auto model = TinyModel();
    TrainOptions options;
    options.epochs = 3;
    options.batch_size = 64;
    options.random_subnets = 1;
    options.augment = false;
    auto* p = new std::string(TempPath("nas_trained_tiny.pt"));
    EXPECT_TRUE(TrainSupernet(*model, Data().splits.train, options).ok());
    EXPECT_TRUE(model->Save(*p).ok());
    return p;
  }();
  return *path;
}

std::unique_ptr<OfaResNet> TrainedTinyModel() {
  auto model = OfaResNet::Load(TrainedTinyCheckpoint());
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

double Mean(const std::vector<double>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + begin, v.begin() + end, 0.0) / (end - begin);
}

TEST(SupernetTrainerTest, SplitsKeepValidationAsideDeterministically) {
  // Uses the real split function on the real training file: same seed, same split.
  auto a = LoadFashionMnistSplits(kFashionMnistDir, 5000, 7, /*load_test=*/false);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->train.size(), 55000);
  EXPECT_EQ(a->validation.size(), 5000);
  EXPECT_FALSE(LoadFashionMnistSplits(kFashionMnistDir, 60000, 7, false).ok());
}

TEST(SupernetTrainerTest, TrainingReducesLoss) {
  SetTorchThreads(1);
  auto model = TinyModel();
  TrainOptions options;
  options.epochs = 2;
  options.batch_size = 64;
  options.learning_rate = 0.1;
  options.random_subnets = 1;
  options.augment = false;
  options.seed = 5;
  auto report = TrainSupernet(*model, Data().splits.train, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->steps, 32);
  ASSERT_EQ(report->largest_losses.size(), 32u);
  const double first = Mean(report->largest_losses, 0, 6);
  const double last = Mean(report->largest_losses, 26, 32);
  EXPECT_LT(last, 0.8 * first) << "first steps " << first << ", last steps " << last;
}

TEST(SupernetTrainerTest, MaxStepsAndCheckpointEveryEpoch) {
  auto model = TinyModel();
  TrainOptions options;
  options.epochs = 3;
  options.batch_size = 256;
  options.max_steps = 5;  // 4 steps per epoch: stops in the second epoch
  options.random_subnets = 0;
  options.checkpoint_path = TempPath("nas_ckpt.pt");
  auto report = TrainSupernet(*model, Data().splits.train, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->steps, 5);
  EXPECT_EQ(report->epochs_done, 2);
  auto loaded = OfaResNet::Load(options.checkpoint_path);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  std::remove(options.checkpoint_path.c_str());
}

TEST(SupernetTrainerTest, CalibrationChangesStatisticsDeterministically) {
  auto model = TrainedTinyModel();
  ControlTuple smallest = models::SmallestArchitecture(model->config());
  ControlTuple largest = models::LargestArchitecture(model->config());
  smallest.subnet_id = 0;
  largest.subnet_id = 1;
  ASSERT_TRUE(model->SetSlots({smallest, largest}).ok());
  auto before = SlotStatistics(*model, 0);
  ASSERT_TRUE(before.ok());
  ASSERT_FALSE(before->empty());

  const ImageDataset calibration = Data().splits.train.Prefix(300);
  ASSERT_TRUE(CalibrateSlot(*model, 0, calibration, 128).ok());
  auto after = SlotStatistics(*model, 0);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), before->size());
  size_t changed = 0;
  for (size_t i = 0; i < after->size(); ++i) changed += (*after)[i] != (*before)[i];
  EXPECT_GT(changed, after->size() * 9 / 10) << "calibration left most statistics unchanged";
  // Slot 1 was not calibrated; its statistics are still the initial 0/1.
  auto other = SlotStatistics(*model, 1);
  ASSERT_TRUE(other.ok());
  size_t ones = 0;
  for (float v : *other) ones += v == 1.0f;
  EXPECT_EQ(ones, other->size() / 2);

  // Same data, same order: the same statistics, bit for bit.
  ASSERT_TRUE(CalibrateSlot(*model, 0, calibration, 128).ok());
  auto again = SlotStatistics(*model, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *after);
  EXPECT_FALSE(CalibrateSlot(*model, 2, calibration).ok());
}

TEST(SupernetTrainerTest, EvaluationIsExactAfterSaveAndLoad) {
  SetTorchThreads(1);
  auto model = TrainedTinyModel();
  ControlTuple largest = models::LargestArchitecture(model->config());
  largest.subnet_id = 0;
  ASSERT_TRUE(model->SetSlots({largest}).ok());
  ASSERT_TRUE(CalibrateSlot(*model, 0, Data().splits.train.Prefix(512), 256).ok());
  auto accuracy = EvaluateSubnet(*model, largest, Data().splits.test, 100);
  ASSERT_TRUE(accuracy.ok()) << accuracy.status();
  EXPECT_EQ(accuracy->total, 256);
  EXPECT_GT(accuracy->accuracy_percent, 30.0) << "three epochs on 1024 images beat chance (10%)";

  const std::string path = TempPath("nas_eval.pt");
  ASSERT_TRUE(model->Save(path).ok());
  auto loaded = OfaResNet::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto reloaded_accuracy = EvaluateSubnet(**loaded, largest, Data().splits.test, 100);
  ASSERT_TRUE(reloaded_accuracy.ok());
  EXPECT_EQ(reloaded_accuracy->correct, accuracy->correct);
  std::remove(path.c_str());
}

TEST(SupernetTrainerTest, LatencyIsPositivePerBatchSize) {
  SetTorchThreads(1);
  auto model = TinyModel();
  ControlTuple smallest = models::SmallestArchitecture(model->config());
  smallest.subnet_id = 0;
  ASSERT_TRUE(model->SetSlots({smallest}).ok());
  auto latency = MeasureLatency(*model, smallest, {1, 4, 16}, 1, 3);
  ASSERT_TRUE(latency.ok()) << latency.status();
  ASSERT_EQ(latency->size(), 3u);
  for (Nanos t : *latency) EXPECT_GT(t, 0);
  EXPECT_FALSE(MeasureLatency(*model, smallest, {1}, 0, 0).ok());
}

TEST(SearchTest, SearchWritesAValidProfileThatEvalReproduces) {
  SetTorchThreads(1);
  auto model = TrainedTinyModel();
  SearchOptions options;
  // 50 sampled: enough for the accuracy model (2 x its 21 tiny features).
  options.num_candidates = 50;
  options.evolution_rounds = 1;
  options.mutations_per_round = 5;
  options.search_calibration_images = 256;
  options.calibration_images = 512;
  options.search_repeats = 1;
  options.batch_sizes = {1, 2, 4};
  options.profile_warmup = 1;
  options.profile_repeats = 2;
  options.model_name = "tiny-test";
  options.measured_on = "test";
  size_t after_round0 = 0;
  options.log = [&after_round0](const std::string& line) {
    // "round 0: N candidates, M on the validation frontier (...)"
    if (line.rfind("round 0: ", 0) == 0 && line.find(" candidates, ") != std::string::npos) {
      after_round0 = std::stoul(line.substr(9));
    }
  };
  std::vector<size_t> pool_per_round;
  options.on_round = [&pool_per_round](const SearchResult& so_far) {
    pool_per_round.push_back(so_far.candidates.size());
  };
  const std::string checkpoint = TempPath("nas_search.pt");
  const std::string profile_path = TempPath("nas_search.json");
  auto result = SearchAndProfile(*model, Data().splits, options, checkpoint, profile_path);
  ASSERT_TRUE(result.ok()) << result.status();
  // on_round saw the pool after round 0 and after round 1.
  ASSERT_EQ(pool_per_round.size(), 2u);
  EXPECT_EQ(pool_per_round[0], after_round0);
  EXPECT_EQ(pool_per_round[1], result->candidates.size());
  // 50 sampled + smallest + largest (less duplicates), then the round
  // measures exactly the 5 mutations (of 50 proposed) its models rank
  // furthest above the frontier.
  EXPECT_GE(after_round0, 45u);
  EXPECT_EQ(result->candidates.size(), after_round0 + 5);
  ASSERT_FALSE(result->frontier.empty());
  // Ranked by the latency model fitted to all timings (>= 8 candidates) and
  // the accuracy model fitted to all validation accuracies.
  EXPECT_NE(result->latency_model.find("R^2"), std::string::npos) << result->latency_model;
  EXPECT_NE(result->accuracy_model.find("ridge regression"), std::string::npos)
      << result->accuracy_model;
  int differs = 0, accuracy_differs = 0;
  for (const CandidateResult& c : result->candidates) {
    EXPECT_GT(c.cost.macs, 0);
    differs += c.ranking_latency_us != ToMicros(c.search_latency);
    accuracy_differs += c.ranking_accuracy != c.validation_accuracy;
  }
  EXPECT_GT(differs, 0);
  EXPECT_GT(accuracy_differs, 0);

  auto profile = ModelProfile::LoadFile(profile_path);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->model, "tiny-test");
  EXPECT_EQ(profile->family, "ofa_resnet");
  EXPECT_EQ(profile->input_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(profile->num_classes, 10);
  // The file holds every frontier subnet; loading leaves out of the choices
  // one whose measured latencies (timing noise) make it dominated, with a
  // warning, and keeps it in left_out.
  ASSERT_EQ(profile->subnets.size() + profile->left_out.size(), result->frontier.size());
  EXPECT_EQ(profile->left_out.empty(), profile->warnings.empty());
  const std::vector<SubnetProfile> every = profile->EverySubnet();
  // The frontier is sorted by ranking latency and strictly increasing in
  // ranking (predicted) accuracy.
  for (size_t i = 1; i < result->frontier.size(); ++i) {
    EXPECT_LE(result->candidates[result->frontier[i - 1]].ranking_latency_us,
              result->candidates[result->frontier[i]].ranking_latency_us);
    EXPECT_GT(result->candidates[result->frontier[i]].ranking_accuracy,
              result->candidates[result->frontier[i - 1]].ranking_accuracy);
  }

  auto reloaded = OfaResNet::Load(checkpoint);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  ASSERT_EQ((*reloaded)->NumSlots(), static_cast<int>(every.size()));
  for (const SubnetProfile& subnet : every) {
    auto test = EvaluateSubnet(**reloaded, subnet.control, Data().splits.test, kEvalBatchSize);
    ASSERT_TRUE(test.ok()) << test.status();
    EXPECT_EQ(test->accuracy_percent, subnet.accuracy) << "subnet " << subnet.id;
    EXPECT_GT(subnet.macs, 0);
  }

  // Continuing from the measured pool: nothing is measured again, and with
  // no new rounds the frontier is the same architectures.
  SearchOptions again = options;
  again.num_candidates = 0;
  again.evolution_rounds = 0;
  again.previous = result->candidates;
  again.previous.push_back(result->candidates.front());  // a duplicate is skipped
  auto resumed = SearchAndProfile(*model, Data().splits, again, checkpoint, profile_path);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->candidates.size(), result->candidates.size());
  ASSERT_EQ(resumed->frontier.size(), result->frontier.size());
  for (size_t i = 0; i < result->frontier.size(); ++i) {
    EXPECT_EQ(resumed->candidates[resumed->frontier[i]].validation_accuracy,
              result->candidates[result->frontier[i]].validation_accuracy);
  }
  std::remove(checkpoint.c_str());
  std::remove(profile_path.c_str());
}

}  // namespace
}  // namespace superserve::nas
