#include "nas_profiler/early_exit_trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/progress.h"

namespace superserve::nas {
namespace {

constexpr double kPi = 3.14159265358979323846;

// pixel/255 as float [n, 1, 28, 28] (the application's version when given).
torch::Tensor Pixels(const LabeledImages& data, const std::vector<int64_t>& indices,
                     const ImageApplication* app) {
  const int64_t item = data.images.item_size();
  const int64_t side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(item))));
  torch::Tensor out = torch::empty({static_cast<int64_t>(indices.size()), 1, side, side});
  float* dst = out.data_ptr<float>();
  static const ImageApplication kClean{"clean", {}, 0.f};
  for (size_t i = 0; i < indices.size(); ++i) {
    const uint8_t* px = data.images.data.data() + indices[i] * item;
    ApplicationInput(app != nullptr ? *app : kClean, indices[i],
                     absl::MakeConstSpan(px, static_cast<size_t>(item)), dst + i * item);
  }
  return out;
}

std::vector<int64_t> AllIndices(const LabeledImages& data) {
  std::vector<int64_t> v(static_cast<size_t>(data.labels.num_items()));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

torch::Tensor Labels(const LabeledImages& data, const std::vector<int64_t>& indices) {
  torch::Tensor out = torch::empty({static_cast<int64_t>(indices.size())}, torch::kLong);
  int64_t* dst = out.data_ptr<int64_t>();
  for (size_t i = 0; i < indices.size(); ++i) dst[i] = data.labels.data[indices[i]];
  return out;
}

absl::Status TorchError(const std::exception& e, const char* what) {
  // LibTorch's message without the C++ backtrace it carries.
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) {
    return absl::InternalError(absl::StrCat(what, ": ", c10->what_without_backtrace()));
  }
  return absl::InternalError(absl::StrCat(what, ": ", e.what()));
}

}  // namespace

absl::Status TrainEarlyExit(models::EarlyExitNet& net, const LabeledImages& train, float mean,
                            float std_dev, const EarlyExitTrainOptions& o) {
  try {
    torch::manual_seed(o.seed);
    const torch::Tensor x_all = Pixels(train, AllIndices(train), nullptr);
    const torch::Tensor y_all = Labels(train, AllIndices(train));
    const int64_t n = x_all.size(0);
    const int64_t steps_per_epoch = n / o.batch_size;
    const int64_t total = steps_per_epoch * o.epochs;
    torch::optim::Adam opt(net.Parameters(), torch::optim::AdamOptions(o.learning_rate));
    net.SetTraining(true);
    const int64_t noisy = static_cast<int64_t>(o.noisy_fraction * o.batch_size);
    int64_t step = 0;
    for (int epoch = 0; epoch < o.epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      torch::Tensor perm = torch::randperm(n, torch::kLong);
      double loss_sum = 0;
      for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
        if (o.max_steps >= 0 && step >= o.max_steps) break;
        const double lr = 0.5 * o.learning_rate * (1 + std::cos(kPi * step / std::max<int64_t>(1, total)));
        for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
        torch::Tensor idx = perm.slice(0, s * o.batch_size, (s + 1) * o.batch_size);
        torch::Tensor x = x_all.index_select(0, idx).clone();
        if (noisy > 0) {
          torch::Tensor sd = torch::rand({noisy, 1, 1, 1}) * o.max_noise;
          x.slice(0, 0, noisy).add_(torch::randn_like(x.slice(0, 0, noisy)) * sd).clamp_(0, 1);
        }
        x = (x - mean) / std_dev;
        const torch::Tensor y = y_all.index_select(0, idx);
        auto exits = net.ForwardAllExits(x);
        torch::Tensor loss = torch::zeros({});
        for (const auto& logits : exits) loss = loss + torch::nn::functional::cross_entropy(logits, y);
        opt.zero_grad();
        loss.backward();
        opt.step();
        loss_sum += loss.item<double>();
      }
      const double secs = SecondsSince(start);
      if (o.log) {
        o.log(absl::StrFormat("epoch %d/%d: mean summed loss %.4f, %.0f s", epoch + 1, o.epochs,
                              loss_sum / std::max<int64_t>(1, steps_per_epoch), secs));
      }
      if (o.max_steps >= 0 && step >= o.max_steps) break;
    }
    net.SetTraining(false);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    net.SetTraining(false);
    return TorchError(e, "early-exit training");
  }
}

absl::StatusOr<std::vector<EarlyExitEval>> EvaluateEarlyExit(
    models::EarlyExitNet& net, const LabeledImages& test, float mean, float std_dev,
    const std::vector<ImageApplication>& apps) {
  try {
    net.SetTraining(false);
    torch::NoGradGuard no_grad;
    const int exits = net.num_exits();
    const float threshold = net.config().exit_threshold;
    std::vector<EarlyExitEval> out;
    auto eval = [&](const std::string& name, const std::vector<int64_t>& indices,
                    const ImageApplication* app) {
      EarlyExitEval r;
      r.application = name;
      r.samples = static_cast<int64_t>(indices.size());
      std::vector<int64_t> correct_at(exits, 0), leave_at(exits, 0), leaver_correct(exits, 0);
      int64_t overall = 0;
      for (size_t b = 0; b < indices.size(); b += 500) {
        std::vector<int64_t> chunk(indices.begin() + b,
                                   indices.begin() + std::min(indices.size(), b + 500));
        torch::Tensor x = (Pixels(test, chunk, app) - mean) / std_dev;
        torch::Tensor y = Labels(test, chunk);
        auto logits = net.ForwardAllExits(x);
        std::vector<torch::Tensor> pred, conf;
        for (int i = 0; i < exits; ++i) {
          // Back on the CPU: read below through data_ptr.
          auto [c, p] = torch::softmax(logits[i].to(torch::kCPU), 1).max(1);
          pred.push_back(p.contiguous());
          conf.push_back(c.contiguous());
          correct_at[i] += p.eq(y).sum().item<int64_t>();
        }
        for (int64_t s = 0; s < static_cast<int64_t>(chunk.size()); ++s) {
          int e = exits - 1;
          for (int i = 0; i + 1 < exits; ++i) {
            if (conf[i].data_ptr<float>()[s] >= threshold) {
              e = i;
              break;
            }
          }
          ++leave_at[e];
          const bool ok = pred[e].data_ptr<int64_t>()[s] == y.data_ptr<int64_t>()[s];
          leaver_correct[e] += ok;
          overall += ok;
        }
      }
      const double n = std::max<int64_t>(1, r.samples);
      for (int i = 0; i < exits; ++i) {
        r.exit_accuracy.push_back(100.0 * correct_at[i] / n);
        r.exit_fraction.push_back(leave_at[i] / n);
        r.accuracy_of_leavers.push_back(leave_at[i] ? 100.0 * leaver_correct[i] / leave_at[i] : 0);
      }
      r.overall_accuracy = 100.0 * overall / n;
      r.last_exit_accuracy = r.exit_accuracy.back();
      out.push_back(std::move(r));
    };
    eval("all", AllIndices(test), nullptr);
    for (const auto& app : apps) {
      eval(app.name, ApplicationImages(app, test.labels.data), &app);
    }
    return out;
  } catch (const std::exception& e) {
    return TorchError(e, "early-exit evaluation");
  }
}

absl::StatusOr<DynamicProfileReport> ProfileEarlyExit(models::EarlyExitNet& net,
                                                      const LabeledImages& test, float mean,
                                                      float std_dev,
                                                      const std::vector<ImageApplication>& apps,
                                                      const DynamicProfileOptions& o) {
  if (apps.empty()) return absl::InvalidArgumentError("no applications to profile");
  // Zero samples used to divide by zero (SIGFPE) in the warm-up below.
  if (o.samples_per_application < 1 || o.batches_per_size < 1 || o.bins < 1 || o.warmup < 0 ||
      o.batch_sizes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "early-exit profile: need >= 1 sample per application (", o.samples_per_application,
        "), >= 1 batch per size (", o.batches_per_size, "), >= 1 bin (", o.bins,
        "), a warm-up >= 0 (", o.warmup, ") and batch sizes"));
  }
  try {
    net.SetTraining(false);
    std::mt19937_64 rng(o.seed);
    DynamicProfileReport rep;
    const int64_t item = test.images.item_size();
    // Normalised inputs of every measured sample, per application.
    std::vector<std::vector<float>> inputs(apps.size());
    using Clock = std::chrono::steady_clock;
    auto time_run = [&](const float* x, int64_t n, models::ExitOutputs* out) -> absl::StatusOr<double> {
      const auto t0 = Clock::now();
      auto r = net.Run(x, n);
      const auto t1 = Clock::now();
      if (!r.ok()) return r.status();
      if (out != nullptr) *out = *std::move(r);
      return std::chrono::duration<double, std::micro>(t1 - t0).count();
    };
    for (size_t a = 0; a < apps.size(); ++a) {
      std::vector<int64_t> pool = ApplicationImages(apps[a], test.labels.data);
      if (pool.empty()) return absl::InvalidArgumentError("application " + apps[a].name + " has no images");
      std::vector<int64_t> chosen;
      for (int i = 0; i < o.samples_per_application; ++i) chosen.push_back(pool[rng() % pool.size()]);
      torch::Tensor x = ((Pixels(test, chosen, &apps[a]) - mean) / std_dev).contiguous();
      inputs[a].assign(x.data_ptr<float>(), x.data_ptr<float>() + x.numel());
      for (int w = 0; w < o.warmup; ++w) {
        auto t = time_run(inputs[a].data() + (w % chosen.size()) * item, 1, nullptr);
        if (!t.ok()) return t.status();
      }
      rep.latencies_us.emplace_back();
      rep.exits.emplace_back();
      for (size_t i = 0; i < chosen.size(); ++i) {
        models::ExitOutputs out;
        auto t = time_run(inputs[a].data() + i * item, 1, &out);
        if (!t.ok()) return t.status();
        rep.latencies_us[a].push_back(*t);
        rep.exits[a].push_back(out.exit_taken[0]);
      }
      if (o.log) o.log(absl::StrFormat("application %s: %d batch-1 timings", apps[a].name, o.samples_per_application));
      // Histogram over [min, max] of this application's timings.
      const auto [lo, hi] = std::minmax_element(rep.latencies_us[a].begin(), rep.latencies_us[a].end());
      ApplicationHistogram h;
      h.application = apps[a].name;
      const double left = *lo * 0.999, right = std::max(*hi * 1.001, left + 1.0);
      for (int b = 0; b <= o.bins; ++b) h.bin_edges_us.push_back(left + (right - left) * b / o.bins);
      h.counts.assign(static_cast<size_t>(o.bins), 0.0);
      for (double l : rep.latencies_us[a]) {
        int b = static_cast<int>((l - left) / (right - left) * o.bins);
        h.counts[static_cast<size_t>(std::clamp(b, 0, o.bins - 1))] += 1;
      }
      rep.profile.applications.push_back(std::move(h));
    }
    // Batches of each size, members drawn from random applications:
    // y = batch time, x = k * max(l_i).
    std::vector<double> xs, ys;
    std::vector<float> batch;
    for (int32_t k : o.batch_sizes) {
      for (int b = 0; b < o.batches_per_size; ++b) {
        batch.clear();
        double max_l = 0;
        for (int m = 0; m < k; ++m) {
          const size_t a = rng() % apps.size();
          const size_t i = rng() % rep.latencies_us[a].size();
          batch.insert(batch.end(), inputs[a].begin() + i * item, inputs[a].begin() + (i + 1) * item);
          max_l = std::max(max_l, rep.latencies_us[a][i]);
        }
        // Median of three runs: one timing on a shared machine is noisy.
        double t[3];
        for (double& v : t) {
          auto r = time_run(batch.data(), k, nullptr);
          if (!r.ok()) return r.status();
          v = *r;
        }
        std::sort(t, t + 3);
        xs.push_back(k * max_l);
        ys.push_back(t[1]);
      }
      if (o.log) o.log(absl::StrFormat("batch %d: %d timed batches", k, o.batches_per_size));
    }
    // Hold back a seeded share; least squares on the rest.
    std::vector<size_t> order(xs.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t held = static_cast<size_t>(o.holdout * order.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const size_t fit = order.size() - held;
    for (size_t j = held; j < order.size(); ++j) {
      const double x = xs[order[j]], y = ys[order[j]];
      sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double denom = fit * sxx - sx * sx;
    if (fit < 2 || denom <= 0) return absl::InternalError("batch-time fit: degenerate measurements");
    const double c1 = (fit * sxy - sx * sy) / denom;
    const double c0 = (sy - c1 * sx) / fit;
    rep.profile.batch_overhead_us = c0;
    rep.profile.per_request_factor = c1;
    rep.fit_batches = static_cast<int64_t>(fit);
    rep.holdout_batches = static_cast<int64_t>(held);
    double sum_err = 0, max_err = 0;
    for (size_t j = 0; j < held; ++j) {
      const double pred = c0 + c1 * xs[order[j]];
      const double err = 100.0 * std::fabs(pred - ys[order[j]]) / ys[order[j]];
      sum_err += err;
      max_err = std::max(max_err, err);
    }
    rep.holdout_mean_abs_error_percent = held ? sum_err / held : 0;
    rep.holdout_max_abs_error_percent = max_err;
    return rep;
  } catch (const std::exception& e) {
    return TorchError(e, "early-exit profiling");
  }
}

}  // namespace superserve::nas
