#include "common/dashed_flags.h"

#include <cstring>

namespace superserve {

void AcceptDashedFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* a = argv[i];
    if (std::strcmp(a, "--") == 0) break;
    if (a[0] != '-' || a[1] != '-') continue;
    for (char* c = a + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

void MergeRepeatedListFlag(const char* name, int* argc, char*** argv,
                                  std::vector<std::string>* storage) {
  const std::string eq = std::string("--") + name + "=";
  const std::string bare = std::string("--") + name;
  std::vector<std::string> values, rest;
  for (int i = 0; i < *argc; ++i) {
    std::string a = (*argv)[i];
    if (a.compare(0, eq.size(), eq) == 0) {
      values.push_back(a.substr(eq.size()));
    } else if (a == bare && i + 1 < *argc) {
      values.push_back((*argv)[++i]);
    } else {
      rest.push_back(a);
    }
  }
  if (values.size() <= 1) return;
  std::string joined = eq;
  for (size_t i = 0; i < values.size(); ++i) joined += (i ? "," : "") + values[i];
  rest.insert(rest.begin() + 1, joined);
  *storage = std::move(rest);
  static std::vector<char*> pointers;
  pointers.clear();
  for (std::string& s : *storage) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  *argc = static_cast<int>(storage->size());
  *argv = pointers.data();
}

}  // namespace superserve
