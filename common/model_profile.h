#ifndef SUPERSERVE_COMMON_MODEL_PROFILE_H_
#define SUPERSERVE_COMMON_MODEL_PROFILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/control_tuple.h"
#include "common/time.h"

namespace superserve {

namespace v1 {
class ModelProfile;
}

// latency(b) = alpha_us * b + beta_us microseconds (profile.proto's linear
// form of a subnet's latency).
struct LinearLatency {
  double alpha_us = 0;
  double beta_us = 0;
};

// One Pareto-optimal subnet: accuracy in PERCENT (0..100), latency per batch
// size (same order as ModelProfile::batch_sizes).
struct SubnetProfile {
  int32_t id = -1;
  double accuracy = 0;
  ControlTuple control;
  std::vector<Nanos> latency;
  double macs = 0;
  // Set when the profile stated the linear form: `latency` is its expansion,
  // and ToProto writes the form back instead of the table.
  std::optional<LinearLatency> linear;
};

// Empirical execution-time distribution of one application of a dynamic DNN.
struct ApplicationHistogram {
  std::string application;
  std::vector<double> bin_edges_us;  // size = counts.size() + 1, strictly increasing
  std::vector<double> counts;        // >= 0, sum > 0
  // Top-1 accuracy, percent, of the application's held-out samples that left
  // at each exit (0-based); empty when not measured.
  std::vector<double> exit_accuracy;
  // Top-1 accuracy, percent, of the application's held-out samples at the
  // histogram's threshold; nullopt when not measured.
  std::optional<double> accuracy;
};

// An early-exit model measured at one exit confidence threshold:
// `applications` parallel to DynamicModelProfile::applications (same names,
// same order).
struct ExitThresholdProfile {
  double threshold = 0;  // (0, 1]
  double accuracy = 0;   // percent, whole held-out test set
  std::vector<ApplicationHistogram> applications;
};

struct DynamicModelProfile {
  double batch_overhead_us = 0;
  double per_request_factor = 1;
  std::vector<ApplicationHistogram> applications;
  // As ApplicationHistogram::exit_accuracy, over the whole held-out test set.
  std::vector<double> exit_accuracy;
  // Load-adaptive exits: the model measured at several thresholds, strictly
  // increasing; `applications` and `exit_accuracy` above are those of
  // thresholds[default_threshold_index()]. Empty for a profile without
  // per-threshold data: one threshold, the model's own (default_threshold 0 =
  // not stated).
  double default_threshold = 0;
  std::vector<ExitThresholdProfile> thresholds;

  // Index into `thresholds` of default_threshold, or -1 when there are none.
  int32_t default_threshold_index() const;
  // The application histograms at threshold index `t` (-1 or out of range:
  // the default's, `applications`).
  const std::vector<ApplicationHistogram>& ApplicationsAt(int32_t t) const;

  // The accuracy an answer that left at `exit` (0-based) carries: the
  // application's figure if it has one, else the model's, else 0 (not
  // measured). O(applications) string compares. `threshold_index` >= 0: at
  // that threshold (its applications' figures, then the model's).
  double ExitAccuracy(std::string_view application, int32_t exit,
                      int32_t threshold_index = -1) const;
  // The accuracy of an answer whose exit is unknown: the application's
  // `accuracy` at threshold index `t` (-1: the default), else that
  // threshold's model-wide accuracy, else 0.
  double ExpectedAccuracy(std::string_view application, int32_t t = -1) const;
};

// The largest batch size a profile may list. Far beyond what one batch of
// these models holds in an accelerator's memory; the router and the policies
// size per-model state by a model's largest batch, so a profile declaring
// 2^30 would cost memory before any query arrives.
inline constexpr int32_t kMaxBatchSize = 1 << 16;

// The validated, torch-free view of a profile.proto ModelProfile. Stored on
// disk as protobuf JSON. Validation rules (each rejection names the subnet and
// the field):
//   - batch_sizes: non-empty, each in [1, kMaxBatchSize], strictly increasing
//     (any sizes: a batch of n runs at the smallest listed size >= n);
//   - subnets (unless the model is dynamic-only): at least one; ids unique and
//     >= 0; accuracy finite in [0, 100] percent; latency given either as a
//     table (latency_us: exactly one per batch size, each finite, 1 ns to a
//     day) or in the linear form (alpha_us and beta_us: finite, >= 0, sum >
//     0, every expanded latency within 1 ns to a day), not both, not neither;
//   - input_shape entries > 0; num_classes >= 0;
//   - input_normalization (if present): mean finite, std finite and > 0;
//   - a profile has subnets or dynamic histograms, not both;
//   - dynamic: batch_sizes start at 1; batch_overhead_us >= 0 and
//     per_request_factor > 0 with every batch time (c0 + c1 * k * max edge)
//     within a day;
//   - dynamic histograms: edges strictly increasing, counts >= 0 with sum > 0;
//   - dynamic exit_accuracy (model-wide and per application, each optional):
//     finite in [0, 100] percent, and every one that is given has as many
//     entries (one per exit);
//   - dynamic thresholds (optional): each in (0, 1], strictly increasing,
//     accuracy in [0, 100], its applications the same names in the same
//     order as dynamic.applications, each a valid histogram (as above);
//     default_threshold one of them. Without thresholds default_threshold
//     is 0 or in (0, 1].
// What a measured profile gets wrong by noise is adjusted, not refused, and
// each adjustment is described in `warnings`:
//   - a table latency below the previous batch size's is raised to it
//     (latency must be non-decreasing in batch size);
//   - a subnet dominated by another (at least as accurate and at least as
//     fast at every batch size, strictly better in one) is moved from
//     `subnets` to `left_out`, so that no policy chooses it.
struct ModelProfile {
  std::string model;
  std::string family;
  std::vector<int32_t> batch_sizes;
  std::vector<SubnetProfile> subnets;
  // The dominated subnets loading left out of `subnets`. A checkpoint still
  // holds their slots: calibration, evaluation and re-profiling address every
  // slot (EverySubnet). ToProto writes `subnets` only (what a copy edited by
  // hand keeps is what it says), so re-profiling moves them back first.
  std::vector<SubnetProfile> left_out;
  std::vector<int64_t> input_shape;
  int32_t num_classes = 0;
  std::string measured_on;
  // Input normalisation the worker applies: x' = (x - input_mean) / input_std.
  float input_mean = 0;
  float input_std = 1;
  bool is_dynamic = false;
  DynamicModelProfile dynamic;

  // False for a package profile that left latency_us empty on every subnet
  // (docs/packages.md): the worker that loads the package measures them,
  // and nothing schedules with the profile before FillLatencies.
  bool latencies_measured = true;

  // Placement (serving/residency.h): worker memory the loaded model takes
  // (bytes) and the time a worker takes to load it. 0 = unknown: no memory,
  // loaded at once.
  int64_t memory_bytes = 0;
  Nanos load_time = 0;

  // What loading adjusted (dips raised, dominated subnets left out), one
  // line each naming the subnet, the batch size and the figures; the binaries
  // that load a profile print them once. Not part of the proto.
  std::vector<std::string> warnings;

  static absl::StatusOr<ModelProfile> FromProto(const v1::ModelProfile& proto);
  static absl::StatusOr<ModelProfile> FromJson(std::string_view json);
  static absl::StatusOr<ModelProfile> LoadFile(const std::string& path);
  // As LoadFile, but a supernet profile whose subnets ALL leave latency_us
  // empty is accepted too (latencies_measured = false; every other rule
  // holds). Model packages load their profile this way.
  static absl::StatusOr<ModelProfile> LoadFileAllowingUnmeasured(const std::string& path);

  // Sets the latencies a worker measured: `latency_us[id]` one figure per
  // batch size for every subnet id. A figure below the previous batch size's
  // is raised to it (timing noise; the profile rules want them
  // non-decreasing). The result is validated and dominated subnets are left
  // out (with warnings, as FromProto); on error nothing changes.
  absl::Status FillLatencies(const std::map<int32_t, std::vector<double>>& latency_us);

  void ToProto(v1::ModelProfile* proto) const;
  std::string ToJson() const;
  absl::Status SaveFile(const std::string& path) const;

  // Index of `batch` in batch_sizes, or -1. O(log batch sizes).
  int BatchIndex(int32_t batch) const;
  // Index of the smallest batch size >= n (the size a batch of n runs at,
  // padded), or -1 when n exceeds max_batch(). n <= 1 gives 0.
  int PaddedBatchIndex(int64_t n) const;
  // Index in subnets of the subnet with this id, or -1.
  int SubnetIndex(int32_t id) const;
  // `subnets` and `left_out` together, in id order: every slot of the
  // checkpoint the profile describes.
  std::vector<SubnetProfile> EverySubnet() const;
  int32_t max_batch() const { return batch_sizes.empty() ? 0 : batch_sizes.back(); }
};

// Validates a proto without converting it; FromProto calls this. Dips in a
// latency table and dominated subnets are not errors (FromProto adjusts
// them).
absl::Status ValidateModelProfile(const v1::ModelProfile& proto);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_MODEL_PROFILE_H_
