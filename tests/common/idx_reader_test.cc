#include "common/idx_reader.h"

#include <zlib.h>

#include <array>
#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"

namespace superserve {
namespace {

std::string Header(int rank, std::vector<uint32_t> dims) {
  std::string h = {0, 0, 0x08, static_cast<char>(rank)};
  for (uint32_t d : dims) {
    h += static_cast<char>(d >> 24);
    h += static_cast<char>(d >> 16);
    h += static_cast<char>(d >> 8);
    h += static_cast<char>(d);
  }
  return h;
}

TEST(IdxReaderTest, ParsesAHandMadeArray) {
  std::string bytes = Header(2, {2, 3}) + std::string("\x01\x02\x03\x04\x05\x06", 6);
  auto a = ParseIdx(bytes, "mem");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->item_size(), 3);
  EXPECT_EQ(a->data[5], 6);
}

// Regressions: a leading 0 dim let the later dims be anything, so
// item_size() overflowed int64 (found by idx_reader_fuzzer: dims
// [0, 0xf4d528fa, 0xfe7f0000]); and the running product of the dims could
// wrap around 2^64 (2^17 * 2^17 * 2^30 = 2^64 = 0), so a header promising
// 2^64 bytes was accepted with no data (found while writing the fuzzer).
TEST(IdxReaderTest, RejectsDimsWhoseProductWrapsOrOverflows) {
  auto wrapped = ParseIdx(Header(3, {1u << 17, 1u << 17, 1u << 30}), "wrap.idx");
  ASSERT_FALSE(wrapped.ok());
  EXPECT_NE(wrapped.status().message().find("implausibly large"), std::string::npos)
      << wrapped.status();
  auto zero_first = ParseIdx(Header(3, {0, 0xf4d528fau, 0xfe7f0000u}), "zero.idx");
  ASSERT_FALSE(zero_first.ok());
  EXPECT_NE(zero_first.status().message().find("implausibly large"), std::string::npos)
      << zero_first.status();
  // An empty array with sane item dims is still fine.
  auto empty = ParseIdx(Header(3, {0, 28, 28}), "empty.idx");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->num_items(), 0);
  EXPECT_EQ(empty->item_size(), 28 * 28);
}

TEST(IdxReaderTest, RejectsTruncatedDataAndHeader) {
  std::string bytes = Header(2, {2, 3}) + std::string("\x01\x02\x03", 3);
  auto a = ParseIdx(bytes, "short.idx");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("short.idx: truncated IDX data: 3 bytes present, dims need 6"),
            std::string::npos)
      << a.status();
  auto h = ParseIdx(Header(3, {1, 2, 3}).substr(0, 9), "hdr.idx");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("truncated IDX header"), std::string::npos) << h.status();
  auto m = ParseIdx(std::string("\x01\x00\x08\x01", 4), "magic.idx");
  EXPECT_NE(m.status().message().find("bad IDX magic"), std::string::npos);
  auto t = ParseIdx(std::string("\x00\x00\x0d\x01", 4), "float.idx");
  EXPECT_NE(t.status().message().find("unsupported IDX element type"), std::string::npos);
}

TEST(IdxReaderTest, RejectsTruncatedGzipFile) {
  // A valid gzip of a valid IDX array, cut in half.
  std::string idx = Header(1, {5000}) + std::string(5000, '\x07');
  std::string path = ::testing::TempDir() + "/trunc.idx.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, idx.data(), idx.size());
  gzclose(f);
  std::ifstream in(path, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  // The full file reads back.
  auto full = ReadIdxFile(path);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->num_items(), 5000);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(gz.data(), gz.size() / 2);
  auto cut = ReadIdxFile(path);
  ASSERT_FALSE(cut.ok()) << "accepted a truncated gzip IDX file";
  EXPECT_NE(cut.status().message().find(path), std::string::npos) << cut.status();
  std::remove(path.c_str());
}

TEST(IdxReaderTest, MissingFileIsNotFound) {
  auto r = ReadIdxFile("/nonexistent/x-idx1-ubyte.gz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

TEST(IdxReaderTest, LoadsDebianFashionMnistTestSet) {
  auto d = LoadFashionMnist("t10k");
  ASSERT_TRUE(d.ok()) << d.status() << " (is dataset-fashion-mnist installed?)";
  EXPECT_EQ(d->images.dims, (std::vector<int64_t>{10000, 28, 28}));
  EXPECT_EQ(d->labels.num_items(), 10000);
  std::array<int, 10> per_class{};
  for (uint8_t l : d->labels.data) per_class[l]++;
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << "class " << c;
  EXPECT_FALSE(LoadFashionMnist("validation").ok());
}

}  // namespace
}  // namespace superserve
