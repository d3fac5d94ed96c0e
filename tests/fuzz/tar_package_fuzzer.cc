// libFuzzer target: the tar package reader (common/tar_package.*), which
// reads archives an admin hands the router. Accepted archives must hold only
// plain file names (no folder, no "..") within the limits, and no more
// content than the input had.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/tar_package.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto members = superserve::ParseTarPackage(bytes);
  if (!members.ok()) {
    FUZZ_CHECK(!members.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!members->empty() && members->size() <= superserve::kMaxTarMembers);
  size_t total = 0;
  for (const auto& m : *members) {
    FUZZ_CHECK(!m.name.empty() && m.name != "." && m.name != "..");
    FUZZ_CHECK(m.name.find('/') == std::string::npos);
    total += m.content.size();
  }
  FUZZ_CHECK(total <= size);
  return 0;
}
