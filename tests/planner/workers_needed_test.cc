#include "planner/workers_needed.h"

#include <string>

#include "gtest/gtest.h"

namespace superserve {
namespace {

std::string TestData(const std::string& name) {
  return std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/tests/planner/testdata/" + name;
}

TEST(WorkersNeededTest, FollowsThePlan) {
  auto profile = ModelProfile::LoadFile(TestData("harpagon_m3_profile.json"));
  ASSERT_TRUE(profile.ok()) << profile.status();
  // Table II: 198 req/s within 1 s on five b = 32 machines.
  EXPECT_EQ(*WorkersNeeded(*profile, 198, Seconds(1)), 5);
  EXPECT_EQ(*WorkersNeeded(*profile, 0, Seconds(1)), 0);
  // Any positive rate needs a worker (1e-9 req/s once counted as rounding).
  EXPECT_EQ(*WorkersNeeded(*profile, 1e-9, Seconds(1)), 1);
  // More load never needs fewer workers by more than rounding: compare far apart rates.
  EXPECT_LT(*WorkersNeeded(*profile, 50, Seconds(1)), *WorkersNeeded(*profile, 400, Seconds(1)));
  // A per-batch overhead makes batches slower: never fewer workers.
  EXPECT_GE(*WorkersNeeded(*profile, 198, Seconds(1), -1, Millis(50)), 5);
}

TEST(WorkersNeededTest, ErrorsAreStatuses) {
  auto profile = ModelProfile::LoadFile(TestData("harpagon_m3_profile.json"));
  ASSERT_TRUE(profile.ok());
  EXPECT_EQ(WorkersNeeded(*profile, -5, Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkersNeeded(*profile, 100, Millis(50)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(WorkersNeeded(*profile, 100, Seconds(1), 42).status().code(),
            absl::StatusCode::kNotFound);
  ModelProfile empty;
  EXPECT_FALSE(WorkersNeeded(empty, 100, Seconds(1)).ok());
}

}  // namespace
}  // namespace superserve
