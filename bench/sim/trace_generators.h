#ifndef SUPERSERVE_BENCH_SIM_TRACE_GENERATORS_H_
#define SUPERSERVE_BENCH_SIM_TRACE_GENERATORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/sim/trace.h"
#include "common/time.h"

namespace superserve {

// Seeded arrival-trace generators (SuperServe §6.1/§6.2, InferLine's
// method). Every generator returns ascending arrival times in [0, duration).
// Callers validate their inputs against the limits below (superserve-trace
// checks its flags, MultiModelArrivals checks its options): a rate that is not
// finite and > 0 gives an empty trace, but a finite rate far too large simply
// runs out of memory.

// The most arrivals a trace may be expected to hold (rate x duration). Real
// traces are far smaller (the paper's: minutes at thousands of q/s, ~1e6
// arrivals); 1e8 arrivals are already 0.8 GB in memory and over 1 GB of CSV,
// and beyond it a mistyped rate or duration exhausts memory instead of failing.
constexpr double kMaxTraceArrivals = 1e8;
// The longest trace: ~3 years, far beyond any real one and well within the
// int64 nanoseconds of Nanos (which overflow past ~9.2e9 s).
constexpr double kMaxTraceDurationS = 1e8;
// The largest squared CV of gamma inter-arrivals (0 = deterministic gaps).
// Traces use 1 to 20 (Symphony's bursty case); at 1e4 the gamma shape is
// 1e-4 and most gaps already underflow to 0; far beyond it (1e300) every gap
// does, and the trace never advances.
constexpr double kMaxTraceCv2 = 1e4;

// Poisson process of `rate` q/s.
std::vector<Nanos> PoissonArrivals(double rate, Nanos duration, uint64_t seed);

// Renewal process with gamma inter-arrival times: mean 1/rate, squared
// coefficient of variation cv2 (cv2 = 1 is Poisson).
std::vector<Nanos> GammaArrivals(double rate, double cv2, Nanos duration, uint64_t seed);

// Bursty (§6.2.1): a deterministic base stream at base_rate (CV² = 0) merged
// with a gamma stream at variant_rate with CV² = cv2.
std::vector<Nanos> BurstyArrivals(double base_rate, double variant_rate, double cv2,
                                  Nanos duration, uint64_t seed);

// Time-varying (§6.2.2): gamma arrivals with CV² = cv2 whose mean rate holds
// at rate1 for `hold`, then moves linearly towards rate2 at `accel` q/s²
// and holds rate2 until `duration`.
std::vector<Nanos> TimeVaryingArrivals(double rate1, double rate2, double accel, double cv2,
                                       Nanos hold, Nanos duration, uint64_t seed);
// The instantaneous mean rate of that trace at time t.
double TimeVaryingRate(double rate1, double rate2, double accel, Nanos hold, Nanos t);

// Azure Functions (MAF) shaped: per-minute invocation counts of one day
// (1440 minutes), either summed over all functions of an
// `invocations_per_function_md.anon.dNN.csv` file or, without a file,
// synthetic (diurnal swing, per-minute noise and spikes). The day is
// compressed into `duration`, rescaled to `mean_rate`, and each minute's
// share is a Poisson process at that minute's rate.
struct MafOptions {
  std::string file;  // empty: synthetic
  double mean_rate = 4000;
  Nanos duration = Seconds(120);
  uint64_t seed = 1;
};
absl::StatusOr<std::vector<double>> ReadMafMinuteCounts(const std::string& path);
std::vector<double> SyntheticMafMinuteCounts(uint64_t seed);
absl::StatusOr<std::vector<Nanos>> MafArrivals(const MafOptions& options);
// Arrivals from per-bin counts: bin i covers [i, i+1) * duration / bins.
std::vector<Nanos> ArrivalsFromBinCounts(const std::vector<double>& counts, double mean_rate,
                                         Nanos duration, uint64_t seed);

// The most models of one trace: Symphony's experiments use 10 to 20; the bound
// keeps a mistyped count from allocating gigabytes of popularity shares.
constexpr int32_t kMaxTraceModels = 1000000;

// Many models (Symphony §3.4, §5): model i gets the share p_i ∝ 1 / (i+1)^zipf_s
// of `rate` (zipf_s = 0: equally popular) as its own gamma arrival process
// with squared CV `cv2` (1 = Poisson); the processes are merged. The trace's
// `model` column indexes model_names "<prefix>0" .. "<prefix>N-1".
// InvalidArgument unless 1 <= models <= kMaxTraceModels, rate and duration
// > 0 with rate x duration <= kMaxTraceArrivals, 0 < cv2 <= kMaxTraceCv2,
// zipf_s >= 0 (all finite).
struct MultiModelTraceOptions {
  int32_t models = 20;
  double rate = 4000;  // all models together, q/s
  double cv2 = 1.0;
  double zipf_s = 0.0;
  Nanos duration = Seconds(60);
  uint64_t seed = 1;
  std::string prefix = "m";
};
absl::StatusOr<Trace> MultiModelArrivals(const MultiModelTraceOptions& options);
// The popularity shares p_i (sum 1).
std::vector<double> ZipfShares(int32_t models, double s);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_TRACE_GENERATORS_H_
