#ifndef SUPERSERVE_COMMON_IMAGE_APPLICATIONS_H_
#define SUPERSERVE_COMMON_IMAGE_APPLICATIONS_H_

// Applications of a dynamic model (Orloj): input domains of different
// difficulty, so each has its own execution-time distribution on an
// early-exit network. For Fashion-MNIST: a subset of classes and, optionally,
// Gaussian pixel noise. The profiling tool, the load generator and the tests
// build an application's inputs from here, so the inputs measured offline are
// the inputs served live. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace superserve {

struct ImageApplication {
  std::string name;
  std::vector<int32_t> classes;  // labels this application sends; empty = all
  float noise_std = 0;           // Gaussian noise on pixel/255, clipped to [0, 1]
};

// "easy" (trouser, sandal, sneaker, bag, ankle boot), "hard" (t-shirt,
// pullover, coat, shirt) and "noisy" (every class, noise 0.4).
const std::vector<ImageApplication>& FashionMnistApplications();
// nullptr when unknown.
const ImageApplication* FindImageApplication(absl::Span<const ImageApplication> apps,
                                             const std::string& name);

// Indices (ascending) of the images whose label belongs to `app`.
std::vector<int64_t> ApplicationImages(const ImageApplication& app,
                                       absl::Span<const uint8_t> labels);

// `app`'s version of one image: pixels/255 (+ noise seeded by `image_index`,
// so it is the same input every time), written to `out` (pixels.size()).
void ApplicationInput(const ImageApplication& app, int64_t image_index,
                      absl::Span<const uint8_t> pixels, float* out);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_IMAGE_APPLICATIONS_H_
