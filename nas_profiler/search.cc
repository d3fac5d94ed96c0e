#include "nas_profiler/search.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/progress.h"
#include "models/ofa_resnet_config.h"
#include "nas_profiler/pareto.h"

namespace superserve::nas {

using models::OfaResNet;
using models::OfaResNetConfig;

namespace {

void Log(const SearchOptions& options, const std::string& line) {
  if (options.log) options.log(line);
}

// Architecture identity without the slot id (canonical form).
std::string ArchitectureKey(const OfaResNetConfig& config, const ControlTuple& architecture) {
  ControlTuple c = models::Canonicalize(config, architecture);
  c.subnet_id = models::kNoSlot;
  return c.DebugString();
}

int64_t ConvOutputSize(int64_t size, int64_t stride) { return (size + stride - 1) / stride; }

// Cost features of one image through the subnet (convs and classifier).
ArchitectureCost CostOf(const OfaResNetConfig& config, const ControlTuple& architecture) {
  models::ArchitectureShape shape = models::ShapeOf(config, architecture);
  ArchitectureCost cost;
  int64_t size = ConvOutputSize(config.input_size, config.stem_stride);
  auto conv = [&cost](int64_t out_size, int64_t in, int64_t out, int64_t kernel) {
    const double pixels = static_cast<double>(out_size * out_size);
    cost.macs += pixels * static_cast<double>(in * out * kernel * kernel);
    cost.activations += pixels * static_cast<double>(out);
    cost.conv_layers += 1;
  };
  conv(size, config.input_channels, shape.stem_channels, 3);
  if (config.stem_max_pool) size = ConvOutputSize(size, 2);
  for (const models::BlockShape& b : shape.blocks) {
    if (!b.active) continue;
    const int64_t out = ConvOutputSize(size, b.stride);
    conv(size, b.in_channels, b.mid_channels, 1);
    conv(out, b.mid_channels, b.mid_channels, 3);
    conv(out, b.mid_channels, b.out_channels, 1);
    if (b.has_shortcut_conv) conv(out, b.in_channels, b.out_channels, 1);
    size = out;
  }
  cost.macs += static_cast<double>(shape.final_channels) * config.num_classes;
  return cost;
}

// One random change of one choice of `architecture`: a stage depth, an
// active block's expand ratio or a width multiplier.
ControlTuple Mutate(const OfaResNetConfig& config, const ControlTuple& architecture,
                    std::mt19937_64& rng) {
  ControlTuple c = architecture;
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  switch (pick(3)) {
    case 0:
      c.depths[pick(c.depths.size())] = config.depth_choices[pick(config.depth_choices.size())];
      break;
    case 1: {
      std::vector<size_t> active;
      models::ArchitectureShape shape = models::ShapeOf(config, c);
      for (size_t i = 0; i < shape.blocks.size(); ++i) {
        if (shape.blocks[i].active) active.push_back(i);
      }
      c.expand_ratios[active[pick(active.size())]] =
          config.expand_ratio_choices[pick(config.expand_ratio_choices.size())];
      break;
    }
    default:
      c.width_multipliers[pick(c.width_multipliers.size())] =
          config.width_multiplier_choices[pick(config.width_multiplier_choices.size())];
  }
  c = models::Canonicalize(config, c);
  c.subnet_id = models::kNoSlot;
  return c;
}

// Calibrates `architecture` in a scratch slot and measures it.
absl::StatusOr<CandidateResult> MeasureCandidate(OfaResNet& model, const ControlTuple& architecture,
                                                 const FashionMnistSplits& data,
                                                 const ImageDataset& calibration,
                                                 const SearchOptions& options) {
  ControlTuple slot = architecture;
  slot.subnet_id = 0;
  if (auto s = model.SetSlots({slot}); !s.ok()) return s;
  if (auto s = CalibrateSlot(model, 0, calibration, kCalibrationBatchSize); !s.ok()) return s;
  auto validation = EvaluateSubnet(model, slot, data.validation, kEvalBatchSize);
  if (!validation.ok()) return validation.status();
  auto latency = MeasureLatency(model, slot, {options.search_batch}, options.search_warmup,
                                options.search_repeats);
  if (!latency.ok()) return latency.status();
  CandidateResult result;
  result.architecture = architecture;
  result.validation_accuracy = validation->accuracy_percent;
  result.search_latency = latency->front();
  result.cost = CostOf(model.config(), architecture);
  result.ranking_latency_us = ToMicros(result.search_latency);
  result.ranking_accuracy = result.validation_accuracy;
  return result;
}

// Runs fn(models[t], i) for i in [0, n) on one thread per model (model t
// takes i = t, t + T, ...), so every item's result is independent of the
// thread count. Returns the first error.
absl::Status ParallelFor(const std::vector<OfaResNet*>& models, size_t n,
                         const std::function<absl::Status(OfaResNet&, size_t)>& fn) {
  std::mutex mu;
  absl::Status first_error;
  auto work = [&](size_t t) {
    for (size_t i = t; i < n; i += models.size()) {
      absl::Status s = fn(*models[t], i);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = s;
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < models.size(); ++t) threads.emplace_back(work, t);
  work(0);
  for (std::thread& th : threads) th.join();
  return first_error;
}

// `count` more copies of `model` (weights and slots) through a checkpoint
// file, for ParallelFor.
absl::StatusOr<std::vector<std::unique_ptr<OfaResNet>>> CopiesOf(const OfaResNet& model,
                                                                 int count,
                                                                 const std::string& scratch) {
  std::vector<std::unique_ptr<OfaResNet>> copies;
  if (count <= 0) return copies;
  if (auto s = model.Save(scratch); !s.ok()) return s;
  for (int i = 0; i < count; ++i) {
    auto copy = OfaResNet::Load(scratch);
    if (!copy.ok()) return copy.status();
    copies.push_back(*std::move(copy));
  }
  std::remove(scratch.c_str());
  return copies;
}

size_t AccuracyFeatures(const OfaResNetConfig& config) {
  return FittedAccuracyModel::Encode(config, models::LargestArchitecture(config)).size();
}

// The frontier's best accuracy at latency <= latency_us (-infinity below its
// fastest point); `frontier` is sorted by latency, accuracy increasing.
double FrontierAccuracyAt(const std::vector<CandidatePoint>& frontier, double latency_us) {
  double best = -std::numeric_limits<double>::infinity();
  for (const CandidatePoint& p : frontier) {
    if (p.latency_us > latency_us) break;
    best = p.accuracy;
  }
  return best;
}

// An evolution round's proposal, by how far its predicted accuracy lies above
// the current frontier at its predicted latency.
struct ScreenedProposal {
  double margin = 0;
  ControlTuple architecture;
};

std::vector<CandidatePoint> Points(const std::vector<CandidateResult>& candidates) {
  std::vector<CandidatePoint> points;
  for (size_t i = 0; i < candidates.size(); ++i) {
    points.push_back({static_cast<int64_t>(i), candidates[i].ranking_accuracy,
                      candidates[i].ranking_latency_us});
  }
  return points;
}

}  // namespace

absl::Status CalibrateProfileSlots(OfaResNet& model, const ModelProfile& profile,
                                   const ImageDataset& calibration) {
  // Every slot, the dominated subnets loading left out of the choices too.
  const std::vector<SubnetProfile> every = profile.EverySubnet();
  std::vector<ControlTuple> slots;
  for (size_t i = 0; i < every.size(); ++i) {
    if (every[i].id != static_cast<int32_t>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("profile subnet ", i, " has id ",
                                                     every[i].id, "; slots need ids 0..",
                                                     every.size() - 1, " in order"));
    }
    slots.push_back(every[i].control);
  }
  if (auto s = model.SetSlots(slots); !s.ok()) return s;
  ProgressBar bar("calibrate", static_cast<int64_t>(slots.size()));
  for (size_t i = 0; i < slots.size(); ++i) {
    if (auto s = CalibrateSlot(model, static_cast<int>(i), calibration, kCalibrationBatchSize);
        !s.ok()) {
      return s;
    }
    bar.Add();
  }
  bar.Finish();
  return absl::OkStatus();
}

absl::StatusOr<int> ProfileLatencies(OfaResNet& model, ModelProfile& profile, int warmup,
                                     int repeats) {
  // Every slot is measured, the subnets loading left out as dominated too:
  // with new figures they may not be, and the profile written keeps them all
  // (which are dominated is decided again when it is loaded).
  profile.subnets = profile.EverySubnet();
  profile.left_out.clear();
  int raised = 0;
  ProgressBar bar("latency", static_cast<int64_t>(profile.subnets.size()));
  for (SubnetProfile& subnet : profile.subnets) {
    ControlTuple control = subnet.control;
    control.subnet_id = subnet.id;
    auto latency = MeasureLatency(model, control, profile.batch_sizes, warmup, repeats);
    if (!latency.ok()) return latency.status();
    for (size_t b = 1; b < latency->size(); ++b) {
      if ((*latency)[b] < (*latency)[b - 1]) {
        (*latency)[b] = (*latency)[b - 1];
        ++raised;
      }
    }
    subnet.latency = *std::move(latency);
    bar.Add(1, absl::StrCat("subnet ", subnet.id));
  }
  bar.Finish();
  return raised;
}

absl::StatusOr<SearchResult> SearchAndProfile(OfaResNet& model, const FashionMnistSplits& data,
                                              const SearchOptions& options,
                                              const std::string& checkpoint_path,
                                              const std::string& profile_path) {
  const OfaResNetConfig& config = model.config();
  const ImageDataset search_calibration = data.train.Prefix(options.search_calibration_images);
  const ImageDataset calibration = data.train.Prefix(options.calibration_images);
  SearchResult result;

  // 1-2. Candidates, measured one by one.
  auto start = std::chrono::steady_clock::now();
  auto sampled = models::SampleArchitectures(config, options.num_candidates, options.seed);
  if (!sampled.ok()) return sampled.status();
  std::vector<ControlTuple> pending = {models::SmallestArchitecture(config),
                                       models::LargestArchitecture(config)};
  pending.insert(pending.end(), sampled->begin(), sampled->end());
  std::set<std::string> seen;
  for (const CandidateResult& c : options.previous) {
    if (auto v = models::ValidateArchitecture(config, c.architecture); !v.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("previous candidate ",
                                                     result.candidates.size(), ": ", v.message()));
    }
    if (!seen.insert(ArchitectureKey(config, c.architecture)).second) continue;
    CandidateResult copy = c;
    copy.architecture.subnet_id = static_cast<int32_t>(result.candidates.size());
    copy.cost = CostOf(config, copy.architecture);
    copy.ranking_latency_us = ToMicros(copy.search_latency);
    copy.ranking_accuracy = copy.validation_accuracy;
    result.candidates.push_back(std::move(copy));
  }
  if (!options.previous.empty()) {
    Log(options, absl::StrCat(result.candidates.size(), " candidates carried over"));
  }
  std::mt19937_64 rng(options.seed + options.previous.size());
  // Threads each measure on their own copy of the model (one intra-op thread
  // each): on a shared machine two processes' worth of CPU share.
  SetTorchThreads(1);
  auto copies = CopiesOf(model, options.workers - 1, checkpoint_path + ".scratch");
  if (!copies.ok()) return copies.status();
  std::vector<OfaResNet*> workers = {&model};
  for (auto& c : *copies) workers.push_back(c.get());
  if (options.retime_previous && !result.candidates.empty()) {
    ProgressBar bar("search: re-time carried-over candidates",
                    static_cast<int64_t>(result.candidates.size()));
    std::mutex bar_mu;
    absl::Status s = ParallelFor(workers, result.candidates.size(), [&](OfaResNet& m, size_t i) {
      ControlTuple slot = result.candidates[i].architecture;
      slot.subnet_id = 0;  // latency does not depend on the statistics' values
      if (auto st = m.SetSlots({slot}); !st.ok()) return st;
      auto latency = MeasureLatency(m, slot, {options.search_batch}, options.search_warmup,
                                    options.search_repeats);
      if (!latency.ok()) return latency.status();
      result.candidates[i].search_latency = latency->front();
      result.candidates[i].ranking_latency_us = ToMicros(latency->front());
      std::lock_guard<std::mutex> lock(bar_mu);
      bar.Add();
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    bar.Finish();
  }
  for (int round = 0; round <= options.evolution_rounds; ++round) {
    std::vector<ControlTuple> fresh;
    for (ControlTuple& c : pending) {
      if (seen.insert(ArchitectureKey(config, c)).second) fresh.push_back(std::move(c));
    }
    ProgressBar bar(round == 0 ? std::string("search: sampled")
                               : absl::StrCat("search: evolution ", round),
                    static_cast<int64_t>(fresh.size()));
    std::vector<CandidateResult> measured(fresh.size());
    std::mutex bar_mu;
    absl::Status s = ParallelFor(workers, fresh.size(), [&](OfaResNet& m, size_t i) {
      auto r = MeasureCandidate(m, fresh[i], data, search_calibration, options);
      if (!r.ok()) return r.status();
      measured[i] = *std::move(r);
      std::lock_guard<std::mutex> lock(bar_mu);
      bar.Add(1, absl::StrFormat("%.2f%%", measured[i].validation_accuracy));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    bar.Finish();
    for (CandidateResult& c : measured) {
      c.architecture.subnet_id = static_cast<int32_t>(result.candidates.size());
      result.candidates.push_back(std::move(c));
    }
    // A fit needs enough timings; tiny searches rank by their own timings.
    std::optional<FittedLatencyModel> latency_model;
    if (options.fit_latency && result.candidates.size() >= 8) {
      std::vector<ArchitectureCost> costs;
      std::vector<double> measured_us;
      for (const CandidateResult& c : result.candidates) {
        costs.push_back(c.cost);
        measured_us.push_back(ToMicros(c.search_latency));
      }
      auto fitted = FittedLatencyModel::Fit(costs, measured_us);
      if (!fitted.ok()) return fitted.status();
      for (CandidateResult& c : result.candidates) {
        c.ranking_latency_us = fitted->PredictMicros(c.cost);
      }
      result.latency_model = fitted->DebugString();
      Log(options, absl::StrCat("round ", round, ": ", result.latency_model));
      latency_model = *std::move(fitted);
    }
    std::optional<FittedAccuracyModel> accuracy_model;
    if (options.fit_accuracy && result.candidates.size() >= 2 * AccuracyFeatures(config)) {
      std::vector<ControlTuple> architectures;
      std::vector<double> accuracy;
      for (const CandidateResult& c : result.candidates) {
        architectures.push_back(c.architecture);
        accuracy.push_back(c.validation_accuracy);
      }
      auto fitted = FittedAccuracyModel::Fit(config, architectures, accuracy,
                                             options.accuracy_ridge, options.monotone_accuracy);
      if (!fitted.ok()) return fitted.status();
      for (CandidateResult& c : result.candidates) {
        c.ranking_accuracy = fitted->Predict(c.architecture);
      }
      result.accuracy_model = fitted->DebugString();
      Log(options, absl::StrCat("round ", round, ": ", result.accuracy_model));
      accuracy_model = *std::move(fitted);
    }
    std::vector<CandidatePoint> frontier = ParetoFrontier(Points(result.candidates));
    Log(options, absl::StrFormat("round %d: %d candidates, %d on the validation frontier (%.1f s)",
                                 round, result.candidates.size(), frontier.size(),
                                 SecondsSince(start)));
    if (options.on_round) {
      result.frontier.clear();
      for (const CandidatePoint& p : frontier) result.frontier.push_back(p.key);
      options.on_round(result);
    }
    if (round == options.evolution_rounds) break;
    pending.clear();
    const bool screen = accuracy_model.has_value() && latency_model.has_value() &&
                        options.screen_factor > 1;
    const int proposals = options.mutations_per_round * (screen ? options.screen_factor : 1);
    std::set<std::string> proposed;
    std::vector<ScreenedProposal> screened;
    for (int m = 0; m < proposals; ++m) {
      const CandidatePoint& parent =
          frontier[std::uniform_int_distribution<size_t>(0, frontier.size() - 1)(rng)];
      ControlTuple child = Mutate(config, result.candidates[parent.key].architecture, rng);
      if (!screen) {
        pending.push_back(std::move(child));
        continue;
      }
      const std::string key = ArchitectureKey(config, child);
      if (seen.count(key) > 0 || !proposed.insert(key).second) continue;
      const double latency_us = latency_model->PredictMicros(CostOf(config, child));
      const double margin = accuracy_model->Predict(child) - FrontierAccuracyAt(frontier, latency_us);
      screened.push_back({margin, std::move(child)});
    }
    if (screen) {
      const size_t keep = std::min(screened.size(),
                                   static_cast<size_t>(std::max(0, options.mutations_per_round)));
      std::partial_sort(screened.begin(), screened.begin() + keep, screened.end(),
                        [](const ScreenedProposal& a, const ScreenedProposal& b) {
                          return a.margin > b.margin;
                        });
      for (size_t i = 0; i < keep; ++i) pending.push_back(std::move(screened[i].architecture));
    }
  }
  result.seconds_candidates = SecondsSince(start);

  // 3. Frontier on validation accuracy vs search latency.
  std::vector<CandidatePoint> frontier =
      ThinFrontier(ParetoFrontier(Points(result.candidates)), options.max_subnets);
  result.frontier.clear();
  for (const CandidatePoint& p : frontier) result.frontier.push_back(p.key);

  // 4. Final slots, calibrated and saved; measured from the reloaded checkpoint.
  start = std::chrono::steady_clock::now();
  ModelProfile& profile = result.profile;
  profile.model = options.model_name;
  profile.family = "ofa_resnet";
  profile.batch_sizes = options.batch_sizes;
  profile.input_shape = {config.input_channels, config.input_size, config.input_size};
  profile.num_classes = static_cast<int32_t>(config.num_classes);
  profile.measured_on = options.measured_on;
  profile.input_mean = kPixelMean;
  profile.input_std = kPixelStd;
  for (size_t i = 0; i < frontier.size(); ++i) {
    SubnetProfile subnet;
    subnet.id = static_cast<int32_t>(i);
    subnet.control = models::Canonicalize(config, result.candidates[frontier[i].key].architecture);
    subnet.control.subnet_id = subnet.id;
    subnet.macs = CostOf(config, subnet.control).macs;
    profile.subnets.push_back(std::move(subnet));
  }
  if (auto s = CalibrateProfileSlots(model, profile, calibration); !s.ok()) return s;
  if (auto s = model.Save(checkpoint_path); !s.ok()) return s;
  auto reloaded = OfaResNet::Load(checkpoint_path);
  if (!reloaded.ok()) return reloaded.status();
  SetTorchThreads(1);  // what eval uses: the accuracies reproduce exactly
  {
    auto final_copies = CopiesOf(**reloaded, options.workers - 1, checkpoint_path + ".scratch");
    if (!final_copies.ok()) return final_copies.status();
    std::vector<OfaResNet*> final_workers = {reloaded->get()};
    for (auto& c : *final_copies) final_workers.push_back(c.get());
    ProgressBar bar("test accuracy", static_cast<int64_t>(profile.subnets.size()));
    std::mutex bar_mu;
    absl::Status s = ParallelFor(final_workers, profile.subnets.size(), [&](OfaResNet& m,
                                                                            size_t i) {
      SubnetProfile& subnet = profile.subnets[i];
      auto test = EvaluateSubnet(m, subnet.control, data.test, kEvalBatchSize);
      if (!test.ok()) return test.status();
      subnet.accuracy = test->accuracy_percent;
      std::lock_guard<std::mutex> lock(bar_mu);
      bar.Add(1, absl::StrFormat("subnet %d: %.2f%%", subnet.id, subnet.accuracy));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    bar.Finish();
  }
  auto raised =
      ProfileLatencies(**reloaded, profile, options.profile_warmup, options.profile_repeats);
  if (!raised.ok()) return raised.status();
  Log(options, absl::StrCat("latency profile: ", *raised,
                            " entries raised to keep latency non-decreasing in batch size"));
  if (auto s = profile.SaveFile(profile_path); !s.ok()) return s;
  result.seconds_final = SecondsSince(start);
  return result;
}

}  // namespace superserve::nas
