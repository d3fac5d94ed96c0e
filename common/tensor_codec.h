#ifndef SUPERSERVE_COMMON_TENSOR_CODEC_H_
#define SUPERSERVE_COMMON_TENSOR_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace superserve {

namespace v1 {
class Tensor;
}

enum class DType { kFloat32, kFloat16, kInt64, kInt32, kUInt8 };

size_t DTypeSize(DType d);
const char* DTypeName(DType d);

// A dense row-major tensor held by value (little-endian bytes).
struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::string data;

  // The product of the shape; 0 if any dimension is; -1 for a shape no
  // tensor can have (a negative dimension, or a product beyond int64). A
  // decoded tensor's (ValidateWireTensor) is never -1: its bytes are its
  // elements times the dtype's size.
  int64_t num_elements() const;
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
};

// The wire codec. Decoding validates dtype, shape (non-negative dims, rank <=
// kMaxRank, no overflow) and that the byte count is exactly
// product(shape) * element size; every error names what is wrong.
constexpr int kMaxRank = 8;

// Validates a wire tensor in place (no copy of the bytes) and returns its dtype.
absl::StatusOr<DType> ValidateWireTensor(const v1::Tensor& t);
// Validates and additionally requires the given dtype and exact shape.
absl::Status CheckWireTensor(const v1::Tensor& t, DType want_dtype,
                             absl::Span<const int64_t> want_shape);

absl::StatusOr<HostTensor> DecodeTensor(const v1::Tensor& t);
void EncodeTensor(const HostTensor& t, v1::Tensor* out);
// The same, moving the bytes (a worker's outputs: one copy fewer per answer).
void EncodeTensor(HostTensor&& t, v1::Tensor* out);

HostTensor MakeFloatTensor(std::vector<int64_t> shape, absl::Span<const float> values);
// Float32 tensor's values; an error for other dtypes.
absl::StatusOr<std::vector<float>> TensorToFloats(const HostTensor& t);

std::string ShapeString(absl::Span<const int64_t> shape);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_TENSOR_CODEC_H_
