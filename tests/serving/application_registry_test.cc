#include "serving/application_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace superserve {
namespace {

TEST(ApplicationRegistry, IdsFollowFirstUseAndRepeatsKeepTheirs) {
  ApplicationRegistry r;
  EXPECT_EQ(r.Intern("cam").id, 0);
  EXPECT_TRUE(r.Intern("mic").added);
  // A repeat of the last tag, of an earlier one, and the empty tag (no tag
  // is a tag of its own: it has histograms too).
  const ApplicationRegistry::Interned again = r.Intern("mic");
  EXPECT_EQ(again.id, 1);
  EXPECT_FALSE(again.added);
  EXPECT_EQ(r.Intern("cam").id, 0);
  EXPECT_EQ(r.Intern("").id, 2);
  EXPECT_EQ(r.size(), 3u);
  std::vector<std::pair<int32_t, std::string>> seen;
  r.ForEach([&](int32_t id, const std::string& tag) { seen.emplace_back(id, tag); });
  EXPECT_EQ(seen, (std::vector<std::pair<int32_t, std::string>>{{0, "cam"}, {1, "mic"}, {2, ""}}));
}

TEST(ApplicationRegistry, NamesOfUnknownIdsAreNullAndEmpty) {
  ApplicationRegistry r;
  r.Intern("cam");
  ASSERT_NE(r.Name(0), nullptr);
  EXPECT_EQ(*r.Name(0), "cam");
  EXPECT_EQ(r.NameView(0), "cam");
  EXPECT_EQ(r.Name(-1), nullptr);  // a query without a tag id
  EXPECT_EQ(r.Name(1), nullptr);
  EXPECT_EQ(r.NameView(7), "");
}

TEST(ApplicationRegistry, CapsNameTheBoundAndSpareKnownTags) {
  ApplicationRegistry r(ApplicationRegistry::Options{/*max_tags=*/2, /*max_bytes=*/4});
  EXPECT_TRUE(r.Check("abcd").ok());  // exactly the byte limit
  const absl::Status long_tag = r.Check("abcde");
  EXPECT_EQ(long_tag.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(long_tag.message(), "application tag of 5 bytes exceeds the limit of 4 bytes");
  r.Intern("a");
  r.Intern("b");
  const absl::Status third = r.Check("c");
  EXPECT_EQ(third.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(third.message().find("maximum of 2 tags"), std::string::npos) << third;
  EXPECT_TRUE(r.Check("a").ok()) << "a known tag is never refused for the count";
}

TEST(ApplicationRegistry, ZeroMeansNoCap) {
  ApplicationRegistry r(ApplicationRegistry::Options{0, 0});
  for (int i = 0; i < 3000; ++i) {
    const std::string tag(static_cast<size_t>(i % 600), 'x');
    ASSERT_TRUE(r.Check(tag + std::to_string(i)).ok());
    r.Intern(tag + std::to_string(i));
  }
  EXPECT_EQ(r.size(), 3000u);
}

}  // namespace
}  // namespace superserve
