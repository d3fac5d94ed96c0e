#ifndef SUPERSERVE_BENCH_DASHED_FLAGS_H_
#define SUPERSERVE_BENCH_DASHED_FLAGS_H_

#include <cstring>

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

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_DASHED_FLAGS_H_
