#ifndef SUPERSERVE_BENCH_BENCHMARK_REGISTRY_H_
#define SUPERSERVE_BENCH_BENCHMARK_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace superserve::bench {

// One `superserve-bench NAME` entry. A benchmark measures a candidate against
// a baseline inside the same run (these machines are shared and noisy),
// prints whatever it likes, and with json=true ends with exactly one JSON
// object on the last line of stdout. Returns the process exit code.
struct BenchmarkArgs {
  bool json = false;
  std::vector<std::string> extra;  // positional arguments after NAME
};

using BenchmarkFn = std::function<int(const BenchmarkArgs&)>;

struct BenchmarkInfo {
  std::string description;
  BenchmarkFn fn;
};

std::map<std::string, BenchmarkInfo>& BenchmarkTable();

// Static registration from the benchmark's own .cc (compiled into the
// superserve-bench executable itself, so the linker keeps it).
struct RegisterBenchmark {
  RegisterBenchmark(const std::string& name, const std::string& description, BenchmarkFn fn) {
    BenchmarkTable()[name] = {description, std::move(fn)};
  }
};

}  // namespace superserve::bench

#endif  // SUPERSERVE_BENCH_BENCHMARK_REGISTRY_H_
