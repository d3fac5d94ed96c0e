#ifndef SUPERSERVE_COMMON_SECRET_H_
#define SUPERSERVE_COMMON_SECRET_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace superserve {

// The call metadata key that carries the fleet token on WorkerLink.Connect
// (router/worker_link_service.h checks it, worker/router_link.h sends it).
inline constexpr char kFleetTokenMetadata[] = "superserve-fleet-token";

// Reads a token (the fleet token, the admin token) from a file: its content
// with surrounding whitespace (a trailing newline) removed, checked with
// CheckSecret. An unreadable, empty or directory path, or a token gRPC could
// not send, is an error naming the path, never the content.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// The environment variable `name` as a token, trimmed and checked like a
// file's; nullopt when it is unset or blank.
absl::StatusOr<std::optional<std::string>> ReadSecretEnv(const char* name);

// A token travels as a gRPC metadata value, which may hold printable ASCII
// (0x20-0x7E) only: gRPC aborts the process (SIGABRT, "Illegal header value")
// when asked to send anything else. OK when `secret` is such; else an error
// naming `source` (a file, a variable, a flag) and the first offending byte's
// position (counted from 1, plus `offset`: where `secret` starts in the
// source), never the token itself.
absl::Status CheckSecret(absl::string_view secret, absl::string_view source, size_t offset = 0);

// Compares in time independent of where the strings differ (a secret must
// not leak through how fast a wrong guess is refused).
bool SameSecret(absl::string_view a, absl::string_view b);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_SECRET_H_
