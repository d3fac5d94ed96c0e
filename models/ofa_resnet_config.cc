#include "models/ofa_resnet_config.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace superserve::models {
namespace {

bool SameFloat(float a, float b) { return std::fabs(a - b) <= 1e-6f * std::max(1.f, std::fabs(b)); }

template <typename T>
bool IsChoice(const std::vector<T>& choices, T v) {
  for (const T& c : choices) {
    if constexpr (std::is_floating_point_v<T>) {
      if (SameFloat(v, c)) return true;
    } else {
      if (v == c) return true;
    }
  }
  return false;
}

template <typename T>
absl::Status CheckEntries(const char* field, const std::vector<T>& values, size_t want,
                          const std::vector<T>& choices) {
  if (values.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", values.size(), " entries, want ", want));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(static_cast<double>(values[i])) || !IsChoice(choices, values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "] = ", values[i], " is not one of {", absl::StrJoin(choices, ","), "}"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

OfaResNetConfig OfaResNetConfig::ImageNetResNet50() { return OfaResNetConfig(); }

OfaResNetConfig OfaResNetConfig::FashionMnist() {
  OfaResNetConfig c;
  c.input_channels = 1;
  c.input_size = 28;
  c.num_classes = 10;
  c.stem_width = 16;
  c.stem_stride = 1;
  c.stem_max_pool = false;
  c.base_depths = {1, 1, 1, 1};
  c.stage_widths = {32, 64, 128, 256};
  c.stage_strides = {1, 2, 2, 2};
  return c;
}

int64_t OfaResNetConfig::max_extra_depth() const {
  return depth_choices.empty() ? 0 : *std::max_element(depth_choices.begin(), depth_choices.end());
}

int64_t OfaResNetConfig::num_blocks() const {
  int64_t n = 0;
  for (int64_t s = 0; s < num_stages(); ++s) n += max_blocks_in_stage(s);
  return n;
}

int64_t OfaResNetConfig::first_block_of_stage(int64_t stage) const {
  int64_t n = 0;
  for (int64_t s = 0; s < stage; ++s) n += max_blocks_in_stage(s);
  return n;
}

std::string OfaResNetConfig::DebugString() const {
  return absl::StrCat(
      "OfaResNet(in=", input_channels, "x", input_size, "x", input_size, " classes=", num_classes,
      " stem=", stem_width, "/s", stem_stride, stem_max_pool ? "+pool" : "", " base_depths=[",
      absl::StrJoin(base_depths, ","), "] widths=[", absl::StrJoin(stage_widths, ","), "])");
}

absl::Status ValidateConfig(const OfaResNetConfig& c) {
  auto bad = [](const std::string& m) {
    return absl::InvalidArgumentError("OfaResNetConfig: " + m);
  };
  if (c.input_channels <= 0 || c.input_size <= 0 || c.num_classes <= 0 || c.stem_width <= 0 ||
      c.stem_stride <= 0) {
    return bad("input_channels, input_size, num_classes, stem_width, stem_stride must be > 0");
  }
  if (c.base_depths.empty()) return bad("needs at least one stage");
  if (c.stage_widths.size() != c.base_depths.size() ||
      c.stage_strides.size() != c.base_depths.size()) {
    return bad("base_depths, stage_widths and stage_strides must have one entry per stage");
  }
  for (size_t i = 0; i < c.base_depths.size(); ++i) {
    if (c.base_depths[i] < 1 || c.stage_widths[i] <= 0 || c.stage_strides[i] <= 0) {
      return bad(absl::StrCat("stage ", i, ": base depth >= 1, width and stride > 0 required"));
    }
  }
  if (c.depth_choices.empty() || c.expand_ratio_choices.empty() ||
      c.width_multiplier_choices.empty()) {
    return bad("every choice list must be non-empty");
  }
  if (!std::is_sorted(c.depth_choices.begin(), c.depth_choices.end()) ||
      !std::is_sorted(c.expand_ratio_choices.begin(), c.expand_ratio_choices.end()) ||
      !std::is_sorted(c.width_multiplier_choices.begin(), c.width_multiplier_choices.end())) {
    return bad("choice lists must be sorted ascending (the last one is the supernet's maximum)");
  }
  if (c.depth_choices.front() < 0) return bad("depth choices must be >= 0");
  if (c.expand_ratio_choices.front() <= 0 || c.width_multiplier_choices.front() <= 0) {
    return bad("expand ratios and width multipliers must be > 0");
  }
  return absl::OkStatus();
}

int64_t MakeDivisible(double value, int64_t divisor) {
  int64_t v =
      std::max<int64_t>(divisor, static_cast<int64_t>(value + divisor / 2.0) / divisor * divisor);
  if (v < 0.9 * value) v += divisor;  // never round down by more than 10%
  return v;
}

absl::Status ValidateArchitecture(const OfaResNetConfig& c, const ControlTuple& t) {
  const size_t stages = c.base_depths.size();
  if (auto s = CheckEntries("depths", t.depths, stages, c.depth_choices); !s.ok()) return s;
  if (auto s =
          CheckEntries("expand_ratios", t.expand_ratios, c.num_blocks(), c.expand_ratio_choices);
      !s.ok()) {
    return s;
  }
  if (auto s = CheckEntries("width_multipliers", t.width_multipliers, stages + 1,
                            c.width_multiplier_choices);
      !s.ok()) {
    return s;
  }
  if (!t.kernel_sizes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("kernel_sizes has ", t.kernel_sizes.size(),
                                                   " entries, want 0 (fixed 3x3 kernels)"));
  }
  return absl::OkStatus();
}

ControlTuple Canonicalize(const OfaResNetConfig& c, const ControlTuple& t) {
  ControlTuple out = t;
  for (int64_t s = 0; s < c.num_stages(); ++s) {
    int64_t first = c.first_block_of_stage(s);
    for (int64_t b = c.base_depths[s] + t.depths[s]; b < c.max_blocks_in_stage(s); ++b) {
      out.expand_ratios[first + b] = c.expand_ratio_choices.front();
    }
  }
  return out;
}

ArchitectureShape ShapeOf(const OfaResNetConfig& c, const ControlTuple& t) {
  ArchitectureShape a;
  a.stem_channels = MakeDivisible(c.stem_width * t.width_multipliers[0]);
  int64_t in = a.stem_channels;
  for (int64_t s = 0; s < c.num_stages(); ++s) {
    int64_t width = MakeDivisible(c.stage_widths[s] * t.width_multipliers[1 + s]);
    a.stage_channels.push_back(width);
    int64_t active_blocks = c.base_depths[s] + t.depths[s];
    for (int64_t b = 0; b < c.max_blocks_in_stage(s); ++b) {
      BlockShape blk;
      blk.active = b < active_blocks;
      blk.stage = s;
      blk.index_in_stage = b;
      blk.in_channels = in;
      float e = t.expand_ratios[c.first_block_of_stage(s) + b];
      blk.mid_channels = MakeDivisible(std::round(width * static_cast<double>(e)));
      blk.out_channels = width;
      blk.stride = b == 0 ? c.stage_strides[s] : 1;
      blk.has_shortcut_conv = b == 0;
      a.blocks.push_back(blk);
      in = width;
    }
  }
  a.final_channels = in;
  return a;
}

ControlTuple SmallestArchitecture(const OfaResNetConfig& c) {
  ControlTuple t;
  t.subnet_id = kNoSlot;
  t.depths.assign(c.num_stages(), c.depth_choices.front());
  t.expand_ratios.assign(c.num_blocks(), c.expand_ratio_choices.front());
  t.width_multipliers.assign(c.num_stages() + 1, c.width_multiplier_choices.front());
  return t;
}

ControlTuple LargestArchitecture(const OfaResNetConfig& c) {
  ControlTuple t;
  t.subnet_id = kNoSlot;
  t.depths.assign(c.num_stages(), c.depth_choices.back());
  t.expand_ratios.assign(c.num_blocks(), c.expand_ratio_choices.back());
  t.width_multipliers.assign(c.num_stages() + 1, c.width_multiplier_choices.back());
  return t;
}

ArchitectureShape MaxShape(const OfaResNetConfig& c) { return ShapeOf(c, LargestArchitecture(c)); }

int64_t SubnetParameterCount(const OfaResNetConfig& c, const ControlTuple& t) {
  ArchitectureShape a = ShapeOf(c, t);
  int64_t n = c.input_channels * a.stem_channels * 9 + 2 * a.stem_channels;
  for (const BlockShape& b : a.blocks) {
    if (!b.active) continue;
    n += b.in_channels * b.mid_channels + 2 * b.mid_channels;
    n += b.mid_channels * b.mid_channels * 9 + 2 * b.mid_channels;
    n += b.mid_channels * b.out_channels + 2 * b.out_channels;
    if (b.has_shortcut_conv) n += b.in_channels * b.out_channels + 2 * b.out_channels;
  }
  n += a.final_channels * c.num_classes + c.num_classes;
  return n;
}

int64_t SubnetNormChannels(const OfaResNetConfig& c, const ControlTuple& t) {
  ArchitectureShape a = ShapeOf(c, t);
  int64_t n = a.stem_channels;
  for (const BlockShape& b : a.blocks) {
    if (!b.active) continue;
    n += 2 * b.mid_channels + b.out_channels + (b.has_shortcut_conv ? b.out_channels : 0);
  }
  return n;
}

absl::StatusOr<std::vector<ControlTuple>> SampleArchitectures(const OfaResNetConfig& c, int count,
                                                              uint64_t seed) {
  if (auto s = ValidateConfig(c); !s.ok()) return s;
  if (count < 0) return absl::InvalidArgumentError("count must be >= 0");
  // Size of the space of distinct networks, capped to avoid overflow.
  double space = std::pow(c.width_multiplier_choices.size(), c.num_stages() + 1);
  for (int64_t s = 0; s < c.num_stages(); ++s) {
    double per_stage = 0;
    for (int32_t d : c.depth_choices) {
      per_stage += std::pow(c.expand_ratio_choices.size(), c.base_depths[s] + d);
    }
    space *= per_stage;
  }
  if (space < count) {
    return absl::InvalidArgumentError(
        absl::StrCat("only ", space, " distinct architectures, asked for ", count));
  }
  std::mt19937_64 rng(seed);
  auto pick = [&rng](const auto& choices) {
    return choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
  };
  std::set<std::tuple<std::vector<int32_t>, std::vector<float>, std::vector<float>>> seen;
  std::vector<ControlTuple> out;
  while (static_cast<int>(out.size()) < count) {
    ControlTuple t;
    for (int64_t s = 0; s < c.num_stages(); ++s) t.depths.push_back(pick(c.depth_choices));
    for (int64_t b = 0; b < c.num_blocks(); ++b) {
      t.expand_ratios.push_back(pick(c.expand_ratio_choices));
    }
    for (int64_t s = 0; s <= c.num_stages(); ++s) {
      t.width_multipliers.push_back(pick(c.width_multiplier_choices));
    }
    t = Canonicalize(c, t);
    if (!seen.insert({t.depths, t.expand_ratios, t.width_multipliers}).second) continue;
    t.subnet_id = static_cast<int32_t>(out.size());
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

// The manifest's value as a list of doubles (a number is a one-element list);
// false if it is neither a number nor a list of numbers.
bool Numbers(const google::protobuf::Value& v, std::vector<double>* out) {
  out->clear();
  if (v.kind_case() == google::protobuf::Value::kNumberValue) {
    out->push_back(v.number_value());
    return true;
  }
  if (v.kind_case() != google::protobuf::Value::kListValue) return false;
  for (const auto& e : v.list_value().values()) {
    if (e.kind_case() != google::protobuf::Value::kNumberValue) return false;
    out->push_back(e.number_value());
  }
  return true;
}

std::string ListString(const std::vector<double>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

}  // namespace

absl::Status CheckManifestArchitecture(const OfaResNetConfig& config,
                                       std::string_view architecture_json) {
  if (architecture_json.empty()) return absl::OkStatus();
  google::protobuf::Struct manifest;
  if (!google::protobuf::util::JsonStringToMessage(std::string(architecture_json), &manifest)
           .ok()) {
    return absl::InvalidArgumentError("manifest.json: field architecture: not a JSON object");
  }
  auto ints = [](const auto& v) { return std::vector<double>(v.begin(), v.end()); };
  // The checkpoint's value of each key, and whether it is one number.
  const std::vector<std::tuple<std::string, std::vector<double>, bool>> fields = {
      {"input_channels", {static_cast<double>(config.input_channels)}, true},
      {"input_size", {static_cast<double>(config.input_size)}, true},
      {"num_classes", {static_cast<double>(config.num_classes)}, true},
      {"stem_width", {static_cast<double>(config.stem_width)}, true},
      {"stem_stride", {static_cast<double>(config.stem_stride)}, true},
      {"base_depths", ints(config.base_depths), false},
      {"stage_widths", ints(config.stage_widths), false},
      {"stage_strides", ints(config.stage_strides), false},
      {"depth_choices", ints(config.depth_choices), false},
      {"expand_ratio_choices", ints(config.expand_ratio_choices), false},
      {"width_multiplier_choices", ints(config.width_multiplier_choices), false},
  };
  std::vector<std::string> keys;
  for (const auto& [key, value] : manifest.fields()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());  // deterministic: the first bad key in name order
  for (const std::string& key : keys) {
    const google::protobuf::Value& value = manifest.fields().at(key);
    auto it = std::find_if(fields.begin(), fields.end(),
                           [&](const auto& f) { return std::get<0>(f) == key; });
    if (it == fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "manifest.json: field architecture.", key, ": not a field of the ofa_resnet family"));
    }
    const auto& [name, want, scalar] = *it;
    std::vector<double> got;
    const bool shaped = Numbers(value, &got) &&
                        (value.kind_case() == google::protobuf::Value::kNumberValue) == scalar;
    bool equal = shaped && got.size() == want.size();
    for (size_t i = 0; equal && i < got.size(); ++i) {
      // Choices are float32 in the checkpoint: compare at float precision.
      equal = std::abs(got[i] - want[i]) <= 1e-6 * std::max(1.0, std::abs(want[i]));
    }
    if (!equal) {
      return absl::InvalidArgumentError(absl::StrCat(
          "manifest.json: field architecture.", key, ": ",
          shaped ? (scalar ? absl::StrCat(got[0]) : ListString(got))
                 : std::string("not ") + (scalar ? "a number" : "a list of numbers"),
          " but the checkpoint's is ", scalar ? absl::StrCat(want[0]) : ListString(want)));
    }
  }
  return absl::OkStatus();
}

}  // namespace superserve::models
