#ifndef SUPERSERVE_TESTS_PLANNER_PLANNER_TEST_UTIL_H_
#define SUPERSERVE_TESTS_PLANNER_PLANNER_TEST_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "planner/module.h"

namespace superserve::testing {

// A module from (batch, duration in seconds) rows.
inline Module MakeModule(const std::string& name, const std::vector<std::pair<int, double>>& rows) {
  Module m;
  m.name = name;
  for (const auto& [b, d] : rows) m.configs.push_back({b, d});
  return m;
}

// Harpagon Table I.
inline Module TableOneM1() { return MakeModule("M1", {{2, 0.160}, {4, 0.200}, {8, 0.320}}); }
inline Module TableOneM2() { return MakeModule("M2", {{2, 0.125}, {4, 0.160}, {8, 0.250}}); }
inline Module TableOneM3() { return MakeModule("M3", {{2, 0.100}, {8, 0.250}, {32, 0.800}}); }

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_PLANNER_PLANNER_TEST_UTIL_H_
