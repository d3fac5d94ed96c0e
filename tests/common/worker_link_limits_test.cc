// Whether a model's batches fit in one router-worker message.
#include "common/worker_link_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

namespace superserve {
namespace {

using ::testing::HasSubstr;

ModelProfile Profile(std::vector<int64_t> input_shape, int32_t classes,
                     std::vector<int32_t> batch_sizes) {
  ModelProfile p;
  p.model = "big";
  p.input_shape = std::move(input_shape);
  p.num_classes = classes;
  p.batch_sizes = std::move(batch_sizes);
  return p;
}

TEST(WorkerLinkLimits, AQueryCountsTheLargerOfItsInputAndItsOutput) {
  EXPECT_EQ(WorkerLinkQueryBytes(Profile({1, 28, 28}, 10, {1})),
            28 * 28 * 4 + kWorkerLinkQueryOverheadBytes);
  EXPECT_EQ(WorkerLinkQueryBytes(Profile({2}, 1000, {1})), 4000 + kWorkerLinkQueryOverheadBytes);
}

TEST(WorkerLinkLimits, HugeShapesSaturateInsteadOfOverflowing) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(WorkerLinkQueryBytes(Profile({big, big, big}, 10, {1})),
            std::numeric_limits<int64_t>::max());
  absl::Status s = CheckBatchesFitWorkerLink(Profile({big, big}, 10, {1, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("not even one query fits"));
}

TEST(WorkerLinkLimits, ABatchOverTheLimitIsRefusedNamingTheLargestThatFits) {
  // 4 MiB inputs: 32 of them (128 MiB) fit in 256 MiB, 64 (256 MiB + overhead) do not.
  EXPECT_TRUE(CheckBatchesFitWorkerLink(Profile({1, 1024, 1024}, 10, {1, 8, 32})).ok());
  absl::Status s = CheckBatchesFitWorkerLink(Profile({1, 1024, 1024}, 10, {1, 8, 32, 64, 128}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("model \"big\""));
  EXPECT_THAT(s.message(), HasSubstr("a batch of 128 queries"));
  EXPECT_THAT(s.message(), HasSubstr("the largest batch size that fits is 32"));
}

TEST(WorkerLinkLimits, TheBundledModelsShapesFitEasily) {
  // Fashion-MNIST at the largest batch a profile may declare: 228 MiB.
  EXPECT_TRUE(CheckBatchesFitWorkerLink(Profile({1, 28, 28}, 10, {1, kMaxBatchSize})).ok());
}

}  // namespace
}  // namespace superserve
