#include "nas_profiler/pareto.h"

#include "gtest/gtest.h"

namespace superserve::nas {
namespace {

std::vector<int64_t> Keys(const std::vector<CandidatePoint>& v) {
  std::vector<int64_t> k;
  for (const auto& p : v) k.push_back(p.key);
  return k;
}

TEST(ParetoTest, HandMadeSet) {
  // key: (accuracy, latency)
  std::vector<CandidatePoint> pts = {
      {0, 80.0, 10},  // frontier
      {1, 79.0, 12},  // dominated by 0
      {2, 85.0, 20},  // frontier
      {3, 85.0, 25},  // dominated by 2 (same accuracy, slower)
      {4, 90.0, 30},  // frontier
      {5, 70.0, 5},   // frontier (fastest)
      {6, 89.9, 31},  // dominated by 4
      {7, 90.0, 30},  // exact duplicate of 4: keep lower key
      {8, 83.0, 20},  // dominated by 2 (same latency, lower accuracy)
  };
  auto f = ParetoFrontier(pts);
  EXPECT_EQ(Keys(f), (std::vector<int64_t>{5, 0, 2, 4}));
  for (size_t i = 1; i < f.size(); ++i) {
    EXPECT_GT(f[i].accuracy, f[i - 1].accuracy);
    EXPECT_GT(f[i].latency_us, f[i - 1].latency_us);
  }
}

TEST(ParetoTest, EmptyAndSingle) {
  EXPECT_TRUE(ParetoFrontier({}).empty());
  EXPECT_EQ(ParetoFrontier({{3, 50, 1}}).size(), 1u);
}

TEST(ParetoTest, ThinKeepsEndsAndCount) {
  std::vector<CandidatePoint> f;
  for (int i = 0; i < 100; ++i) f.push_back({i, 50.0 + i * 0.1, 10.0 + i * i * 0.01});
  auto t = ThinFrontier(f, 10);
  ASSERT_EQ(t.size(), 10u);
  EXPECT_EQ(t.front().key, 0);
  EXPECT_EQ(t.back().key, 99);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GT(t[i].key, t[i - 1].key);
  EXPECT_EQ(ThinFrontier(f, 200).size(), 100u);
}

}  // namespace
}  // namespace superserve::nas
