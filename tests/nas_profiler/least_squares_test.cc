#include "nas_profiler/least_squares.h"

#include "gtest/gtest.h"

namespace superserve::nas {
namespace {

// y = 1 + 2 x1 - 0.5 x2 on a full 2x2 design (x1, x2 independent).
struct Design {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  Design() {
    for (int rep = 0; rep < 3; ++rep) {
      for (double x1 : {0.0, 1.0}) {
        for (double x2 : {0.0, 1.0}) {
          x.push_back({1.0, x1, x2});
          y.push_back(1.0 + 2.0 * x1 - 0.5 * x2);
        }
      }
    }
  }
};

TEST(LeastSquaresTest, UnconstrainedRecoversTheWeights) {
  Design d;
  auto w = SolveLeastSquares(d.x, d.y, std::vector<bool>(d.x.size(), true));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NEAR((*w)[0], 1.0, 1e-9);
  EXPECT_NEAR((*w)[1], 2.0, 1e-9);
  EXPECT_NEAR((*w)[2], -0.5, 1e-9);
}

TEST(LeastSquaresTest, NonNegativeClipsAtTheConstrainedOptimum) {
  Design d;
  auto w = SolveLeastSquares(d.x, d.y, std::vector<bool>(d.x.size(), true), 0.0,
                             /*nonnegative=*/true);
  ASSERT_TRUE(w.ok()) << w.status();
  // With w2 held at 0 the best fit is y on (1, x1): the x1 = 0 rows average
  // (1 + 0.5) / 2 = 0.75, the x1 = 1 rows (3 + 2.5) / 2 = 2.75.
  EXPECT_NEAR((*w)[2], 0.0, 1e-9);
  EXPECT_NEAR((*w)[0], 0.75, 1e-6);
  EXPECT_NEAR((*w)[1], 2.0, 1e-6);
  // A negative intercept is allowed: only the feature weights are bounded.
  for (double& y : d.y) y -= 5.0;
  w = SolveLeastSquares(d.x, d.y, std::vector<bool>(d.x.size(), true), 0.0, true);
  ASSERT_TRUE(w.ok());
  EXPECT_NEAR((*w)[0], -4.25, 1e-6);
}

}  // namespace
}  // namespace superserve::nas
