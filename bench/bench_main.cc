// superserve-bench NAME [--json]: runs one benchmark; see --help for the list.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/baselines/baselines.h"
#include "bench/benchmark_registry.h"
#include "common/init.h"

ABSL_FLAG(bool, json, false, "End the output with one JSON object on the last line.");

namespace superserve::bench {

std::map<std::string, BenchmarkInfo>& BenchmarkTable() {
  static auto* table = new std::map<std::string, BenchmarkInfo>();
  return *table;
}

}  // namespace superserve::bench

int main(int argc, char** argv) {
  using superserve::bench::BenchmarkTable;
  // The benchmarks compare against the paper baselines by name.
  superserve::RegisterBaselinePolicies();
  std::string usage = "superserve-bench NAME [--json] [flags]\n\nBenchmarks (each compares against a "
                      "baseline in the same run and reports the ratio):\n";
  for (const auto& [name, info] : BenchmarkTable()) {
    absl::StrAppend(&usage, "  ", name, ": ", info.description, "\n");
  }
  auto args = superserve::InitMain(argc, argv, usage);
  if (args.size() < 2) {
    std::fprintf(stderr, "superserve-bench: missing benchmark NAME\n%s", usage.c_str());
    return 2;
  }
  auto it = BenchmarkTable().find(args[1]);
  if (it == BenchmarkTable().end()) {
    std::fprintf(stderr, "superserve-bench: unknown benchmark \"%s\"\n%s", args[1].c_str(),
                 usage.c_str());
    return 2;
  }
  superserve::bench::BenchmarkArgs bargs;
  bargs.json = absl::GetFlag(FLAGS_json);
  bargs.extra.assign(args.begin() + 2, args.end());
  return it->second.fn(bargs);
}
