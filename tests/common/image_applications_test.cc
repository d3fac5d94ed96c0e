#include "common/image_applications.h"

#include <gtest/gtest.h>

#include <vector>

namespace superserve {
namespace {

TEST(ImageApplications, ClassSubsetsPickTheirLabelsAndNoiseIsRepeatable) {
  const auto& apps = FashionMnistApplications();
  const ImageApplication* easy = FindImageApplication(apps, "easy");
  const ImageApplication* hard = FindImageApplication(apps, "hard");
  const ImageApplication* noisy = FindImageApplication(apps, "noisy");
  ASSERT_NE(easy, nullptr);
  ASSERT_NE(hard, nullptr);
  ASSERT_NE(noisy, nullptr);
  EXPECT_EQ(FindImageApplication(apps, "nope"), nullptr);
  std::vector<uint8_t> labels = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 6};
  EXPECT_EQ(ApplicationImages(*easy, labels), (std::vector<int64_t>{1, 5, 7, 8, 9}));
  EXPECT_EQ(ApplicationImages(*hard, labels), (std::vector<int64_t>{0, 2, 4, 6, 10}));
  EXPECT_EQ(ApplicationImages(*noisy, labels).size(), labels.size());

  std::vector<uint8_t> px = {0, 51, 255, 128};
  std::vector<float> clean(4), a(4), b(4), other(4);
  ApplicationInput(*easy, 3, px, clean.data());
  EXPECT_FLOAT_EQ(clean[1], 51 / 255.f);
  EXPECT_FLOAT_EQ(clean[2], 1.f);
  ApplicationInput(*noisy, 3, px, a.data());
  ApplicationInput(*noisy, 3, px, b.data());
  ApplicationInput(*noisy, 4, px, other.data());
  EXPECT_EQ(a, b);       // same image, same noise
  EXPECT_NE(a, other);   // another image, other noise
  EXPECT_NE(a, clean);
  for (float v : a) {
    EXPECT_GE(v, 0.f);
    EXPECT_LE(v, 1.f);
  }
}

}  // namespace
}  // namespace superserve
