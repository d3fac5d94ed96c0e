#include "common/secret.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace superserve {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read secret file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s(absl::StripAsciiWhitespace(ss.str()));
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat("secret file ", path, " is empty"));
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
