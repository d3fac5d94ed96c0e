#ifndef SUPERSERVE_BENCH_SIM_SCHEDULING_CASES_H_
#define SUPERSERVE_BENCH_SIM_SCHEDULING_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/sim/simulator.h"
#include "common/model_profile.h"
#include "common/time.h"

namespace superserve {

// Generated scheduling cases (a profile, a trace, workers and an SLO) for
// judging policies on data nobody tuned them on. Every case is a pure
// function of its seed. Two disjoint seed sets: kTuneSeeds, which a
// developer may look at while designing a policy, and kHeldOutSeeds, which
// only CI runs (tests/bench/default_policy_property_test.cc); a change to a
// policy's defaults is judged on the held-out set.
inline constexpr uint64_t kTuneSeedBase = 1;
inline constexpr uint64_t kHeldOutSeedBase = 1000003;

// Profile shapes, as users' tools measure them.
enum class CaseShape {
  kCpuLike,    // latency linear in batch (a small fixed cost)
  kGpuLike,    // flat: a large fixed cost, a small per-query one
  kIrregular,  // measured: a batch costing more per query than the one below
               // it, a subnet slower than a more accurate one at some batch
               // sizes, saturation past a knee
};
const char* CaseShapeName(CaseShape s);

enum class CaseTrace { kPoisson, kGamma, kOnOff, kRamp, kGaps };
const char* CaseTraceName(CaseTrace t);

struct SchedulingCase {
  uint64_t seed = 0;
  CaseShape shape = CaseShape::kCpuLike;
  CaseTrace trace = CaseTrace::kPoisson;
  ModelProfile profile;
  std::vector<Nanos> arrivals;
  SimulatorOptions sim;  // workers, slo, noise, overhead, seed
  // Mean offered load over the fastest subnet's capacity at this SLO
  // (FastestCapacity): 0.3 to 3.
  double load = 0;
  std::string label;  // one line describing the case
};

// The case of `seed`:
//   profile: 1 to 100 subnets (a quarter of the cases have one), batch sets
//     that are not powers of two (every size, or a random increasing set),
//     the fastest batch-1 latency 0.5 to 50 ms and no latency above 500 ms;
//   SLO: 1.5x to 20x the fastest batch-1 latency (log-uniform), and at least
//     that latency plus the dispatch overhead;
//   workers: 1 to 16;
//   trace: Poisson, gamma (CV^2 1-8), on/off bursts, a ramp, or Poisson with
//     silent gaps, at a mean of 0.3x to 3x the fastest subnet's capacity
//     (two fifths of the cases above 1x), about 4,000 to 20,000 queries.
SchedulingCase MakeSchedulingCase(uint64_t seed);

// Queries per second `workers` workers serve with the highest-throughput
// batch of subnet `subnet_index` whose latency plus `overhead` fits `slo`
// (0 if none fits).
double SubnetCapacity(const ModelProfile& p, int subnet_index, int32_t workers, Nanos slo,
                      Nanos overhead);
// The highest SubnetCapacity over the subnets, and which subnet has it.
double FastestCapacity(const ModelProfile& p, int32_t workers, Nanos slo, Nanos overhead,
                       int* subnet_index = nullptr);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_SCHEDULING_CASES_H_
