#ifndef SUPERSERVE_MODELS_OFA_RESNET_CONFIG_H_
#define SUPERSERVE_MODELS_OFA_RESNET_CONFIG_H_

// The OFA-ResNet supernet family's shape and the meaning of its ControlTuple.
// Torch-free on purpose: policies, profilers and tests can validate, sample and
// size control tuples without paying for torch headers.
//
// ControlTuple layout for a config with S stages and B = sum_i(base_depths[i] +
// max(depth_choices)) blocks (blocks counted at maximum depth, stage by stage):
//   subnet_id          SubnetNorm slot, 0 <= id < NumSlots(), or kNoSlot (-1)
//                      when the model normalises with batch statistics
//                      (training, calibration).
//   depths             S entries: EXTRA depth of stage i, one of depth_choices;
//                      stage i runs its first base_depths[i] + depths[i] blocks.
//   expand_ratios      B entries: bottleneck expand ratio of every block at max
//                      depth (stage 0 block 0 first). Entries of blocks that the
//                      depth skips must still be valid choices; they do not change
//                      the network (Canonicalize() sets them to the first choice).
//   width_multipliers  1 + S entries: [0] scales the stem, [1 + i] scales stage i.
//   kernel_sizes       must be empty (this family has fixed 3x3 kernels).
//
// Channels (OFA convention, MakeDivisible rounds to multiples of 8):
//   stem width      = MakeDivisible(stem_width * w[0])
//   stage i width   = MakeDivisible(stage_widths[i] * w[1 + i])
//   block mid width = MakeDivisible(round(stage width * expand_ratio))

#include <cstdint>
#include <string_view>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/control_tuple.h"

namespace superserve::models {

inline constexpr int32_t kNoSlot = -1;

// Storage precision of the per-slot SubnetNorm mean/var. Affine parameters and
// all arithmetic stay float32. float16 halves the statistics' memory (the
// bulk of a 500-slot supernet's overhead); its rounding (relative 2^-11) is far
// below the sampling error of calibration. Values outside float16 range are
// rejected when written (choose kFloat32 then).
enum class StatisticsPrecision { kFloat32 = 0, kFloat16 = 1 };

struct OfaResNetConfig {
  int64_t input_channels = 3;
  int64_t input_size = 224;  // square inputs; any size >= 1 works, this is the nominal one
  int64_t num_classes = 1000;
  int64_t stem_width = 64;
  int64_t stem_stride = 2;
  bool stem_max_pool = true;  // 3x3 stride-2 max pool after the stem (ImageNet style)
  std::vector<int64_t> base_depths = {2, 2, 4, 2};
  std::vector<int64_t> stage_widths = {256, 512, 1024, 2048};  // bottleneck output widths
  std::vector<int64_t> stage_strides = {1, 2, 2, 2};
  std::vector<int32_t> depth_choices = {0, 1, 2};
  std::vector<float> expand_ratio_choices = {0.2f, 0.25f, 0.35f};
  std::vector<float> width_multiplier_choices = {0.65f, 0.8f, 1.0f};
  StatisticsPrecision statistics_precision = StatisticsPrecision::kFloat16;

  // OFA-ResNet50: 224x224x3, 1000 classes, base depths [2,2,4,2].
  static OfaResNetConfig ImageNetResNet50();
  // Fashion-MNIST: 28x28x1, 10 classes, no stem stride/pool, narrow stages.
  static OfaResNetConfig FashionMnist();

  int64_t num_stages() const { return static_cast<int64_t>(base_depths.size()); }
  int64_t max_extra_depth() const;
  int64_t max_blocks_in_stage(int64_t stage) const {
    return base_depths[stage] + max_extra_depth();
  }
  int64_t num_blocks() const;  // B above
  int64_t first_block_of_stage(int64_t stage) const;

  std::string DebugString() const;
};

// Checks the config itself (non-empty sorted choices, matching stage vectors,
// positive sizes).
absl::Status ValidateConfig(const OfaResNetConfig& config);

// A package manifest's "architecture" object (JSON) against the config a
// checkpoint carries: every key it gives must be a config field (input_channels,
// input_size, num_classes, stem_width, stem_stride, base_depths,
// stage_widths, stage_strides, depth_choices, expand_ratio_choices,
// width_multiplier_choices) with the checkpoint's value. Keys left out are
// not checked. Errors read "manifest.json: field architecture.<key>: ...",
// naming the manifest's value and the checkpoint's.
absl::Status CheckManifestArchitecture(const OfaResNetConfig& config,
                                       std::string_view architecture_json);

// OFA's make_divisible(v, 8).
int64_t MakeDivisible(double value, int64_t divisor = 8);

// Checks everything about `control` except subnet_id (slots belong to a model
// instance). Errors name the field, the index and the value.
absl::Status ValidateArchitecture(const OfaResNetConfig& config, const ControlTuple& control);

// Same network, inactive blocks' expand ratios set to the first choice.
ControlTuple Canonicalize(const OfaResNetConfig& config, const ControlTuple& control);

// Per-layer active channel counts of one architecture (which must be valid).
struct BlockShape {
  bool active = false;
  int64_t stage = 0;
  int64_t index_in_stage = 0;
  int64_t in_channels = 0;   // active input width
  int64_t mid_channels = 0;  // active bottleneck width
  int64_t out_channels = 0;  // active output width (= stage width)
  int64_t stride = 1;
  bool has_shortcut_conv = false;  // first block of a stage
};
struct ArchitectureShape {
  int64_t stem_channels = 0;
  std::vector<int64_t> stage_channels;
  std::vector<BlockShape> blocks;  // all B blocks, inactive ones flagged
  int64_t final_channels = 0;
};
ArchitectureShape ShapeOf(const OfaResNetConfig& config, const ControlTuple& control);
// The supernet's maximum widths (every layer's weight size).
ArchitectureShape MaxShape(const OfaResNetConfig& config);

// Parameter count of the extracted dense subnet (convs, norm affine, linear).
int64_t SubnetParameterCount(const OfaResNetConfig& config, const ControlTuple& control);
// Normalised channels of the subnet (= floats of mean, or of var, per slot).
int64_t SubnetNormChannels(const OfaResNetConfig& config, const ControlTuple& control);

ControlTuple SmallestArchitecture(const OfaResNetConfig& config);
ControlTuple LargestArchitecture(const OfaResNetConfig& config);

// `count` distinct canonical architectures drawn uniformly per choice with a
// seeded generator (deterministic for a seed); subnet_id = position in the
// result. Fails if the space has fewer than `count` architectures.
absl::StatusOr<std::vector<ControlTuple>> SampleArchitectures(const OfaResNetConfig& config,
                                                              int count, uint64_t seed);

}  // namespace superserve::models

#endif  // SUPERSERVE_MODELS_OFA_RESNET_CONFIG_H_
