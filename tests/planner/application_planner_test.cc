#include "planner/application_planner.h"

#include "gtest/gtest.h"

namespace superserve {
namespace {
TEST(ApplicationPlannerTest, Placeholder) {}
}  // namespace
}  // namespace superserve
