#include "planner/application.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"

namespace superserve {

namespace {

std::map<std::string, int> IndexByName(const Application& app) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < app.modules.size(); ++i)
    index[app.modules[i].module.name] = static_cast<int>(i);
  return index;
}

}  // namespace

absl::Status ValidateApplication(const Application& app) {
  if (app.modules.empty()) return absl::InvalidArgumentError("application has no modules");
  std::map<std::string, int> index;
  for (size_t i = 0; i < app.modules.size(); ++i) {
    const ApplicationModule& m = app.modules[i];
    if (m.module.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("module #", i, " has no name"));
    }
    if (!index.emplace(m.module.name, static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(absl::StrCat("module name ", m.module.name, " used twice"));
    }
    if (!std::isfinite(m.rate_factor) || m.rate_factor <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("module ", m.module.name, ": rate_factor must be finite and > 0"));
    }
    if (auto st = ValidateModule(m.module); !st.ok()) return st;
  }
  for (const ApplicationModule& m : app.modules) {
    for (const std::string& parent : m.after) {
      if (!index.count(parent)) {
        return absl::InvalidArgumentError(
            absl::StrCat("module ", m.module.name, ": unknown parent \"", parent, "\""));
      }
      if (parent == m.module.name) {
        return absl::InvalidArgumentError(absl::StrCat("module ", parent, " follows itself"));
      }
    }
  }
  if (TopologicalOrder(app).size() != app.modules.size()) {
    return absl::InvalidArgumentError("the modules' \"after\" edges form a cycle");
  }
  return absl::OkStatus();
}

std::vector<int> TopologicalOrder(const Application& app) {
  const std::map<std::string, int> index = IndexByName(app);
  const size_t n = app.modules.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> children(n);
  for (size_t i = 0; i < n; ++i) {
    for (const std::string& parent : app.modules[i].after) {
      auto it = index.find(parent);
      if (it == index.end()) continue;
      children[it->second].push_back(static_cast<int>(i));
      ++pending[i];
    }
  }
  std::vector<int> order;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) order.push_back(static_cast<int>(i));
  }
  for (size_t head = 0; head < order.size(); ++head) {
    for (int c : children[order[head]]) {
      if (--pending[c] == 0) order.push_back(c);
    }
  }
  return order;
}

}  // namespace superserve
