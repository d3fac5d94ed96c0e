#ifndef SUPERSERVE_BENCH_SIM_SYMPHONY_CASES_H_
#define SUPERSERVE_BENCH_SIM_SYMPHONY_CASES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/sim/simulator.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "policies/policy.h"

namespace superserve {

// A single-subnet profile with Symphony's linear latency ℓ(b) = α·b + β for
// every batch size 1..max_batch (Symphony batches any size; a profile file
// states the same in its linear form, bench/data/resnet50-linear.profile.json).
// With `powers_of_two`, only 1, 2, 4, .. max_batch (a batch pads up to the
// next one).
ModelProfile LinearProfile(const std::string& name, double alpha_ms, double beta_ms,
                           int32_t max_batch, bool powers_of_two = false);

// `profile` with only its batch sizes that are powers of two (and their
// latencies): the same model profiled as many tools do, a batch padding up.
ModelProfile PowersOfTwoOnly(const ModelProfile& profile);

// The least-squares line ℓ(b) = α·b + β (ms) through a one-subnet profile's
// latencies (its linear form exactly, when it states one).
struct LinearFit {
  double alpha_ms = 0;
  double beta_ms = 0;
};
LinearFit FitLinear(const ModelProfile& profile);

// Symphony §3.3 / Table 2's analysis for N workers, requests at a constant
// gap: the batch and throughput N·b / ℓ(b) of staggered execution (worst
// queueing ℓ(b)/N: b = ⌊(SLO/(1 + 1/N) − β)/α⌋) and without coordination
// (worst queueing ℓ(b): b = ⌊(SLO/2 − β)/α⌋).
struct AnalyticBound {
  int32_t batch = 0;
  double throughput = 0;  // q/s
};
AnalyticBound StaggeredBound(double alpha_ms, double beta_ms, double slo_ms, int32_t workers);
AnalyticBound UncoordinatedBound(double alpha_ms, double beta_ms, double slo_ms, int32_t workers);

// One multi-model workload: `models` copies of `profile` (renamed m0..),
// arrivals split by Zipf(zipf_s) popularity, each model a gamma process with
// squared CV `cv2`, all with SLO `slo`.
struct Workload {
  ModelProfile profile;
  int32_t models = 1;
  double zipf_s = 0;
  double cv2 = 1;
  Nanos slo = Millis(25);
  Nanos duration = Seconds(10);
  uint64_t seed = 1;
  SimulatorOptions sim;  // workers, dispatch overhead, noise (slo is taken from above)
};

// Builds the policy for one model of a workload.
using PolicyBuilder = std::function<std::unique_ptr<Policy>(const ModelProfile&)>;

// Simulates `workload` at total Poisson/gamma `rate` with one policy per model.
absl::StatusOr<SimulationResult> RunWorkload(const Workload& workload, double rate,
                                             const PolicyBuilder& policy);

// Goodput as Symphony measures it: the largest rate whose attainment is
// >= `target` (binary search; rates above `hint` are probed by growing 1.5x,
// at most 8 times; at most kMaxGoodputSteps bisection steps). Returns the
// rate (0 when even the lowest rate tried misses the target) and, in
// *at_goodput, that run's result; InvalidArgument for a hint that is not finite.
constexpr int kMaxGoodputSteps = 64;
absl::StatusOr<double> Goodput(const Workload& workload, const PolicyBuilder& policy,
                               double hint, double target = 0.99,
                               SimulationResult* at_goodput = nullptr);

// Issue 19, item 6: twelve single-subnet workloads with a strong batching
// effect, seeded. Cases 1-6: a LinearProfile with α from 0.2 to 1.5 ms per
// query, β/α from 4 to 40, every batch size 1-64 or powers of two; 7-9
// CPU-shaped, 10-12 GPU-shaped (ShapedProfile, one subnet, batches 2^k).
// 4 or 8 workers, SLO 1.5-3 × ℓ(16), noise CV 0.03; duration, seed and
// dispatch overhead from `base`.
struct SingleSubnetCase {
  std::string label;  // e.g. "ℓ(b) = 0.66·b + 6.95 ms", "gpu-shaped"
  bool padded = false;  // batch sizes are powers of two: a batch pads up
  Workload workload;
};
std::vector<SingleSubnetCase> SingleSubnetCases(const Workload& base);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_SYMPHONY_CASES_H_
