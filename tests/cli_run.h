#ifndef SUPERSERVE_TESTS_CLI_RUN_H_
#define SUPERSERVE_TESTS_CLI_RUN_H_

// Runs one of the built command-line tools the way a user would, for the
// tests of their command-line contracts (exit code, last JSON line, messages).
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace superserve::testing {

struct CliRun {
  int status = -1;  // exit code; 128 + signal when killed
  std::string out;  // stdout, and stderr unless left out
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SUPERSERVE_CLI_RUN_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SUPERSERVE_CLI_RUN_SANITIZED 1
#endif
#endif

// Runs bin/`tool` `args` under a 60-s timeout (a regression that hangs fails
// with 124 instead of stalling the suite) and a 4-GB address-space limit (one
// that allocates without bound fails instead of exhausting the machine). A
// sanitizer build's tools reserve terabytes of address space for shadow
// memory, so there the limit is left out (the sanitizer bounds allocations).
inline CliRun RunTool(const std::string& tool, const std::string& args,
                      bool with_stderr = true) {
#ifdef SUPERSERVE_CLI_RUN_SANITIZED
  const std::string limit;
#else
  const std::string limit = "ulimit -v 4000000; ";
#endif
  const std::string cmd = limit + "timeout 60 " + std::string(SUPERSERVE_TEST_BIN_DIR) + "/" +
                          tool + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  const int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_CLI_RUN_H_
