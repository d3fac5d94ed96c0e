#include "common/idx_reader.h"

#include <zlib.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace superserve {
namespace {

absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  if (!absl::EndsWith(path, ".gz")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string out;
  char buf[1 << 16];
  while (true) {
    int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      return absl::DataLossError(absl::StrCat(path, ": gzip error: ", msg));
    }
    if (n == 0) break;
    out.append(buf, n);
  }
  // gzread returns 0 at a premature end of a truncated stream too; zlib
  // reports it through gzclose/gzerror as Z_BUF_ERROR.
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string m = msg ? msg : "";
  int rc = gzclose(f);
  if (err != Z_OK && err != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(path, ": gzip error: ", m));
  }
  if (rc == Z_BUF_ERROR) {
    return absl::DataLossError(absl::StrCat(path, ": gzip stream is truncated"));
  }
  return out;
}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

int64_t IdxArray::item_size() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

absl::StatusOr<IdxArray> ParseIdx(const std::string& bytes, const std::string& name) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": truncated IDX header (", bytes.size(), " bytes)"));
  }
  if (p[0] != 0 || p[1] != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": bad IDX magic (first two bytes must be 0)"));
  }
  if (p[2] != 0x08) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": unsupported IDX element type 0x", absl::Hex(p[2]), " (only 0x08 unsigned byte)"));
  }
  const int rank = p[3];
  if (rank < 1 || rank > 4) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": IDX rank ", rank, " not in [1, 4]"));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": truncated IDX header: ", bytes.size(),
                                                   " bytes, rank ", rank, " needs ", header));
  }
  IdxArray a;
  uint64_t total = 1;
  // The bound counts a 0 dim as 1, so that a leading 0 cannot hide huge
  // later dims (item_size() would overflow), and is checked before each
  // multiplication, so that the product cannot wrap around 2^64.
  constexpr uint64_t kMaxElements = uint64_t{1} << 34;
  uint64_t bound = 1;
  for (int i = 0; i < rank; ++i) {
    uint32_t d = BigEndian32(p + 4 + 4 * i);
    const uint64_t factor = d == 0 ? 1 : d;
    if (factor > kMaxElements / bound) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": IDX dims are implausibly large"));
    }
    bound *= factor;
    a.dims.push_back(d);
    total *= d;
  }
  const uint64_t have = bytes.size() - header;
  if (have < total) {
    return absl::DataLossError(absl::StrCat(name, ": truncated IDX data: ", have,
                                            " bytes present, dims need ", total));
  }
  if (have > total) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", have - total, " trailing bytes after the IDX data"));
  }
  a.data.assign(p + header, p + header + total);
  return a;
}

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  auto bytes = ReadMaybeGzip(path);
  if (!bytes.ok()) return bytes.status();
  return ParseIdx(*bytes, path);
}

absl::StatusOr<LabeledImages> LoadFashionMnist(const std::string& split, const std::string& dir) {
  if (split != "train" && split != "t10k") {
    return absl::InvalidArgumentError(
        absl::StrCat("Fashion-MNIST split \"", split, "\" is neither \"train\" nor \"t10k\""));
  }
  LabeledImages out;
  auto images = ReadIdxFile(absl::StrCat(dir, "/", split, "-images-idx3-ubyte.gz"));
  if (!images.ok()) return images.status();
  auto labels = ReadIdxFile(absl::StrCat(dir, "/", split, "-labels-idx1-ubyte.gz"));
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3 || labels->dims.size() != 1 ||
      images->dims[0] != labels->dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat("Fashion-MNIST ", split,
                                                   ": images and labels disagree in shape"));
  }
  for (size_t i = 0; i < labels->data.size(); ++i) {
    if (labels->data[i] >= 10) {
      return absl::InvalidArgumentError(absl::StrCat("Fashion-MNIST ", split, ": label[", i,
                                                     "] = ", int{labels->data[i]}, " >= 10"));
    }
  }
  out.images = std::move(*images);
  out.labels = std::move(*labels);
  return out;
}

}  // namespace superserve
