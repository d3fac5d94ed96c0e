#include "worker/batch_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/tensor_codec.h"
#include "tests/worker/worker_test_util.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {
namespace {

using ::testing::HasSubstr;

v1::Batch TwoQueryBatch(uint64_t id) {
  v1::Batch b;
  b.set_batch_id(id);
  b.set_model("m");
  for (uint64_t q = 1; q <= 2; ++q) {
    v1::BatchQuery* query = b.add_queries();
    query->set_query_id(id * 10 + q);
    EncodeTensor(MakeFloatTensor({2}, std::vector<float>{1, 2}), query->mutable_input());
  }
  return b;
}

// Throws what the test tells it to on the next Run, then behaves: one
// 3-class output per input.
class ThrowingExecutor final : public Executor {
 public:
  enum class Throw { kNothing, kRuntimeError, kInt };
  Throw next = Throw::kNothing;
  int runs = 0;

  std::string_view kind() const override { return "throwing"; }
  absl::Status Load(const ModelEntry&) override { return absl::OkStatus(); }
  absl::Status Unload(const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<HostTensor>> Run(const std::string&, const ControlTuple&,
                                              absl::Span<const v1::Tensor* const> inputs) override {
    ++runs;
    const Throw t = next;
    next = Throw::kNothing;
    if (t == Throw::kRuntimeError) throw std::runtime_error("cuda out of memory (simulated)");
    if (t == Throw::kInt) throw 42;
    return std::vector<HostTensor>(inputs.size(),
                                   MakeFloatTensor({3}, std::vector<float>{0, 1, 0}));
  }
};

void ExpectServed(const v1::Batch& batch, const v1::BatchResult& r) {
  EXPECT_EQ(r.batch_id(), batch.batch_id());
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.error(), "");
  ASSERT_EQ(r.results_size(), batch.queries_size());
  for (int i = 0; i < r.results_size(); ++i) {
    EXPECT_EQ(r.results(i).query_id(), batch.queries(i).query_id());
  }
}

TEST(RunBatchTest, RunsTheBatchOnTheExecutor) {
  ThrowingExecutor ex;
  const std::vector<ModelEntry> models = {testing::SmallModelEntry()};
  const v1::Batch batch = TwoQueryBatch(1);
  v1::BatchResult r;
  RunBatch(batch, RealClock::Get()->Now(), models, &ex, &r);
  EXPECT_EQ(ex.runs, 1);
  ExpectServed(batch, r);
}

TEST(RunBatchTest, UnknownModelIsAnErrorResult) {
  ThrowingExecutor ex;
  const std::vector<ModelEntry> models = {testing::SmallModelEntry()};
  v1::Batch batch = TwoQueryBatch(1);
  batch.set_model("x");
  v1::BatchResult r;
  RunBatch(batch, RealClock::Get()->Now(), models, &ex, &r);
  EXPECT_EQ(ex.runs, 0);
  EXPECT_EQ(r.error_code(), static_cast<int32_t>(absl::StatusCode::kNotFound));
  EXPECT_EQ(r.results_size(), 0);
}

// A std::exception from the executor (e.g. std::bad_alloc, a library's
// runtime_error) becomes an INTERNAL error result naming what(), and the
// next batch is served as usual.
TEST(RunBatchTest, StdExceptionFromTheExecutorBecomesAnInternalErrorResult) {
  ThrowingExecutor ex;
  const std::vector<ModelEntry> models = {testing::SmallModelEntry()};
  ex.next = ThrowingExecutor::Throw::kRuntimeError;
  const v1::Batch batch = TwoQueryBatch(1);
  v1::BatchResult r;
  RunBatch(batch, RealClock::Get()->Now(), models, &ex, &r);
  EXPECT_EQ(r.batch_id(), 1u);
  EXPECT_EQ(r.error_code(), static_cast<int32_t>(absl::StatusCode::kInternal));
  EXPECT_THAT(r.error(), HasSubstr("cuda out of memory (simulated)"));
  EXPECT_EQ(r.results_size(), 0);

  const v1::Batch next = TwoQueryBatch(2);
  v1::BatchResult r2;
  RunBatch(next, RealClock::Get()->Now(), models, &ex, &r2);
  EXPECT_EQ(ex.runs, 2);
  ExpectServed(next, r2);
}

// Anything else thrown (here an int) is caught too: "unknown exception".
TEST(RunBatchTest, NonStdExceptionFromTheExecutorBecomesAnInternalErrorResult) {
  ThrowingExecutor ex;
  const std::vector<ModelEntry> models = {testing::SmallModelEntry()};
  ex.next = ThrowingExecutor::Throw::kInt;
  const v1::Batch batch = TwoQueryBatch(1);
  v1::BatchResult r;
  RunBatch(batch, RealClock::Get()->Now(), models, &ex, &r);
  EXPECT_EQ(r.batch_id(), 1u);
  EXPECT_EQ(r.error_code(), static_cast<int32_t>(absl::StatusCode::kInternal));
  EXPECT_THAT(r.error(), HasSubstr("unknown exception"));
  EXPECT_EQ(r.results_size(), 0);

  const v1::Batch next = TwoQueryBatch(2);
  v1::BatchResult r2;
  RunBatch(next, RealClock::Get()->Now(), models, &ex, &r2);
  ExpectServed(next, r2);
}

}  // namespace
}  // namespace superserve
