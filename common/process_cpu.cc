#include "common/process_cpu.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace superserve {

absl::StatusOr<Nanos> ProcessCpuTime(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  // open/read rather than a stream: the error must say whether the process
  // is gone (ENOENT: no /proc entry; ESRCH: it exited while being read).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ESRCH) {
      return absl::NotFoundError(absl::StrCat("no process ", pid, " (", path, " is missing)"));
    }
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
  }
  std::string stat;
  char chunk[1024];
  ssize_t got;
  while ((got = read(fd, chunk, sizeof(chunk))) > 0) stat.append(chunk, static_cast<size_t>(got));
  const int err = errno;
  close(fd);
  if (got < 0) {
    if (err == ESRCH) return absl::NotFoundError(absl::StrCat("process ", pid, " exited"));
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(err)));
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // the fields start after the last ')'. Counting from 1 as proc(5) does,
  // field 3 is the state, 14 utime and 15 stime (clock ticks).
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) {
    return absl::InternalError(absl::StrCat(path, " is malformed: \"", stat, "\""));
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 1), ' ', absl::SkipWhitespace());
  constexpr size_t kUtime = 14 - 3, kStime = 15 - 3;  // indices after the comm field
  uint64_t utime = 0, stime = 0;
  if (fields.size() <= kStime || !absl::SimpleAtoi(fields[kUtime], &utime) ||
      !absl::SimpleAtoi(fields[kStime], &stime)) {
    return absl::InternalError(absl::StrCat(path, " has no utime/stime: \"", stat, "\""));
  }
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  if (ticks_per_second <= 0) return absl::InternalError("sysconf(_SC_CLK_TCK) failed");
  const uint64_t ticks = utime + stime;
  // Whole seconds and the remainder separately: no overflow, no rounding drift.
  return static_cast<Nanos>(ticks / ticks_per_second) * kNanosPerSecond +
         static_cast<Nanos>(ticks % ticks_per_second) * kNanosPerSecond / ticks_per_second;
}

}  // namespace superserve
