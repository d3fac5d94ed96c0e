#include "common/tensor_codec.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {
namespace {

// The wire format is little-endian; we only build for little-endian hosts
// (x86-64, aarch64), so bytes are copied as they are.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire codec assumes a little-endian host");

absl::StatusOr<DType> FromWire(v1::DType d) {
  switch (d) {
    case v1::DTYPE_FLOAT32: return DType::kFloat32;
    case v1::DTYPE_FLOAT16: return DType::kFloat16;
    case v1::DTYPE_INT64: return DType::kInt64;
    case v1::DTYPE_INT32: return DType::kInt32;
    case v1::DTYPE_UINT8: return DType::kUInt8;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tensor: dtype ", static_cast<int>(d), " is unspecified or unknown"));
  }
}

v1::DType ToWire(DType d) {
  switch (d) {
    case DType::kFloat32: return v1::DTYPE_FLOAT32;
    case DType::kFloat16: return v1::DTYPE_FLOAT16;
    case DType::kInt64: return v1::DTYPE_INT64;
    case DType::kInt32: return v1::DTYPE_INT32;
    case DType::kUInt8: return v1::DTYPE_UINT8;
  }
  return v1::DTYPE_UNSPECIFIED;
}

}  // namespace

size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kInt64: return 8;
    case DType::kInt32: return 4;
    case DType::kUInt8: return 1;
  }
  return 0;
}

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kUInt8: return "uint8";
  }
  return "?";
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

int64_t HostTensor::num_elements() const {
  // A zero dimension empties the tensor whatever the others are, and their
  // product need not fit: [2573804955471204592, 7, 0] is a valid empty shape
  // (the fuzzer found the overflow multiplying it out in order).
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

absl::StatusOr<DType> ValidateWireTensor(const v1::Tensor& t) {
  auto dtype = FromWire(t.dtype());
  if (!dtype.ok()) return dtype.status();
  if (t.shape_size() > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor: rank ", t.shape_size(), " exceeds the maximum ", kMaxRank));
  }
  const uint64_t esize = DTypeSize(*dtype);
  uint64_t elements = 1;
  for (int i = 0; i < t.shape_size(); ++i) {
    int64_t d = t.shape(i);
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor: shape[", i, "] = ", d, " is negative"));
    }
    if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / esize / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor: shape ", ShapeString(absl::Span<const int64_t>(t.shape().data(), t.shape_size())), " overflows"));
    }
    elements *= static_cast<uint64_t>(d);
  }
  const uint64_t want = elements * esize;
  if (t.data().size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor: ", t.data().size(), " data bytes, but ", DTypeName(*dtype), " shape ",
        ShapeString(absl::Span<const int64_t>(t.shape().data(), t.shape_size())), " needs ", want));
  }
  return *dtype;
}

absl::Status CheckWireTensor(const v1::Tensor& t, DType want_dtype,
                             absl::Span<const int64_t> want_shape) {
  auto dtype = ValidateWireTensor(t);
  if (!dtype.ok()) return dtype.status();
  if (*dtype != want_dtype) {
    return absl::InvalidArgumentError(absl::StrCat("tensor: dtype ", DTypeName(*dtype),
                                                   ", expected ", DTypeName(want_dtype)));
  }
  absl::Span<const int64_t> got(t.shape().data(), t.shape_size());
  if (got != want_shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor: shape ", ShapeString(got),
                                                   ", expected ", ShapeString(want_shape)));
  }
  return absl::OkStatus();
}

absl::StatusOr<HostTensor> DecodeTensor(const v1::Tensor& t) {
  auto dtype = ValidateWireTensor(t);
  if (!dtype.ok()) return dtype.status();
  HostTensor h;
  h.dtype = *dtype;
  h.shape.assign(t.shape().begin(), t.shape().end());
  h.data = t.data();
  return h;
}

void EncodeTensor(const HostTensor& t, v1::Tensor* out) {
  out->set_dtype(ToWire(t.dtype));
  out->mutable_shape()->Assign(t.shape.begin(), t.shape.end());
  out->set_data(t.data);
}

void EncodeTensor(HostTensor&& t, v1::Tensor* out) {
  out->set_dtype(ToWire(t.dtype));
  out->mutable_shape()->Assign(t.shape.begin(), t.shape.end());
  out->mutable_data()->swap(t.data);
}

HostTensor MakeFloatTensor(std::vector<int64_t> shape, absl::Span<const float> values) {
  HostTensor h;
  h.dtype = DType::kFloat32;
  h.shape = std::move(shape);
  h.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(h.data.data(), values.data(), h.data.size());
  return h;
}

absl::StatusOr<std::vector<float>> TensorToFloats(const HostTensor& t) {
  if (t.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor: dtype ", DTypeName(t.dtype), ", expected float32"));
  }
  if (t.data.size() != static_cast<size_t>(t.num_elements()) * sizeof(float)) {
    return absl::InvalidArgumentError("tensor: byte count does not match shape");
  }
  std::vector<float> v(t.num_elements());
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

}  // namespace superserve
