#include "worker/emulated_executor.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "common/clock.h"
#include "common/tensor_codec.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {
namespace {

ModelEntry Entry() {
  ModelEntry e;
  e.name = "m";
  e.profile.model = "m";
  e.profile.batch_sizes = {1, 4};
  e.profile.num_classes = 5;
  SubnetProfile s;
  s.id = 7;
  s.accuracy = 50;
  s.latency = {Millis(2), Millis(6)};
  e.profile.subnets.push_back(s);
  return e;
}

TEST(EmulatedExecutorTest, SleepsTheProfiledLatencyOfTheCoveringBatch) {
  EmulatedExecutor ex;
  ASSERT_TRUE(ex.Load(Entry()).ok());
  EXPECT_EQ(ex.EmulatedLatency("m", 7, 1).value(), Millis(2));
  EXPECT_EQ(ex.EmulatedLatency("m", 7, 3).value(), Millis(6));  // padded to batch 4
  EXPECT_FALSE(ex.EmulatedLatency("m", 7, 5).ok());             // beyond the largest batch
  EXPECT_FALSE(ex.EmulatedLatency("m", 8, 1).ok());             // unknown subnet
  EXPECT_FALSE(ex.EmulatedLatency("x", 7, 1).ok());             // unknown model

  v1::Tensor a, b;
  EncodeTensor(MakeFloatTensor({2}, std::vector<float>{1, 2}), &a);
  EncodeTensor(MakeFloatTensor({2}, std::vector<float>{3, 4}), &b);
  std::vector<const v1::Tensor*> in = {&a, &b, &a};
  ControlTuple c;
  c.subnet_id = 7;
  Nanos t0 = RealClock::Get()->Now();
  auto out = ex.Run("m", c, in);
  Nanos took = RealClock::Get()->Now() - t0;
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GE(took, Millis(6));
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[0].shape, std::vector<int64_t>{5});
  EXPECT_EQ((*out)[0].data, (*out)[2].data) << "same input, same fake logits";
}

TEST(EmulatedExecutorTest, FakeLogitsSpreadOverTheClasses) {
  // The fake prediction is a hash of the input bytes: 28x28 inputs that
  // differ in a single pixel land on many of the classes, each output is
  // one-hot, and the same input gives the same class.
  EmulatedExecutor ex;
  ModelEntry e = Entry();
  e.profile.num_classes = 10;
  e.profile.subnets[0].latency = {Micros(10), Micros(10)};
  ASSERT_TRUE(ex.Load(e).ok());
  ControlTuple c;
  c.subnet_id = 7;
  std::set<int> classes;
  for (int i = 0; i < 40; ++i) {
    std::vector<float> pixels(28 * 28, 0.25f);
    pixels[(i * 37) % pixels.size()] = 1.0f + i;
    v1::Tensor t;
    EncodeTensor(MakeFloatTensor({1, 28, 28}, pixels), &t);
    std::vector<const v1::Tensor*> in = {&t, &t};
    auto out = ex.Run("m", c, in);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ((*out)[0].data, (*out)[1].data);
    const auto* logits = reinterpret_cast<const float*>((*out)[0].data.data());
    int hot = -1;
    float sum = 0;
    for (int k = 0; k < 10; ++k) {
      sum += logits[k];
      if (logits[k] == 1.f) hot = k;
    }
    EXPECT_EQ(sum, 1.f);
    ASSERT_GE(hot, 0);
    classes.insert(hot);
  }
  EXPECT_GE(classes.size(), 6u) << "40 distinct inputs hit only " << classes.size() << " classes";
}

}  // namespace
}  // namespace superserve
