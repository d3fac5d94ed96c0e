// libFuzzer target: profile JSON loading and validation
// (common/model_profile.*), what the router and workers read from a model
// repository or receive through the admin service.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/model_profile.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto profile = superserve::ModelProfile::FromJson(json);
  if (!profile.ok()) {
    FUZZ_CHECK(!profile.status().message().empty());
    return 0;
  }
  const superserve::ModelProfile& m = *profile;
  // What validation promises the scheduler.
  FUZZ_CHECK(!m.model.empty());
  FUZZ_CHECK(!m.batch_sizes.empty());
  for (size_t b = 0; b < m.batch_sizes.size(); ++b) {
    FUZZ_CHECK(m.batch_sizes[b] > 0);
    FUZZ_CHECK(m.BatchIndex(m.batch_sizes[b]) == static_cast<int>(b));
    // A batch of one more than the previous size runs at this one.
    const int64_t above = b == 0 ? 1 : m.batch_sizes[b - 1] + 1;
    FUZZ_CHECK(m.PaddedBatchIndex(above) == static_cast<int>(b));
  }
  FUZZ_CHECK(m.PaddedBatchIndex(int64_t{m.max_batch()} + 1) == -1);
  FUZZ_CHECK(!m.subnets.empty() || m.is_dynamic);
  for (size_t s = 0; s < m.subnets.size(); ++s) {
    const auto& sn = m.subnets[s];
    FUZZ_CHECK(m.SubnetIndex(sn.id) == static_cast<int>(s));
    FUZZ_CHECK(sn.accuracy >= 0 && sn.accuracy <= 100);
    FUZZ_CHECK(sn.latency.size() == m.batch_sizes.size());
    for (size_t b = 0; b < sn.latency.size(); ++b) {
      FUZZ_CHECK(sn.latency[b] > 0);
      if (b > 0) FUZZ_CHECK(sn.latency[b] >= sn.latency[b - 1]);
    }
  }
  FUZZ_CHECK(std::isfinite(m.input_std) && m.input_std > 0);
  // No subnet left is dominated (at least as accurate and as fast
  // everywhere, strictly better somewhere) by another.
  for (const auto& a : m.subnets) {
    for (const auto& b : m.subnets) {
      if (&a == &b || b.accuracy < a.accuracy) continue;
      bool faster_or_equal = true, strictly = b.accuracy > a.accuracy;
      for (size_t i = 0; i < a.latency.size(); ++i) {
        faster_or_equal = faster_or_equal && b.latency[i] <= a.latency[i];
        strictly = strictly || b.latency[i] < a.latency[i];
      }
      FUZZ_CHECK(!(faster_or_equal && strictly));
    }
  }

  // Saving and loading again gives an accepted profile that saves the same.
  const std::string saved = m.ToJson();
  auto reloaded = superserve::ModelProfile::FromJson(saved);
  if (!reloaded.ok()) {
    std::fprintf(stderr, "reload failed: %s\n", std::string(reloaded.status().message()).c_str());
  }
  FUZZ_CHECK(reloaded.ok());
  FUZZ_CHECK(reloaded->ToJson() == saved);
  // What loading adjusted is saved adjusted: nothing is left to warn about.
  FUZZ_CHECK(reloaded->warnings.empty());
  return 0;
}
