#ifndef SUPERSERVE_TESTS_FUZZ_FUZZ_CHECK_H_
#define SUPERSERVE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

// An invariant a fuzz target asserts on every accepted input. A failure
// aborts, which libFuzzer records as a crash (with the input saved), so that
// "parsed without crashing but produced nonsense" is found too.
#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace superserve {

// A scratch file per process for the readers that take a path. libFuzzer runs
// one input at a time per process, so one file is enough.
inline std::string FuzzScratchPath(const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/superserve-fuzz-" +
         std::to_string(::getpid()) + suffix;
}

}  // namespace superserve

#endif  // SUPERSERVE_TESTS_FUZZ_FUZZ_CHECK_H_
