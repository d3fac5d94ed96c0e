#ifndef SUPERSERVE_BENCH_BENCHMARKS_GRPC_EMULATED_FLEET_H_
#define SUPERSERVE_BENCH_BENCHMARKS_GRPC_EMULATED_FLEET_H_

// What the benchmarks that run a real router with emulated workers share: a
// scratch directory, a model repository with a synthetic profile, inputs, a
// Poisson arrival trace and the CPU-per-query arithmetic over /proc readings.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "router/client/load_generator.h"
#include "router/client/trace_csv.h"

namespace superserve::bench {

// The folder of the running executable (superserve-router and
// superserve-worker are built next to superserve-bench).
std::string SelfDir();

// Runs `run(dir)` in a fresh scratch directory (model repository, process
// logs, port files) and removes it afterwards, unless the run failed: then
// the logs stay for the error message that points at them.
int InScratchDir(const char* benchmark, const std::function<int(const std::string&)>& run);

// A synthetic emulated profile named `model`: one subnet per accuracy, subnet
// i's latency at batch_sizes[j] = base_us[i] * batch_factor[j] * scale.
struct EmulatedModel {
  std::string model = "bench";
  std::vector<int> batch_sizes;
  std::vector<double> accuracy;
  std::vector<double> base_us;
  std::vector<double> batch_factor;  // one per batch size
  double scale = 1.0;
};
ModelProfile MakeEmulatedProfile(const EmulatedModel& m);

// The router benchmarks' model: four subnets (80-90 %, 1-3 ms at batch 1),
// batch sizes 1..64, latencies times `scale`.
EmulatedModel RouterBenchModel(double scale);

// Writes <repo>/<model>/profile.json (creating the folders); returns `repo`.
absl::StatusOr<std::string> WriteEmulatedRepo(const std::string& repo, const EmulatedModel& m);

// n requests for `model`, [1, 28, 28] float inputs, labels i % 10.
LabelledRequests BenchInputs(int n, const std::string& model = "bench");

// Poisson arrivals at `qps` for `seconds`, seeded (deterministic per seed).
std::vector<TraceArrival> PoissonTrace(double qps, double seconds, uint64_t seed);

// A process's CPU time per query over one trial, in microseconds; < 0 (and a
// line on stderr naming `benchmark`) when a reading failed or nothing was
// served.
double CpuPerQuery(const char* benchmark, const absl::StatusOr<Nanos>& before,
                   const absl::StatusOr<Nanos>& after, int64_t served);

// "12.3 us", or "n/a" for a negative value.
std::string CpuText(double us_per_query);

}  // namespace superserve::bench

#endif  // SUPERSERVE_BENCH_BENCHMARKS_GRPC_EMULATED_FLEET_H_
