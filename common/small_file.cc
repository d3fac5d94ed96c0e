#include "common/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace superserve {
namespace {

// Opens `path` for reading without blocking and checks, on the descriptor,
// that it is a regular file. Returns the descriptor and its size.
absl::StatusOr<int> OpenRegular(const std::string& path, off_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", why));
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open: ", why));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file";
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is ", kind, ", not a regular file"));
  }
  *size = st.st_size;
  return fd;
}

}  // namespace

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  off_t size = 0;
  absl::StatusOr<int> fd = OpenRegular(path, &size);
  if (!fd.ok()) return fd.status();
  if (size < 0 || static_cast<size_t>(size) > max_bytes) {
    ::close(*fd);
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": is ", size, " bytes, more than the ", max_bytes, " this file may have"));
  }
  // Read to the end, but never past the bound: the file may grow meanwhile.
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(*fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(*fd);
      return absl::DataLossError(absl::StrCat(path, ": read failed: ", why));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(*fd);
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": grew past the ", max_bytes, " bytes this file may have while being read"));
    }
  }
  ::close(*fd);
  return out;
}

absl::Status CheckRegularFile(const std::string& path) {
  off_t size = 0;
  absl::StatusOr<int> fd = OpenRegular(path, &size);
  if (!fd.ok()) return fd.status();
  ::close(*fd);
  return absl::OkStatus();
}

}  // namespace superserve
