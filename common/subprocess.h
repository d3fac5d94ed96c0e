#ifndef SUPERSERVE_COMMON_SUBPROCESS_H_
#define SUPERSERVE_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/time.h"

namespace superserve {

// A child process started by a test, a benchmark or a tool (router, workers).
// Its stdout+stderr go to `log_path` (or are inherited when empty). The child
// gets SIGKILL if this process dies first (PR_SET_PDEATHSIG), so a crashed
// test never leaves servers behind; the destructor stops it too.
class Subprocess {
 public:
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::string& log_path = "");
  Subprocess() = default;
  Subprocess(Subprocess&& o) noexcept;
  Subprocess& operator=(Subprocess&& o) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running();
  // SIGTERM, then SIGKILL after `grace`; returns the exit status (as waitpid).
  int Stop(Nanos grace = Seconds(3));
  void Kill(int signal);
  // Waits up to `timeout` for exit; the wait status, or nullopt on timeout.
  std::optional<int> Wait(Nanos timeout);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Polls `path` until it exists and is non-empty (a child writes it when
// ready) or `timeout` passes; returns its contents.
absl::StatusOr<std::string> WaitForFile(const std::string& path, Nanos timeout,
                                        Subprocess* child = nullptr);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_SUBPROCESS_H_
