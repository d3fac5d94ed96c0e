#ifndef SUPERSERVE_NAS_PROFILER_SEARCH_H_
#define SUPERSERVE_NAS_PROFILER_SEARCH_H_

// The accuracy-latency search over a trained supernet and the profiling of
// its Pareto subnets into a ModelProfile + checkpoint. Torch-free: it drives
// supernet_trainer.h.
//
//   1. Candidates: `num_candidates` seeded random architectures plus the
//      smallest and the largest; then `evolution_rounds` rounds that mutate
//      members of the current frontier (one choice each) into new candidates.
//   2. Each candidate: SubnetNorm calibrated on a fixed training subset,
//      validation accuracy, batch-`search_batch` latency (1 thread, median).
//   3. The validation Pareto frontier, thinned to at most `max_subnets`. Its
//      latency axis is, by default, a FittedLatencyModel over all candidates'
//      timings (latency_model.h says why), else the single timings; its
//      accuracy axis, by default, a FittedAccuracyModel over all candidates'
//      validation accuracies (accuracy_model.h), else the single measurements.
//      With both models, each evolution round proposes `screen_factor` times
//      more mutations than it measures and measures the ones predicted
//      furthest above the current frontier.
//   4. Final model: the frontier's architectures become slots 0..n-1 (sorted
//      by latency), calibrated again on the same subset, saved; then the
//      SAVED checkpoint is reloaded and each slot's TEST accuracy and latency
//      per batch size measured from it, so `eval` reproduces them exactly.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/control_tuple.h"
#include "common/model_profile.h"
#include "models/ofa_resnet.h"
#include "nas_profiler/accuracy_model.h"
#include "nas_profiler/latency_model.h"
#include "nas_profiler/supernet_trainer.h"

namespace superserve::nas {

// Fixed settings shared by search, eval, calibrate and reprofile so that they
// measure the same thing.
inline constexpr int kEvalBatchSize = 500;
inline constexpr int kCalibrationBatchSize = 500;

struct CandidateResult {
  ControlTuple architecture;  // subnet_id = candidate index
  double validation_accuracy = 0;  // percent
  Nanos search_latency = 0;        // at SearchOptions::search_batch, measured
  ArchitectureCost cost;           // per image
  double ranking_latency_us = 0;   // the frontier's latency axis (fitted or measured)
  double ranking_accuracy = 0;     // the frontier's accuracy axis (predicted or measured)
};

struct SearchResult;

struct SearchOptions {
  int num_candidates = 400;
  int evolution_rounds = 2;
  int mutations_per_round = 100;
  // The first images of the training split calibrate SubnetNorm: fewer while
  // screening candidates, more for the final Pareto subnets' statistics.
  int64_t search_calibration_images = 1000;
  int64_t calibration_images = 2000;
  int search_batch = 16;
  int search_warmup = 2;
  int search_repeats = 5;
  // Rank candidates by a latency model fitted to all timings (false: by
  // each candidate's own timing).
  bool fit_latency = true;
  // Rank candidates by an accuracy model fitted to all validation accuracies
  // (false: by each candidate's own measurement). Used once there are at
  // least twice as many candidates as the model has features.
  bool fit_accuracy = true;
  double accuracy_ridge = 10.0;
  // Constrain the accuracy model's weights to >= 0 (FittedAccuracyModel).
  // Off by default: the bundled model was searched without it.
  bool monotone_accuracy = false;
  int screen_factor = 10;
  size_t max_subnets = 160;
  std::vector<int32_t> batch_sizes = {1, 2, 4, 8, 16, 32, 64};
  int profile_warmup = 3;
  int profile_repeats = 11;
  // Threads measuring candidates and test accuracies in parallel, each on its
  // own copy of the model with one intra-op thread (results do not depend on
  // it; candidate latencies get noisier). Latency profiles run on one thread.
  int workers = 2;
  uint64_t seed = 1;
  // Candidates an earlier search measured on the same checkpoint with the
  // same settings (its --candidates_csv): they join the pool before round
  // 0 and are not measured again, so a search can be continued with more
  // evolution rounds.
  std::vector<CandidateResult> previous;
  // Re-time the previous candidates here (their accuracies are kept): a
  // continued search on a quieter machine then ranks all by the same clock.
  bool retime_previous = false;
  std::string model_name = "fmnist";
  std::string measured_on;
  std::function<void(const std::string&)> log;
  // Called after every measured round with the pool so far (candidates and
  // their ranking values; frontier as of that round), e.g. to save it: a
  // long search that dies keeps what it measured.
  std::function<void(const SearchResult&)> on_round;
};


struct SearchResult {
  std::vector<CandidateResult> candidates;
  std::vector<int64_t> frontier;  // indices into candidates, by latency
  std::string latency_model;      // the fitted model, if any
  std::string accuracy_model;     // the fitted model, if any
  ModelProfile profile;
  double seconds_candidates = 0;
  double seconds_final = 0;
};

// Runs steps 1-4 on `model` (trained weights; its slots are replaced) and
// writes `checkpoint_path` and `profile_path`.
absl::StatusOr<SearchResult> SearchAndProfile(models::OfaResNet& model,
                                              const FashionMnistSplits& data,
                                              const SearchOptions& options,
                                              const std::string& checkpoint_path,
                                              const std::string& profile_path);

// Latency per batch size of every subnet of `profile` on this machine (the
// checkpoint's slots must be the profile's ids), written into `profile`.
// Non-decreasing in batch size is enforced by a running maximum (a timing
// noise guard); returns how many entries it raised.
absl::StatusOr<int> ProfileLatencies(models::OfaResNet& model, ModelProfile& profile, int warmup,
                                     int repeats);

// Replaces `model`'s slots with the profile's subnets (ids must be 0..n-1)
// and calibrates each on `calibration`.
absl::Status CalibrateProfileSlots(models::OfaResNet& model, const ModelProfile& profile,
                                   const ImageDataset& calibration);

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_SEARCH_H_
