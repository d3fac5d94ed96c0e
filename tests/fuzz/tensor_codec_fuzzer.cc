// libFuzzer target: the wire tensor codec (common/tensor_codec.*) on
// arbitrary serialized superserve.v1.Tensor messages, i.e. what a hostile
// client can put in an Infer request.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/tensor_codec.h"
#include "superserve/v1/tensor.pb.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  superserve::v1::Tensor wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return 0;

  auto dtype = superserve::ValidateWireTensor(wire);
  auto decoded = superserve::DecodeTensor(wire);
  // Validation and decoding agree on what they accept.
  FUZZ_CHECK(dtype.ok() == decoded.ok());
  if (!decoded.ok()) {
    FUZZ_CHECK(!decoded.status().message().empty());
    return 0;
  }
  const superserve::HostTensor& h = *decoded;
  FUZZ_CHECK(h.dtype == *dtype);
  FUZZ_CHECK(static_cast<int>(h.shape.size()) <= superserve::kMaxRank);
  for (int64_t d : h.shape) FUZZ_CHECK(d >= 0);
  // An accepted tensor's bytes are exactly its elements.
  FUZZ_CHECK(h.num_elements() >= 0);
  FUZZ_CHECK(h.data.size() ==
             static_cast<uint64_t>(h.num_elements()) * superserve::DTypeSize(h.dtype));
  FUZZ_CHECK(superserve::CheckWireTensor(wire, h.dtype, h.shape).ok());
  (void)superserve::ShapeString(h.shape);

  auto floats = superserve::TensorToFloats(h);
  FUZZ_CHECK(floats.ok() == (h.dtype == superserve::DType::kFloat32));
  if (floats.ok()) {
    FUZZ_CHECK(floats->size() == static_cast<size_t>(h.num_elements()));
    if (!floats->empty()) {
      FUZZ_CHECK(std::memcmp(floats->data(), h.data.data(), h.data.size()) == 0);
    }
  }

  // Encoding the decoded tensor gives back the same tensor.
  superserve::v1::Tensor again;
  superserve::EncodeTensor(h, &again);
  auto redecoded = superserve::DecodeTensor(again);
  FUZZ_CHECK(redecoded.ok());
  FUZZ_CHECK(redecoded->dtype == h.dtype && redecoded->shape == h.shape &&
             redecoded->data == h.data);
  return 0;
}
