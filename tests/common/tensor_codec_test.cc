#include "common/tensor_codec.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {
namespace {

TEST(TensorCodecTest, FloatRoundTripThroughTheWire) {
  std::vector<float> values(2 * 3 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 1.f;
  HostTensor t = MakeFloatTensor({2, 3, 4}, values);
  v1::Tensor wire;
  EncodeTensor(t, &wire);
  std::string bytes;
  ASSERT_TRUE(wire.SerializeToString(&bytes));
  v1::Tensor parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  auto back = DecodeTensor(parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype, DType::kFloat32);
  EXPECT_EQ(back->shape, (std::vector<int64_t>{2, 3, 4}));
  auto floats = TensorToFloats(*back);
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ(*floats, values);
  // Little-endian on the wire: the first float's first byte is its LSB.
  uint32_t bits;
  std::memcpy(&bits, &values[0], 4);
  EXPECT_EQ(static_cast<uint8_t>(parsed.data()[0]), bits & 0xff);
}

// A worker's outputs move into the wire message: the same buffer, no copy.
TEST(TensorCodecTest, EncodingAnRvalueMovesTheBytes) {
  HostTensor t = MakeFloatTensor({256}, std::vector<float>(256, 1.5f));
  const HostTensor copy = t;
  const char* bytes = t.data.data();
  v1::Tensor wire;
  EncodeTensor(std::move(t), &wire);
  EXPECT_EQ(wire.data().data(), bytes);
  v1::Tensor by_copy;
  EncodeTensor(copy, &by_copy);
  EXPECT_EQ(wire.SerializeAsString(), by_copy.SerializeAsString());
}

TEST(TensorCodecTest, RoundTripOtherDtypes) {
  HostTensor t;
  t.dtype = DType::kInt64;
  t.shape = {3};
  int64_t v[3] = {-1, 0, int64_t{1} << 40};
  t.data.assign(reinterpret_cast<const char*>(v), sizeof(v));
  v1::Tensor wire;
  EncodeTensor(t, &wire);
  auto back = DecodeTensor(wire);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->as<int64_t>()[2], int64_t{1} << 40);
  EXPECT_FALSE(TensorToFloats(*back).ok());
}

TEST(TensorCodecTest, RejectsMismatchedByteCount) {
  HostTensor t = MakeFloatTensor({1, 28, 28}, std::vector<float>(784, 1.f));
  v1::Tensor wire;
  EncodeTensor(t, &wire);
  wire.mutable_data()->pop_back();  // one byte short
  auto r = DecodeTensor(wire);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  std::string msg(r.status().message());
  EXPECT_NE(msg.find("3135 data bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs 3136"), std::string::npos) << msg;
  wire.mutable_data()->append("xy");  // one byte too many
  EXPECT_FALSE(DecodeTensor(wire).ok());
}

TEST(TensorCodecTest, RejectsBadDtypeShapeAndOverflow) {
  v1::Tensor t;
  t.add_shape(1);
  EXPECT_NE(DecodeTensor(t).status().message().find("dtype"), std::string::npos);
  t.set_dtype(v1::DTYPE_FLOAT32);
  t.set_shape(0, -2);
  EXPECT_NE(DecodeTensor(t).status().message().find("shape[0] = -2"), std::string::npos);
  t.clear_shape();
  for (int i = 0; i < 4; ++i) t.add_shape(int64_t{1} << 20);
  EXPECT_NE(DecodeTensor(t).status().message().find("overflows"), std::string::npos);
  t.clear_shape();
  for (int i = 0; i < kMaxRank + 1; ++i) t.add_shape(1);
  EXPECT_NE(DecodeTensor(t).status().message().find("rank"), std::string::npos);
}

TEST(TensorCodecTest, CheckWireTensorEnforcesModelInputSpec) {
  HostTensor t = MakeFloatTensor({1, 28, 28}, std::vector<float>(784, 0.f));
  v1::Tensor wire;
  EncodeTensor(t, &wire);
  std::vector<int64_t> want = {1, 28, 28};
  EXPECT_TRUE(CheckWireTensor(wire, DType::kFloat32, want).ok());
  std::vector<int64_t> other = {3, 28, 28};
  auto st = CheckWireTensor(wire, DType::kFloat32, other);
  EXPECT_NE(st.message().find("expected [3,28,28]"), std::string::npos) << st;
  st = CheckWireTensor(wire, DType::kUInt8, want);
  EXPECT_NE(st.message().find("expected uint8"), std::string::npos) << st;
}

// The fuzzer's find: the non-zero dimensions' product overflows int64 in
// order, but a zero dimension makes the tensor empty (and valid).
TEST(TensorCodecTest, AnEmptyShapeWithHugeDimensionsHasNoElements) {
  v1::Tensor t;
  t.set_dtype(v1::DTYPE_UINT8);
  t.add_shape(2573804955471204592);
  t.add_shape(7);
  t.add_shape(0);
  auto r = DecodeTensor(t);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_elements(), 0);
  HostTensor bad;
  bad.shape = {int64_t{1} << 62, 4};
  EXPECT_EQ(bad.num_elements(), -1);
}

TEST(TensorCodecTest, EmptyTensorIsValid) {
  v1::Tensor t;
  t.set_dtype(v1::DTYPE_UINT8);
  t.add_shape(0);
  auto r = DecodeTensor(t);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->num_elements(), 0);
}

}  // namespace
}  // namespace superserve
