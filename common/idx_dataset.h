#ifndef SUPERSERVE_COMMON_IDX_DATASET_H_
#define SUPERSERVE_COMMON_IDX_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace superserve {

// A labelled image set in the IDX format (MNIST, Fashion-MNIST), read from
// gzip (or plain) files without torch: uint8 pixels, row-major [n, rows, cols].
struct IdxImageSet {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols
  std::vector<uint8_t> labels;  // count

  const uint8_t* image(int64_t i) const { return pixels.data() + i * rows * cols; }
};

// Reads an idx3-ubyte image file and its idx1-ubyte label file (".gz" or not;
// zlib reads both). Checks magic numbers, sizes, and that the counts agree.
absl::StatusOr<IdxImageSet> ReadIdxImageSet(const std::string& images_path,
                                            const std::string& labels_path);

// Where the Debian dataset-fashion-mnist package installs the test set.
constexpr char kFashionMnistTestImages[] =
    "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
constexpr char kFashionMnistTestLabels[] =
    "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_IDX_DATASET_H_
