#include "common/image_applications.h"

#include <algorithm>
#include <random>

namespace superserve {

const std::vector<ImageApplication>& FashionMnistApplications() {
  static const auto* apps = new std::vector<ImageApplication>{
      {"easy", {1, 5, 7, 8, 9}, 0.f},
      {"hard", {0, 2, 4, 6}, 0.f},
      {"noisy", {}, 0.4f},
  };
  return *apps;
}

const ImageApplication* FindImageApplication(absl::Span<const ImageApplication> apps,
                                             const std::string& name) {
  for (const auto& a : apps) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::vector<int64_t> ApplicationImages(const ImageApplication& app,
                                       absl::Span<const uint8_t> labels) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (app.classes.empty() || std::find(app.classes.begin(), app.classes.end(),
                                         static_cast<int32_t>(labels[i])) != app.classes.end()) {
      out.push_back(static_cast<int64_t>(i));
    }
  }
  return out;
}

void ApplicationInput(const ImageApplication& app, int64_t image_index,
                      absl::Span<const uint8_t> pixels, float* out) {
  for (size_t i = 0; i < pixels.size(); ++i) out[i] = pixels[i] / 255.f;
  if (app.noise_std <= 0) return;
  std::mt19937_64 rng(0x5eed0000ULL + static_cast<uint64_t>(image_index));
  std::normal_distribution<float> noise(0.f, app.noise_std);
  for (size_t i = 0; i < pixels.size(); ++i) out[i] = std::clamp(out[i] + noise(rng), 0.f, 1.f);
}

}  // namespace superserve
