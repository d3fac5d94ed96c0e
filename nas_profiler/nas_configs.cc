#include "nas_profiler/nas_configs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace superserve::nas {

namespace {

models::OfaResNetConfig Tiny() {
  models::OfaResNetConfig c = models::OfaResNetConfig::FashionMnist();
  c.stem_width = 8;
  c.stem_stride = 2;
  c.base_depths = {1, 1};
  c.stage_widths = {16, 32};
  c.stage_strides = {2, 2};
  c.depth_choices = {0, 1};
  return c;
}

// FashionMnist() with a stride-2 stem: every stage runs at a quarter of the
// pixels, so training fits a shared 2-core machine.
models::OfaResNetConfig FashionMnistStride2Stem() {
  models::OfaResNetConfig c = models::OfaResNetConfig::FashionMnist();
  c.stem_stride = 2;
  return c;
}

// fmnist-s2 with wider elastic ranges (narrower smallest subnet), for a
// larger largest/smallest latency ratio and accuracy span.
models::OfaResNetConfig FashionMnistStride2StemWide() {
  models::OfaResNetConfig c = FashionMnistStride2Stem();
  c.expand_ratio_choices = {0.15f, 0.25f, 0.35f};
  c.width_multiplier_choices = {0.5f, 0.75f, 1.0f};
  // float32 statistics: what the bundled checkpoint holds (it was trained
  // before float16 storage became the default); ~100 slots cost < 1 MB.
  c.statistics_precision = models::StatisticsPrecision::kFloat32;
  return c;
}

// fmnist-s2w with a still wider elastic range: the same weights (the maxima
// are unchanged), a narrower and thinner smallest subnet. The bundled model
// was trained as fmnist-s2w and fine-tuned with these choices.
models::OfaResNetConfig FashionMnistStride2StemExtraWide() {
  models::OfaResNetConfig c = FashionMnistStride2StemWide();
  c.expand_ratio_choices = {0.1f, 0.15f, 0.25f, 0.35f};
  c.width_multiplier_choices = {0.35f, 0.5f, 0.75f, 1.0f};
  return c;
}

// fmnist-s2x with a still thinner smallest subnet (width 0.25, expand 0.05):
// the same weights again, for a wider accuracy span.
models::OfaResNetConfig FashionMnistStride2StemThinnest() {
  models::OfaResNetConfig c = FashionMnistStride2StemExtraWide();
  c.expand_ratio_choices = {0.05f, 0.1f, 0.15f, 0.25f, 0.35f};
  c.width_multiplier_choices = {0.25f, 0.35f, 0.5f, 0.75f, 1.0f};
  return c;
}

// FashionMnist() with the first stage strided instead of the stem.
models::OfaResNetConfig FashionMnistStridedStage0() {
  models::OfaResNetConfig c = models::OfaResNetConfig::FashionMnist();
  c.stage_strides = {2, 2, 2, 1};
  return c;
}

}  // namespace

std::vector<std::string> ConfigNames() { return {"fmnist", "fmnist-s2", "fmnist-s2w", "fmnist-s2x", "fmnist-s2y", "fmnist-ss0", "tiny"}; }

absl::StatusOr<models::OfaResNetConfig> NamedConfig(const std::string& name) {
  if (name == "fmnist") return models::OfaResNetConfig::FashionMnist();
  if (name == "fmnist-s2") return FashionMnistStride2Stem();
  if (name == "fmnist-s2w") return FashionMnistStride2StemWide();
  if (name == "fmnist-s2x") return FashionMnistStride2StemExtraWide();
  if (name == "fmnist-s2y") return FashionMnistStride2StemThinnest();
  if (name == "fmnist-ss0") return FashionMnistStridedStage0();
  if (name == "tiny") return Tiny();
  return absl::InvalidArgumentError(absl::StrCat("unknown config '", name, "' (known: ",
                                                 absl::StrJoin(ConfigNames(), ", "), ")"));
}

}  // namespace superserve::nas
