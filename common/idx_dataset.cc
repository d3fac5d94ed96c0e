#include "common/idx_dataset.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"

namespace superserve {
namespace {

absl::StatusOr<std::string> ReadGzipFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // transparently reads plain files too
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string message = msg ? msg : "";
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    return absl::DataLossError(absl::StrCat(path, ": gzip read failed: ", message));
  }
  return out;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[at + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

}  // namespace

absl::StatusOr<IdxImageSet> ReadIdxImageSet(const std::string& images_path,
                                            const std::string& labels_path) {
  auto images = ReadGzipFile(images_path);
  if (!images.ok()) return images.status();
  auto labels = ReadGzipFile(labels_path);
  if (!labels.ok()) return labels.status();
  // idx3-ubyte: magic 0x00000803, count, rows, cols, then pixels.
  if (images->size() < 16 || BigEndian32(*images, 0) != 0x803) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": not an idx3-ubyte file (bad magic or too short)"));
  }
  // idx1-ubyte: magic 0x00000801, count, then labels.
  if (labels->size() < 8 || BigEndian32(*labels, 0) != 0x801) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": not an idx1-ubyte file (bad magic or too short)"));
  }
  IdxImageSet set;
  set.count = BigEndian32(*images, 4);
  set.rows = BigEndian32(*images, 8);
  set.cols = BigEndian32(*images, 12);
  const int64_t label_count = BigEndian32(*labels, 4);
  const uint64_t want = static_cast<uint64_t>(set.count) * set.rows * set.cols;
  if (images->size() - 16 != want) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": header says ", set.count, "x",
                                                   set.rows, "x", set.cols, " = ", want,
                                                   " bytes, file has ", images->size() - 16));
  }
  if (label_count != set.count || labels->size() - 8 != static_cast<uint64_t>(label_count)) {
    return absl::InvalidArgumentError(absl::StrCat(labels_path, ": ", label_count,
                                                   " labels for ", set.count, " images"));
  }
  set.pixels.assign(images->begin() + 16, images->end());
  set.labels.assign(labels->begin() + 8, labels->end());
  return set;
}

}  // namespace superserve
