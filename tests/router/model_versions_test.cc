// ModelVersions: which internal name a (model, version) resolves to, the
// switch to a newer version, and what may be removed.
#include "router/model_versions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace superserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ModelVersionsTest, NewerVersionBecomesCurrentAndOlderStaysPinnable) {
  ModelVersions v;
  EXPECT_EQ(*v.Resolve("m", 0), "m");  // nothing recorded: the name itself
  v.Add("m", 1, "m");
  EXPECT_EQ(v.Current("m"), 1u);
  v.Add("m", 3, ModelVersions::InternalName("m", 3, false));
  EXPECT_EQ(v.Current("m"), 3u);
  EXPECT_EQ(*v.Resolve("m", 0), "m@3");
  EXPECT_EQ(*v.Resolve("m", 1), "m");
  // An older version added later does not take over.
  v.Add("m", 2, "m@2");
  EXPECT_EQ(*v.Resolve("m", 0), "m@3");
  auto missing = v.Resolve("m", 7);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("has no version 7 (served: 1, 2, 3)"));
  EXPECT_EQ(v.Resolve("other", 2).status().code(), absl::StatusCode::kInvalidArgument);
  auto owner = v.OwnerOf("m@3");
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->name, "m");
  EXPECT_EQ(owner->version, 3u);
  EXPECT_TRUE(owner->current);
  EXPECT_FALSE(v.OwnerOf("m")->current);
}

TEST(ModelVersionsTest, TheCurrentVersionGoesOnlyLastOrWithTheModel) {
  ModelVersions v;
  v.Add("m", 1, "m");
  v.Add("m", 2, "m@2");
  EXPECT_EQ(v.Remove("m", 2).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v.Remove("m", 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(*v.Remove("m", 1), ElementsAre("m"));
  EXPECT_EQ(*v.Resolve("m", 0), "m@2");
  EXPECT_FALSE(v.OwnerOf("m").has_value());
  EXPECT_THAT(*v.Remove("m", 2), ElementsAre("m@2"));  // the last one
  EXPECT_EQ(v.Current("m"), 0u);
  v.Add("n", 1, "n");
  v.Add("n", 2, "n@2");
  EXPECT_THAT(*v.Remove("n", 0), ElementsAre("n", "n@2"));
  EXPECT_EQ(v.Remove("n", 0).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace superserve
