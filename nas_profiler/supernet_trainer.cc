#include "nas_profiler/supernet_trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/progress.h"
#include "models/ofa_resnet_config.h"
#include "operators/subnet_norm.h"

namespace superserve::nas {

using models::OfaResNet;


struct ImageDataset::Impl {
  torch::Tensor images;  // float [n, 1, H, W], normalised
  torch::Tensor labels;  // int64 [n]
};

namespace {

absl::Status FromTorchError(const c10::Error& e, const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
}

// Random crop with zero (background) padding of 2 and a horizontal flip, per
// image, drawn from torch's seeded global generator.
torch::Tensor Augment(const torch::Tensor& batch) {
  const int64_t n = batch.size(0), h = batch.size(2), w = batch.size(3);
  constexpr int64_t kPad = 2;
  const float background = -kPixelMean / kPixelStd;
  torch::Tensor padded = torch::constant_pad_nd(batch, {kPad, kPad, kPad, kPad}, background);
  torch::Tensor offsets = torch::randint(0, 2 * kPad + 1, {n, 2}, torch::kInt64);
  auto off = offsets.accessor<int64_t, 2>();
  std::vector<torch::Tensor> crops;
  crops.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    crops.push_back(padded[i].narrow(1, off[i][0], h).narrow(2, off[i][1], w));
  }
  torch::Tensor cropped = torch::stack(crops);
  torch::Tensor flip = torch::rand({n, 1, 1, 1}) < 0.5;
  return torch::where(flip, cropped.flip({3}), cropped);
}

// Linear warm-up over `warmup_steps`, then cosine decay to 0 at `total_steps`.
double LearningRateAt(int64_t step, int64_t warmup_steps, int64_t total_steps, double peak) {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / warmup_steps;  // > 0 here
  const double progress =
      static_cast<double>(step - warmup_steps) / std::max<int64_t>(1, total_steps - warmup_steps);
  return 0.5 * peak * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
}

}  // namespace

ImageDataset::ImageDataset() : impl_(std::make_shared<Impl>()) {}
ImageDataset::~ImageDataset() = default;
ImageDataset::ImageDataset(const ImageDataset&) = default;
ImageDataset& ImageDataset::operator=(const ImageDataset&) = default;

absl::StatusOr<ImageDataset> ImageDataset::FromLabeledImages(const LabeledImages& source,
                                                             const std::vector<int64_t>& indices) {
  const IdxArray& images = source.images;
  if (images.dims.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("images must be [n, H, W], got rank ", images.dims.size()));
  }
  const int64_t n = images.num_items(), h = images.dims[1], w = images.dims[2];
  if (source.labels.num_items() != n) {
    return absl::InvalidArgumentError(absl::StrCat(n, " images but ", source.labels.num_items(),
                                                   " labels"));
  }
  for (int64_t i : indices) {
    if (i < 0 || i >= n) {
      return absl::OutOfRangeError(absl::StrCat("index ", i, " outside [0, ", n, ")"));
    }
  }
  try {
    // from_blob does not own the bytes: clone before the source can go away.
    torch::Tensor all_images =
        torch::from_blob(const_cast<uint8_t*>(images.data.data()), {n, 1, h, w}, torch::kUInt8);
    torch::Tensor all_labels = torch::from_blob(const_cast<uint8_t*>(source.labels.data.data()),
                                                {n}, torch::kUInt8);
    if (!indices.empty()) {
      torch::Tensor index = torch::tensor(indices, torch::kInt64);
      all_images = all_images.index_select(0, index);
      all_labels = all_labels.index_select(0, index);
    }
    auto impl = std::make_shared<Impl>();
    impl->images = (all_images.to(torch::kFloat32) / 255.0f - kPixelMean) / kPixelStd;
    impl->labels = all_labels.to(torch::kInt64);
    ImageDataset result;
    result.impl_ = std::move(impl);
    return result;
  } catch (const c10::Error& e) {
    return FromTorchError(e, "building image tensors");
  }
}

int64_t ImageDataset::size() const {
  return impl_->labels.defined() ? impl_->labels.size(0) : 0;
}

ImageDataset ImageDataset::Prefix(int64_t n) const {
  n = std::clamp<int64_t>(n, 0, size());  // a negative n made narrow() throw
  auto impl = std::make_shared<Impl>();
  impl->images = impl_->images.narrow(0, 0, n);
  impl->labels = impl_->labels.narrow(0, 0, n);
  ImageDataset result;
  result.impl_ = std::move(impl);
  return result;
}

absl::StatusOr<FashionMnistSplits> LoadFashionMnistSplits(const std::string& dir,
                                                          int64_t validation_size, uint64_t seed,
                                                          bool load_test) {
  auto train = LoadFashionMnist("train", dir);
  if (!train.ok()) return train.status();
  const int64_t n = train->images.num_items();
  if (validation_size < 0 || validation_size >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation size ", validation_size, " must be in [0, ", n, ")"));
  }
  // A seeded permutation independent of torch's generator state.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> validation_indices(order.begin(), order.begin() + validation_size);
  std::vector<int64_t> train_indices(order.begin() + validation_size, order.end());
  FashionMnistSplits splits;
  auto train_set = ImageDataset::FromLabeledImages(*train, train_indices);
  if (!train_set.ok()) return train_set.status();
  splits.train = *std::move(train_set);
  auto validation_set = ImageDataset::FromLabeledImages(*train, validation_indices);
  if (!validation_set.ok()) return validation_set.status();
  splits.validation = *std::move(validation_set);
  if (load_test) {
    auto test = LoadFashionMnist("t10k", dir);
    if (!test.ok()) return test.status();
    auto test_set = ImageDataset::FromLabeledImages(*test);
    if (!test_set.ok()) return test_set.status();
    splits.test = *std::move(test_set);
  }
  return splits;
}

void SetTorchThreads(int threads) { torch::set_num_threads(std::max(1, threads)); }

absl::StatusOr<TrainReport> TrainSupernet(OfaResNet& model, const ImageDataset& train,
                                          const TrainOptions& options) {
  const models::OfaResNetConfig& config = model.config();
  const int64_t n = train.size();
  if (n == 0 || options.batch_size <= 0 || options.epochs <= 0) {
    return absl::InvalidArgumentError("training needs data, a positive batch size and epochs");
  }
  TrainReport report;
  const auto start = std::chrono::steady_clock::now();
  try {
    torch::manual_seed(options.seed);
    model.Train();
    // Weight decay on conv/linear weights only, not on the norms' affine.
    std::vector<torch::Tensor> decayed, not_decayed;
    for (const auto& p : model.module().named_parameters()) {
      (p.value().dim() > 1 ? decayed : not_decayed).push_back(p.value());
    }
    auto sgd = [&](double weight_decay) {
      return std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(
                                                            options.learning_rate)
                                                            .momentum(options.momentum)
                                                            .nesterov(true)
                                                            .weight_decay(weight_decay));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, sgd(options.weight_decay));
    groups.emplace_back(not_decayed, sgd(0.0));
    torch::optim::SGD optimizer(groups, torch::optim::SGDOptions(options.learning_rate));

    const int64_t steps_per_epoch = (n + options.batch_size - 1) / options.batch_size;
    const int64_t total_steps = steps_per_epoch * options.epochs;
    const int64_t warmup_steps =
        static_cast<int64_t>(std::llround(options.warmup_epochs * steps_per_epoch));
    const int64_t last_step =
        options.max_steps >= 0 ? std::min(options.max_steps, total_steps) : total_steps;
    ControlTuple largest = models::LargestArchitecture(config);
    ControlTuple smallest = models::SmallestArchitecture(config);
    largest.subnet_id = smallest.subnet_id = models::kNoSlot;
    const torch::Tensor& images = train.impl().images;
    const torch::Tensor& labels = train.impl().labels;

    int64_t step = 0;
    for (int epoch = 0; epoch < options.epochs && step < last_step; ++epoch) {
      const auto epoch_start = std::chrono::steady_clock::now();
      torch::Tensor order = torch::randperm(n, torch::kInt64);
      ProgressBar bar(absl::StrCat("epoch ", epoch + 1, "/", options.epochs),
                      std::min(steps_per_epoch, last_step - step));
      double loss_sum = 0;
      int64_t correct = 0, seen = 0, epoch_steps = 0;
      for (int64_t b = 0; b < steps_per_epoch && step < last_step; ++b, ++step, ++epoch_steps) {
        const int64_t begin = b * options.batch_size;
        torch::Tensor index = order.narrow(0, begin, std::min<int64_t>(options.batch_size, n - begin));
        torch::Tensor x = images.index_select(0, index);
        torch::Tensor y = labels.index_select(0, index);
        if (options.augment) x = Augment(x);
        const double lr = LearningRateAt(step, warmup_steps, total_steps, options.learning_rate);
        for (auto& group : optimizer.param_groups()) {
          static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
        }
        optimizer.zero_grad();

        // Sandwich rule: largest (labels), then smallest and random subnets.
        if (auto s = model.Actuate(largest); !s.ok()) return s;
        torch::Tensor logits = model.Forward(x);
        torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
        loss.backward();
        torch::Tensor teacher = torch::softmax(logits.detach(), 1);
        const double loss_value = loss.item<double>();
        report.largest_losses.push_back(loss_value);
        loss_sum += loss_value;
        correct += logits.argmax(1).eq(y).sum().item<int64_t>();
        seen += y.size(0);

        std::vector<ControlTuple> others = {smallest};
        if (options.random_subnets > 0) {
          auto sampled = models::SampleArchitectures(
              config, options.random_subnets,
              options.seed * 1000003ULL + static_cast<uint64_t>(step));
          if (!sampled.ok()) return sampled.status();
          for (ControlTuple& c : *sampled) {
            c.subnet_id = models::kNoSlot;
            others.push_back(std::move(c));
          }
        }
        for (const ControlTuple& subnet : others) {
          if (auto s = model.Actuate(subnet); !s.ok()) return s;
          torch::Tensor student = model.Forward(x);
          torch::Tensor student_loss =
              options.distill
                  ? -(teacher * torch::log_softmax(student, 1)).sum(1).mean()
                  : torch::nn::functional::cross_entropy(student, y);
          student_loss.backward();
        }
        optimizer.step();
        bar.Add(1, absl::StrFormat("loss %.4f lr %.4f", loss_value, lr));
      }
      bar.Finish();
      report.epochs_done = epoch + 1;
      report.steps = step;
      if (!options.checkpoint_path.empty()) {
        const std::string tmp = options.checkpoint_path + ".tmp";
        if (auto s = model.Save(tmp); !s.ok()) return s;
        if (std::rename(tmp.c_str(), options.checkpoint_path.c_str()) != 0) {
          return absl::InternalError(absl::StrCat("renaming ", tmp, " to ",
                                                  options.checkpoint_path));
        }
      }
      if (options.log) {
        options.log(absl::StrFormat(
            "epoch %d/%d: %d steps, largest-subnet loss %.4f, train accuracy %.2f%%, %.1f s%s",
            epoch + 1, options.epochs, epoch_steps, loss_sum / std::max<int64_t>(1, epoch_steps),
            100.0 * correct / std::max<int64_t>(1, seen), SecondsSince(epoch_start),
            options.checkpoint_path.empty() ? "" : ", checkpoint saved"));
      }
    }
    model.Actuate(largest).IgnoreError();
  } catch (const c10::Error& e) {
    return FromTorchError(e, "training the supernet");
  }
  report.seconds = SecondsSince(start);
  return report;
}

absl::Status CalibrateSlot(OfaResNet& model, int slot, const ImageDataset& data, int batch_size) {
  if (data.size() == 0 || batch_size <= 0) {
    return absl::InvalidArgumentError("calibration needs data and a positive batch size");
  }
  if (auto s = model.BeginCalibration(slot); !s.ok()) return s;
  try {
    torch::NoGradGuard no_grad;
    const torch::Tensor& images = data.impl().images;
    for (int64_t begin = 0; begin < data.size(); begin += batch_size) {
      model.Forward(images.narrow(0, begin, std::min<int64_t>(batch_size, data.size() - begin)));
    }
  } catch (const c10::Error& e) {
    model.FinishCalibration().IgnoreError();
    return FromTorchError(e, absl::StrCat("calibrating slot ", slot));
  }
  return model.FinishCalibration();
}

absl::StatusOr<std::vector<float>> SlotStatistics(OfaResNet& model, int slot) {
  if (slot < 0 || slot >= model.NumSlots()) {
    return absl::NotFoundError(absl::StrCat("no slot ", slot));
  }
  std::vector<float> values;
  try {
    for (const auto& module : model.module().modules(/*include_self=*/false)) {
      const auto* norm = dynamic_cast<const ops::SubnetNormImpl*>(module.get());
      if (norm == nullptr || norm->ChannelsInSlot(slot) == 0) continue;
      for (const torch::Tensor& t : {norm->SlotMean(slot), norm->SlotVar(slot)}) {
        torch::Tensor flat = t.contiguous().to(torch::kFloat32);
        values.insert(values.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
      }
    }
  } catch (const c10::Error& e) {
    return FromTorchError(e, absl::StrCat("reading slot ", slot, " statistics"));
  }
  return values;
}

absl::StatusOr<EvalResult> EvaluateSubnet(OfaResNet& model, const ControlTuple& control,
                                          const ImageDataset& data, int batch_size) {
  if (batch_size <= 0) return absl::InvalidArgumentError("batch size must be positive");
  model.Eval();
  if (auto s = model.Actuate(control); !s.ok()) return s;
  EvalResult result;
  try {
    torch::NoGradGuard no_grad;
    const torch::Tensor& images = data.impl().images;
    const torch::Tensor& labels = data.impl().labels;
    for (int64_t begin = 0; begin < data.size(); begin += batch_size) {
      const int64_t len = std::min<int64_t>(batch_size, data.size() - begin);
      torch::Tensor logits = model.Forward(images.narrow(0, begin, len));
      result.correct += logits.argmax(1).eq(labels.narrow(0, begin, len)).sum().item<int64_t>();
      result.total += len;
    }
  } catch (const c10::Error& e) {
    return FromTorchError(e, absl::StrCat("evaluating subnet ", control.subnet_id));
  }
  result.accuracy_percent =
      result.total == 0 ? 0.0 : 100.0 * static_cast<double>(result.correct) / result.total;
  return result;
}

absl::StatusOr<std::vector<Nanos>> MeasureLatency(OfaResNet& model, const ControlTuple& control,
                                                  const std::vector<int32_t>& batch_sizes,
                                                  int warmup, int repeats) {
  if (repeats <= 0) return absl::InvalidArgumentError("repeats must be positive");
  model.Eval();
  if (auto s = model.Actuate(control); !s.ok()) return s;
  const models::OfaResNetConfig& config = model.config();
  std::vector<Nanos> medians;
  try {
    torch::NoGradGuard no_grad;
    for (int32_t batch : batch_sizes) {
      torch::Tensor x = torch::randn(
          {batch, config.input_channels, config.input_size, config.input_size});
      for (int i = 0; i < warmup; ++i) model.Forward(x);
      std::vector<Nanos> times;
      for (int i = 0; i < repeats; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        torch::Tensor out = model.Forward(x);
        const auto t1 = std::chrono::steady_clock::now();
        times.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
      medians.push_back(times[times.size() / 2]);
    }
  } catch (const c10::Error& e) {
    return FromTorchError(e, absl::StrCat("timing subnet ", control.subnet_id));
  }
  return medians;
}

}  // namespace superserve::nas
