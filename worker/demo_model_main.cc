// superserve-demo-model: builds a small model repository on this machine for
// the engine's demo and tests when no trained repository (nas_profiler's
// output) is at hand: a Fashion-MNIST OFA-ResNet supernet trained for a fixed
// time budget with the sandwich rule, K subnets as SubnetNorm slots (smallest,
// largest, seeded samples) calibrated on training data, each subnet's top-1
// accuracy on the Fashion-MNIST test set, and its latency per batch size
// measured here through the worker's own TorchExecutor. Keeps the Pareto
// frontier. Writes <out>/<name>/{supernet.pt,profile.json}.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/idx_reader.h"
#include "common/init.h"
#include "common/logging.h"
#include "common/model_repository.h"
#include "common/progress.h"
#include "common/tensor_codec.h"
#include "models/ofa_resnet.h"
#include "nas_profiler/pareto.h"
#include "superserve/v1/tensor.pb.h"
#include "worker/torch_executor.h"

ABSL_FLAG(std::string, out, "", "Model repository directory to write into (created).");
ABSL_FLAG(std::string, name, "fmnist_ofa", "Model name (its directory).");
ABSL_FLAG(int32_t, subnets, 8, "Subnets (slots) to profile before the Pareto filter.");
ABSL_FLAG(double, train_seconds, 45, "Training time budget, seconds.");
ABSL_FLAG(int32_t, train_batch, 64, "Training batch size.");
ABSL_FLAG(int32_t, eval_images, 10000, "Test images for each subnet's accuracy.");
ABSL_FLAG(std::string, batch_sizes, "1,2,4,8,16,32", "Profiled batch sizes.");
ABSL_FLAG(int32_t, latency_reps, 7, "Timed runs per (subnet, batch); the median is kept.");
ABSL_FLAG(int32_t, threads, 1, "Intra-op threads (match the workers' --threads).");
ABSL_FLAG(uint64_t, seed, 1, "Seed for initialisation, sampling and batches.");
ABSL_FLAG(int32_t, calibration_batches, 8, "Training batches of 256 per subnet's SubnetNorm calibration.");
ABSL_FLAG(bool, reuse, false, "Do nothing when OUT/NAME already has profile.json and supernet.pt.");

namespace superserve {
namespace {

using models::OfaResNet;

torch::Tensor Images(const LabeledImages& d, const std::vector<int64_t>& idx) {
  torch::Tensor x = torch::empty({static_cast<int64_t>(idx.size()), 1, 28, 28});
  float* p = x.data_ptr<float>();
  for (size_t i = 0; i < idx.size(); ++i) {
    const uint8_t* src = d.images.data.data() + idx[i] * 784;
    for (int j = 0; j < 784; ++j) p[i * 784 + j] = src[j] / 255.f;  // loadgen's default input
  }
  return x;
}

torch::Tensor Labels(const LabeledImages& d, const std::vector<int64_t>& idx) {
  torch::Tensor y = torch::empty({static_cast<int64_t>(idx.size())}, torch::kInt64);
  for (size_t i = 0; i < idx.size(); ++i) y[i] = static_cast<int64_t>(d.labels.data[idx[i]]);
  return y;
}

int Main() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fprintf(stderr, "superserve-demo-model: --out is required\n");
    return 2;
  }
  std::vector<int32_t> batch_sizes;
  for (auto s : absl::StrSplit(absl::GetFlag(FLAGS_batch_sizes), ',')) {
    int32_t b;
    if (!absl::SimpleAtoi(s, &b)) return 2;
    batch_sizes.push_back(b);
  }
  const std::filesystem::path dir = std::filesystem::path(out) / absl::GetFlag(FLAGS_name);
  if (absl::GetFlag(FLAGS_reuse) && std::filesystem::exists(dir / "profile.json") &&
      std::filesystem::exists(dir / "supernet.pt")) {
    std::printf("reusing %s\n", dir.string().c_str());
    return 0;
  }
  torch::set_num_threads(std::max(1, absl::GetFlag(FLAGS_threads)));
  auto train = LoadFashionMnist("train");
  auto test = LoadFashionMnist("t10k");
  if (!train.ok() || !test.ok()) {
    SS_LOG(ERROR) << "Fashion-MNIST: " << (train.ok() ? test.status() : train.status()).message();
    return 1;
  }
  const auto config = models::OfaResNetConfig::FashionMnist();
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  auto net_or = OfaResNet::Create(config, seed);
  if (!net_or.ok()) {
    SS_LOG(ERROR) << net_or.status().message();
    return 1;
  }
  auto net = *std::move(net_or);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, train->images.num_items() - 1);

  // --- train: largest + smallest + one random subnet per step (sandwich rule)
  auto sampled = models::SampleArchitectures(config, 256, seed);
  if (!sampled.ok()) {
    SS_LOG(ERROR) << sampled.status().message();
    return 1;
  }
  net->Train();
  torch::optim::Adam opt(net->Parameters(), torch::optim::AdamOptions(2e-3));
  const Nanos budget = Seconds(absl::GetFlag(FLAGS_train_seconds));
  const Nanos start = RealClock::Get()->Now();
  int64_t steps = 0;
  {
    ProgressBar bar("train", budget / kNanosPerSecond);
    while (RealClock::Get()->Now() - start < budget) {
      std::vector<int64_t> idx(absl::GetFlag(FLAGS_train_batch));
      for (auto& i : idx) i = pick(rng);
      torch::Tensor x = Images(*train, idx), y = Labels(*train, idx);
      opt.zero_grad();
      std::vector<ControlTuple> archs = {models::LargestArchitecture(config),
                                         models::SmallestArchitecture(config),
                                         (*sampled)[steps % sampled->size()]};
      for (auto a : archs) {
        a.subnet_id = models::kNoSlot;
        if (auto s = net->Actuate(a); !s.ok()) {
          SS_LOG(ERROR) << s.message();
          return 1;
        }
        torch::Tensor loss = torch::nn::functional::cross_entropy(net->Forward(x), y) / 3.0;
        loss.backward();
      }
      opt.step();
      ++steps;
      bar.Set((RealClock::Get()->Now() - start) / kNanosPerSecond, absl::StrCat(steps, " steps"));
    }
  }
  SS_LOG(INFO) << "trained " << steps << " steps";

  // --- slots: smallest, largest, then seeded samples; calibrate each
  std::vector<ControlTuple> slots = {models::SmallestArchitecture(config),
                                     models::LargestArchitecture(config)};
  for (size_t i = 0; slots.size() < static_cast<size_t>(absl::GetFlag(FLAGS_subnets)) &&
                     i < sampled->size();
       ++i) {
    slots.push_back((*sampled)[i]);
  }
  for (size_t i = 0; i < slots.size(); ++i) slots[i].subnet_id = static_cast<int32_t>(i);
  if (auto s = net->SetSlots(slots); !s.ok()) {
    SS_LOG(ERROR) << s.message();
    return 1;
  }
  {
    torch::NoGradGuard no_grad;
    for (size_t s = 0; s < slots.size(); ++s) {
      if (auto st = net->BeginCalibration(static_cast<int>(s)); !st.ok()) {
        SS_LOG(ERROR) << st.message();
        return 1;
      }
      for (int b = 0; b < absl::GetFlag(FLAGS_calibration_batches); ++b) {
        std::vector<int64_t> idx(256);
        for (auto& i : idx) i = pick(rng);
        net->Forward(Images(*train, idx));
      }
      if (auto st = net->FinishCalibration(); !st.ok()) {
        SS_LOG(ERROR) << st.message();
        return 1;
      }
    }
  }
  net->Eval();
  std::filesystem::create_directories(dir);
  if (auto s = net->Save((dir / "supernet.pt").string()); !s.ok()) {
    SS_LOG(ERROR) << s.message();
    return 1;
  }

  // --- accuracy on the test set, per slot
  const int64_t n_eval = std::min<int64_t>(absl::GetFlag(FLAGS_eval_images), test->images.num_items());
  std::vector<double> accuracy(slots.size());
  {
    c10::InferenceMode guard;
    for (size_t s = 0; s < slots.size(); ++s) {
      if (auto st = net->Actuate(slots[s]); !st.ok()) return 1;
      int64_t correct = 0;
      for (int64_t b = 0; b < n_eval; b += 500) {
        std::vector<int64_t> idx;
        for (int64_t i = b; i < std::min(n_eval, b + 500); ++i) idx.push_back(i);
        torch::Tensor pred = net->Forward(Images(*test, idx)).argmax(1);
        correct += pred.eq(Labels(*test, idx)).sum().item<int64_t>();
      }
      accuracy[s] = 100.0 * correct / n_eval;
      SS_LOG(INFO) << "subnet " << s << ": " << accuracy[s] << "% on " << n_eval << " test images";
    }
  }

  // --- latency through the worker's executor (what the workers will run)
  ModelProfile profile;
  profile.model = absl::GetFlag(FLAGS_name);
  profile.family = "ofa_resnet";
  profile.batch_sizes = batch_sizes;
  profile.input_shape = {1, 28, 28};
  profile.num_classes = 10;
  profile.measured_on = absl::StrCat("CPU, ", absl::GetFlag(FLAGS_threads),
                                     " intra-op thread(s), superserve-demo-model");
  for (size_t s = 0; s < slots.size(); ++s) {
    SubnetProfile sp;
    sp.id = static_cast<int32_t>(s);
    sp.accuracy = accuracy[s];
    sp.control = slots[s];
    profile.subnets.push_back(sp);
  }
  ModelEntry entry;
  entry.name = profile.model;
  entry.directory = dir.string();
  entry.profile = profile;
  auto executor = MakeTorchExecutor(absl::GetFlag(FLAGS_threads));
  if (!executor.ok() || !(*executor)->Load(entry).ok()) {
    SS_LOG(ERROR) << "cannot load the written checkpoint";
    return 1;
  }
  v1::Tensor sample;
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(784, 0.5f)), &sample);
  for (auto& sp : profile.subnets) {
    Nanos prev = 0;
    for (int32_t b : batch_sizes) {
      std::vector<const v1::Tensor*> inputs(b, &sample);
      std::vector<Nanos> times;
      for (int r = 0; r < absl::GetFlag(FLAGS_latency_reps) + 1; ++r) {
        Nanos t0 = RealClock::Get()->Now();
        auto outs = (*executor)->Run(profile.model, sp.control, inputs);
        Nanos t1 = RealClock::Get()->Now();
        if (!outs.ok()) {
          SS_LOG(ERROR) << outs.status().message();
          return 1;
        }
        if (r > 0) times.push_back(t1 - t0);  // the first run warms up
      }
      std::sort(times.begin(), times.end());
      prev = std::max(prev, times[times.size() / 2]);  // profiles must not decrease in batch
      sp.latency.push_back(prev);
    }
  }
  // --- keep the accuracy/latency Pareto frontier (at batch 1)
  std::vector<nas::CandidatePoint> points;
  for (size_t s = 0; s < profile.subnets.size(); ++s) {
    points.push_back({static_cast<int64_t>(s), profile.subnets[s].accuracy,
                      ToMicros(profile.subnets[s].latency.front())});
  }
  std::vector<SubnetProfile> kept;
  for (const auto& p : nas::ParetoFrontier(points)) kept.push_back(profile.subnets[p.key]);
  profile.subnets = kept;
  if (auto s = profile.SaveFile((dir / "profile.json").string()); !s.ok()) {
    SS_LOG(ERROR) << s.message();
    return 1;
  }
  for (const auto& sp : profile.subnets) {
    std::printf("subnet %d: accuracy %.2f%%, latency batch1 %.0f us, batch%d %.0f us\n", sp.id,
                sp.accuracy, ToMicros(sp.latency.front()), batch_sizes.back(),
                ToMicros(sp.latency.back()));
  }
  std::printf("wrote %s (%zu Pareto subnets of %zu)\n", dir.string().c_str(),
              profile.subnets.size(), slots.size());
  return 0;
}

}  // namespace
}  // namespace superserve

int main(int argc, char** argv) {
  superserve::InitMain(argc, argv,
                       "superserve-demo-model --out REPO [--name NAME] [--train-seconds S]\n\n"
                       "Trains, calibrates and profiles a small Fashion-MNIST OFA-ResNet supernet\n"
                       "into REPO/NAME/{supernet.pt,profile.json} (a stand-in until nas_profiler's\n"
                       "trained repository is available).");
  return superserve::Main();
}
