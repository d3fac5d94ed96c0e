#ifndef SUPERSERVE_COMMON_IDX_READER_H_
#define SUPERSERVE_COMMON_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace superserve {

// An IDX file (the MNIST / Fashion-MNIST format): big-endian magic
// 0x0000TTNN (TT = element type, NN = rank), NN big-endian uint32 dims, then
// the row-major data. Only unsigned-byte data (type 0x08) is supported, which
// is what the datasets use. Torch-free: the trainer and the load generator
// share it.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
  int64_t num_items() const { return dims.empty() ? 0 : dims[0]; }
  // Bytes per item (product of dims after the first).
  int64_t item_size() const;
};

// Reads `path`, transparently gunzipping when it ends in ".gz". Errors name
// the file and what is wrong (bad magic, unsupported type, truncated data,
// trailing bytes).
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);
// Parses an IDX image already in memory (decompressed). `name` is used in
// error messages.
absl::StatusOr<IdxArray> ParseIdx(const std::string& bytes, const std::string& name);

// Fashion-MNIST from Debian's dataset-fashion-mnist package.
constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

struct LabeledImages {
  IdxArray images;  // [n, 28, 28]
  IdxArray labels;  // [n]
};
// split: "train" or "t10k". Checks that images and labels agree in count and
// that labels are < 10.
absl::StatusOr<LabeledImages> LoadFashionMnist(const std::string& split,
                                               const std::string& dir = kFashionMnistDir);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_IDX_READER_H_
