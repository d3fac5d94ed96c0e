#ifndef SUPERSERVE_COMMON_SECRET_H_
#define SUPERSERVE_COMMON_SECRET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace superserve {

// The call metadata key that carries the fleet token on WorkerLink.Connect
// (router/worker_link_service.h checks it, worker/router_link.h sends it).
inline constexpr char kFleetTokenMetadata[] = "superserve-fleet-token";

// Reads a token (the fleet token, the admin token) from a file: its content
// with surrounding whitespace removed. An unreadable or empty file is an
// error naming the path, never the content.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// Compares in time independent of where the strings differ (a secret must
// not leak through how fast a wrong guess is refused).
bool SameSecret(absl::string_view a, absl::string_view b);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_SECRET_H_
