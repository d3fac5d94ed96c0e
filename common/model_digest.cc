#include "common/model_digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void Update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  void Update(const std::string& s) { Update(s.data(), s.size()); }
  std::string HexDigest() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &n);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
      out.push_back(kHex[md[i] >> 4]);
      out.push_back(kHex[md[i] & 15]);
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

absl::Status HashFile(const fs::path& path, Sha256* h) {
  // A FIFO or a device would block or never end.
  if (auto st = CheckRegularFile(path.string()); !st.ok()) return st;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h->Update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path.string()));
  return absl::OkStatus();
}

}  // namespace

std::string Sha256Hex(const std::string& bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

absl::StatusOr<ModelDigest> DigestModelDirectory(const std::string& directory) {
  const fs::path dir(directory);
  ModelDigest d;
  {
    Sha256 h;
    if (auto s = HashFile(dir / "profile.json", &h); !s.ok()) return s;
    d.profile = h.HexDigest();
  }
  std::error_code ec;
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::error_code fe;
    if (!it->is_regular_file(fe)) continue;
    std::string rel = fs::relative(it->path(), dir, ec).generic_string();
    if (rel != "profile.json" && rel != "manifest.json") files.push_back(std::move(rel));
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", directory, ": ", ec.message()));
  if (files.empty()) return d;
  std::sort(files.begin(), files.end());
  Sha256 h;
  for (const auto& rel : files) {
    const auto size = fs::file_size(dir / rel, ec);
    if (ec) return absl::InternalError(absl::StrCat(rel, ": ", ec.message()));
    h.Update(rel);
    h.Update("\0", 1);
    h.Update(std::to_string(size));
    h.Update("\0", 1);
    if (auto s = HashFile(dir / rel, &h); !s.ok()) return s;
  }
  d.checkpoint = h.HexDigest();
  return d;
}

}  // namespace superserve
