#ifndef SUPERSERVE_COMMON_OUTPUT_PATH_H_
#define SUPERSERVE_COMMON_OUTPUT_PATH_H_

// Checks a tool makes before a long run (training, a search, a profile) that
// the file it will write at the end can be written: a run of minutes or hours
// should not end in "cannot write" (or an uncaught filesystem error).

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace superserve {

// `path` can be created or replaced: it is not empty and not a directory, and
// its folder (the current one when it names none) exists, is a directory and
// is writable by this process. INVALID_ARGUMENT naming `flag`, the path and
// what is wrong otherwise. Nothing is created.
absl::Status CheckOutputFile(absl::string_view flag, const std::string& path);

// `dir` exists as a writable directory after this call: it is created (with
// its parents) when missing. INVALID_ARGUMENT naming `flag` otherwise.
absl::Status MakeOutputDirectory(absl::string_view flag, const std::string& dir);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_OUTPUT_PATH_H_
