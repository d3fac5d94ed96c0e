#include "serving/model_registry.h"

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

// Sets *destroyed when freed, so a test can see the registry let go.
class TrackedPolicy final : public Policy {
 public:
  explicit TrackedPolicy(bool* destroyed) : destroyed_(destroyed) {}
  ~TrackedPolicy() override { *destroyed_ = true; }
  std::string_view name() const override { return "tracked"; }
  Decision Decide(const SchedulingContext&) override { return Decision::Idle(); }

 private:
  bool* const destroyed_;
};

TEST(ModelRegistryTest, AddFindRemoveFreesAndVersionsCount) {
  // Declared before the registry, which outlives them otherwise: its
  // destructor frees the last policy, which writes to freed2.
  bool freed = false, unused = false, freed2 = false;
  ModelRegistry r;
  auto m = r.Add(testing::ThreeSubnetProfile(), std::make_unique<TrackedPolicy>(&freed));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelId id = (*m)->id;
  EXPECT_EQ((*m)->version, 1);
  EXPECT_EQ(r.Find("hand"), *m);
  EXPECT_EQ(r.Find(id), *m);
  EXPECT_EQ(r.Add(testing::ThreeSubnetProfile(), std::make_unique<TrackedPolicy>(&unused))
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  auto removed = r.Remove("hand");
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(r.Find("hand"), nullptr);
  EXPECT_EQ(r.Find(id), nullptr);
  EXPECT_FALSE(freed) << "the caller holds it until it has answered its queries";
  removed.reset();
  EXPECT_TRUE(freed);
  EXPECT_EQ(r.Remove("hand"), nullptr);
  auto again = r.Add(testing::ThreeSubnetProfile(), std::make_unique<TrackedPolicy>(&freed2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->version, 2);
  EXPECT_NE((*again)->id, id) << "ids are never reused";
  EXPECT_EQ(r.All().size(), 1u);
}

}  // namespace
}  // namespace superserve
