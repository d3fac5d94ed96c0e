// libFuzzer target: the IDX reader (common/idx_reader.*). Raw inputs go to
// ParseIdx; inputs that start with the gzip magic also go through
// ReadIdxFile's gunzip path via a scratch ".gz" file.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "common/idx_reader.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckAccepted(const superserve::IdxArray& a) {
  FUZZ_CHECK(!a.dims.empty() && a.dims.size() <= 4);
  uint64_t product = 1;
  for (int64_t d : a.dims) {
    FUZZ_CHECK(d >= 0);
    product *= static_cast<uint64_t>(d);
  }
  FUZZ_CHECK(a.data.size() == product);
  FUZZ_CHECK(a.num_items() == a.dims[0]);
  // item_size() must be computable (no overflow) and agree with the data.
  const int64_t item = a.item_size();
  FUZZ_CHECK(item >= 0);
  FUZZ_CHECK(static_cast<uint64_t>(a.num_items()) * static_cast<uint64_t>(item) == a.data.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = superserve::ParseIdx(bytes, "fuzz.idx");
  if (parsed.ok()) {
    CheckAccepted(*parsed);
  } else {
    FUZZ_CHECK(!parsed.status().message().empty());
  }

  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    static const std::string path = superserve::FuzzScratchPath(".idx.gz");
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    auto read = superserve::ReadIdxFile(path);
    if (read.ok()) CheckAccepted(*read);
  }
  return 0;
}
