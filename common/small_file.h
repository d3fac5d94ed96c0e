#ifndef SUPERSERVE_COMMON_SMALL_FILE_H_
#define SUPERSERVE_COMMON_SMALL_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace superserve {

// Reads a whole configuration file (a manifest, a profile) of at most
// `max_bytes`. Only a regular file is read (symlinks are followed): a FIFO
// would block the reader forever and a device such as /dev/zero never ends,
// and a model repository or package is written by people other than the
// operator. The file is opened non-blocking and checked on the open
// descriptor, so a file swapped for a FIFO after a check cannot block either.
// Errors name the path and what is wrong with it.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes);

// The most a PEM file (a TLS certificate, its key, a CA bundle: the whole
// system bundle is about 200 kB) may hold for the tools that read one.
inline constexpr size_t kMaxPemBytes = size_t{4} << 20;

// Checks that `path` is a regular file that can be opened without blocking,
// for readers that stream a large file themselves (checkpoint hashing).
absl::Status CheckRegularFile(const std::string& path);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_SMALL_FILE_H_
