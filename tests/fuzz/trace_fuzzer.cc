// libFuzzer target: the arrival-trace CSV reader (bench/sim/trace.*) shared by
// the simulator and the load generator. Trace::ReadCsv takes a path, so each
// input is written to a scratch file first.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "bench/sim/trace.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = superserve::FuzzScratchPath(".csv");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto trace = superserve::Trace::ReadCsv(path);
  if (!trace.ok()) {
    FUZZ_CHECK(!trace.status().message().empty());
    return 0;
  }
  const superserve::Trace& t = *trace;
  // Arrivals are relative to the trace start: non-negative and sorted.
  FUZZ_CHECK(std::is_sorted(t.arrivals.begin(), t.arrivals.end()));
  FUZZ_CHECK(t.arrivals.empty() || t.arrivals.front() >= 0);
  FUZZ_CHECK(t.app.empty() || t.app.size() == t.size());
  FUZZ_CHECK(t.model.empty() || t.model.size() == t.size());
  for (int32_t a : t.app) FUZZ_CHECK(a >= 0 && static_cast<size_t>(a) < t.app_names.size());
  for (int32_t m : t.model) FUZZ_CHECK(m >= 0 && static_cast<size_t>(m) < t.model_names.size());
  (void)t.mean_rate();
  (void)superserve::InterArrivalCv2(t.arrivals);

  // Writing and reading back gives the same trace.
  static const std::string copy = superserve::FuzzScratchPath(".copy.csv");
  FUZZ_CHECK(t.WriteCsv(copy).ok());
  auto again = superserve::Trace::ReadCsv(copy);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->arrivals == t.arrivals && again->app == t.app && again->model == t.model &&
             again->app_names == t.app_names && again->model_names == t.model_names);
  return 0;
}
