#include "common/secret.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/small_file.h"

namespace superserve {
namespace {

// Where the token starts in `raw` once surrounding whitespace is removed.
size_t LeadingWhitespace(absl::string_view raw) {
  return raw.size() - absl::StripLeadingAsciiWhitespace(raw).size();
}

}  // namespace

absl::Status CheckSecret(absl::string_view secret, absl::string_view source, size_t offset) {
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(secret[i]);
    if (c >= 0x20 && c <= 0x7E) continue;
    // Name the byte's kind and value, not its neighbours: the message must
    // not disclose any part of the token.
    const char* kind = c == '\n' || c == '\r' ? "a line break inside the token"
                       : c == '\t'            ? "a tab"
                       : c >= 0x80            ? "not ASCII (UTF-8 text?)"
                                              : "a control character";
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: byte %d is 0x%02x, %s; a token must be one line of printable ASCII (0x20-0x7E), "
        "which is all gRPC metadata can carry",
        source, offset + i + 1, c, kind));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  // A regular file of at most 64 KiB: a FIFO or a device named by mistake
  // must not block or fill the process that reads it.
  auto text = ReadSmallFile(path, size_t{64} << 10);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("secret file ", text.status().message()));
  }
  const std::string& raw = *text;
  std::string s(absl::StripAsciiWhitespace(raw));
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat("secret file ", path, " is empty"));
  if (auto st = CheckSecret(s, absl::StrCat("secret file ", path), LeadingWhitespace(raw));
      !st.ok()) {
    return st;
  }
  return s;
}

absl::StatusOr<std::optional<std::string>> ReadSecretEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  const absl::string_view raw(value);
  std::string s(absl::StripAsciiWhitespace(raw));
  if (s.empty()) return std::nullopt;
  if (auto st = CheckSecret(s, absl::StrCat("environment variable ", name), LeadingWhitespace(raw));
      !st.ok()) {
    return st;
  }
  return s;
}

bool SameSecret(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace superserve
