// The paper baselines registered by bench/baselines: selectable by name with
// --policy and MakePolicy once RegisterBaselinePolicies ran, every one of
// them listed in --policy's help, clipper+ an alias of fixed-subnet.
#include "bench/baselines/baselines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "policies/policy_factory.h"
#include "policies/policy_flags.h"
#include "tests/policies/policy_test_util.h"

ABSL_DECLARE_FLAG(std::string, policy);

namespace superserve {
namespace {

using testing::ThreeSubnetProfile;

class BaselinesTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterBaselinePolicies(); }
};

TEST_F(BaselinesTest, EveryBaselineIsMadeByNameAfterTheProduct) {
  RegisterBaselinePolicies();  // twice: idempotent
  const std::vector<std::string> names = PolicyNames();
  const std::vector<std::string> product = {"ratefit", "slo-first", "symphony", "fixed-subnet"};
  ASSERT_GE(names.size(), product.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 4), product)
      << "the product first";
  for (const char* name : {"slackfit", "maxbatch", "maxacc", "infaas", "clipper+"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), name), 1) << name;
    auto p = MakePolicy(name, ThreeSubnetProfile(), PolicyConfig());
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
  }
  for (const char* removed : {"slackfit-ma", "slackfit-rg", "shadowfit", "clipper_shadow"}) {
    EXPECT_FALSE(MakePolicy(removed, ThreeSubnetProfile(), PolicyConfig()).ok()) << removed;
  }
  PolicyConfig c;
  c.baselines.slackfit_buckets = 0;
  auto bad = MakePolicy("slackfit", ThreeSubnetProfile(), c);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("--buckets must be >= 1"));
}

TEST_F(BaselinesTest, ClipperPlusIsFixedSubnetUnderThePapersName) {
  PolicyConfig c;
  for (int32_t id : {-1, 100, 101}) {
    c.fixed_subnet_id = id;
    auto clipper = MakePolicy("clipper+", ThreeSubnetProfile(), c);
    auto fixed = MakePolicy("fixed-subnet", ThreeSubnetProfile(), c);
    ASSERT_TRUE(clipper.ok() && fixed.ok());
    std::string want((*fixed)->name());
    want.replace(0, std::string("fixed-subnet").size(), "clipper+");
    EXPECT_EQ((*clipper)->name(), want) << id;
    for (int32_t s = 0; s < 3; ++s) EXPECT_EQ((*clipper)->MayRun(s), (*fixed)->MayRun(s));
  }
  EXPECT_EQ((*MakePolicy("clipper+", ThreeSubnetProfile(), PolicyConfig()))->name(),
            "clipper+(80)");
  c.fixed_subnet_id = 7;
  auto bad = MakePolicy("clipper+", ThreeSubnetProfile(), c);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("--fixed_subnet"));
  auto infaas = MakePolicy("infaas", ThreeSubnetProfile(), PolicyConfig());
  ASSERT_TRUE(infaas.ok());
  EXPECT_TRUE((*infaas)->MayRun(0)) << "the least accurate subnet";
  EXPECT_FALSE((*infaas)->MayRun(2));
}

// --policy takes every registered name, and its help lists every selectable
// name (the product, then the baselines).
TEST_F(BaselinesTest, PolicyFlagTakesAndListsEveryName) {
  std::vector<std::string> names = PolicyNames();
  for (const std::string& n : DynamicPolicyNames()) names.push_back(n);
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag("policy");
  ASSERT_NE(flag, nullptr);
  const std::string help = flag->Help();
  for (const std::string& name : names) {
    EXPECT_THAT(help, ::testing::HasSubstr(name)) << "--policy's help lacks " << name;
    absl::FlagSaver saver;
    absl::SetFlag(&FLAGS_policy, name);
    absl::StatusOr<PolicySpec> spec = PolicySpecFromFlags();
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.status();
    EXPECT_EQ(spec->name, name);
  }
  EXPECT_LT(help.find("fixed-subnet"), help.find("slackfit")) << "the product first";
}

}  // namespace
}  // namespace superserve
