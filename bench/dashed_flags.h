#ifndef SUPERSERVE_BENCH_DASHED_FLAGS_H_
#define SUPERSERVE_BENCH_DASHED_FLAGS_H_

#include <cstring>
#include <string>
#include <vector>

namespace superserve {

// The simulator tools document their flags with dashes (--slo-ms,
// --fixed-subnet, --fail-worker-at) while Abseil flag names use underscores.
// Rewrites "--a-b[=v]" to "--a_b[=v]" in place (only the name part) so both
// spellings work. Call before InitMain.
inline void AcceptDashedFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* a = argv[i];
    if (std::strncmp(a, "--", 2) != 0) continue;
    if (a[2] == '\0') break;  // "--" ends the flags
    for (char* p = a + 2; *p != '\0' && *p != '='; ++p) {
      if (*p == '-') *p = '_';
    }
  }
}

// Lets a list flag be repeated (--fail_worker_at 12 --fail_worker_at 24) as
// well as comma-separated: Abseil keeps only the last occurrence, so all
// occurrences are folded into one "--name=a,b" argument. Rewrites *argc and
// *argv to point into `storage` (which must outlive flag parsing).
inline void MergeRepeatedListFlag(const char* name, int* argc, char*** argv,
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

#endif  // SUPERSERVE_BENCH_DASHED_FLAGS_H_
