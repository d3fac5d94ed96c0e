#ifndef SUPERSERVE_TESTS_ROUTER_ENGINE_TEST_UTIL_H_
#define SUPERSERVE_TESTS_ROUTER_ENGINE_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "router/client/trace_csv.h"
#include "superserve/v1/admin.grpc.pb.h"

namespace superserve::testing {

inline std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}
// The build compiles in where the programs and sources are
// (tests/CMakeLists.txt); the environment variables win when set.
inline std::string BinDir() { return EnvOr("SUPERSERVE_BIN_DIR", SUPERSERVE_TEST_BIN_DIR); }
inline std::string SourceDir() { return EnvOr("SUPERSERVE_SOURCE_DIR", SUPERSERVE_TEST_SOURCE_DIR); }
inline std::string EmulatedRepo() { return SourceDir() + "/tests/router/testdata/emulated_repo"; }

// The whole of a file (a log, a port file); empty when it cannot be read.
inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory under $TMPDIR for logs and port files.
inline std::string MakeWorkDir() {
  std::string tmpl = EnvOr("TMPDIR", "/tmp") + "/superserve-test-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir != nullptr ? std::string(dir) : std::string("/tmp");
}

// Poisson arrivals at `qps` (seeded), `n` queries.
inline std::vector<TraceArrival> PoissonTrace(int n, double qps, uint32_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(qps);
  std::vector<TraceArrival> t(n);
  double s = 0;
  for (auto& a : t) {
    s += gap(rng);
    a.arrival = static_cast<Nanos>(s * 1e9);
  }
  return t;
}

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_ROUTER_ENGINE_TEST_UTIL_H_
