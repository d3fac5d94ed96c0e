#include "bench/sim/scheduling_cases.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "absl/strings/str_format.h"
#include "bench/sim/trace_generators.h"

namespace superserve {
namespace {

constexpr double kMinL1Ms = 0.5;
constexpr double kMaxL1Ms = 50;
constexpr double kMaxLatencyMs = 500;

double LogUniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  return std::exp(u(rng));
}

std::vector<int32_t> BatchSet(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double kind = u(rng);
  std::vector<int32_t> sizes;
  if (kind < 0.25) {  // powers of two, as most profilers write them
    const int32_t max = 1 << std::uniform_int_distribution<int>(3, 7)(rng);
    for (int32_t b = 1; b <= max; b *= 2) sizes.push_back(b);
  } else if (kind < 0.5) {  // every size (Symphony's profiles)
    const int32_t max = std::uniform_int_distribution<int32_t>(8, 64)(rng);
    for (int32_t b = 1; b <= max; ++b) sizes.push_back(b);
  } else {  // an arbitrary increasing set
    const int32_t max = std::uniform_int_distribution<int32_t>(6, 200)(rng);
    std::set<int32_t> s{1, max};
    const int extra = std::uniform_int_distribution<int>(2, 8)(rng);
    std::uniform_int_distribution<int32_t> pick(2, max - 1);
    for (int i = 0; i < extra; ++i) s.insert(pick(rng));
    sizes.assign(s.begin(), s.end());
  }
  return sizes;
}

int SubnetCount(std::mt19937_64& rng) {
  const int bucket = std::uniform_int_distribution<int>(0, 3)(rng);
  switch (bucket) {
    case 0: return 1;
    case 1: return std::uniform_int_distribution<int>(2, 5)(rng);
    case 2: return std::uniform_int_distribution<int>(6, 20)(rng);
    default: return static_cast<int>(std::lround(LogUniform(rng, 21, 100)));
  }
}

ModelProfile MakeProfile(std::mt19937_64& rng, CaseShape shape, uint64_t seed) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  ModelProfile p;
  p.batch_sizes = BatchSet(rng);
  const int subnets = SubnetCount(rng);
  const double l1 = LogUniform(rng, kMinL1Ms, kMaxL1Ms);
  const double acc0 = 55 + 25 * u(rng);
  const double span = 1 + 19 * u(rng);
  const double curve = 0.5 + 2.5 * u(rng);
  const double grow = 0.3 + 4 * u(rng);
  const bool irregular = shape == CaseShape::kIrregular;
  const bool flat = shape == CaseShape::kGpuLike || (irregular && u(rng) < 0.5);
  // Per-query share of the batch-1 latency: small on a GPU, most of it on a CPU.
  const double per_query = flat ? 0.005 + 0.06 * u(rng) : 0.6 + 0.35 * u(rng);
  // Saturation (GPU-like and irregular): past this batch size each further
  // query costs `saturated` times more.
  int32_t knee = p.batch_sizes.back() + 1;
  double saturated = 1;
  if (shape != CaseShape::kCpuLike && p.batch_sizes.size() > 2 && u(rng) < 0.6) {
    knee = p.batch_sizes[std::uniform_int_distribution<size_t>(1, p.batch_sizes.size() - 2)(rng)];
    saturated = 3 + 12 * u(rng);
  }
  for (int i = 0; i < subnets; ++i) {
    const double x = subnets == 1 ? 1.0 : static_cast<double>(i) / (subnets - 1);
    const double f = 1 + grow * std::pow(x, curve);
    SubnetProfile s;
    s.id = i;
    s.accuracy = acc0 + span * x;
    // Measured rows are not monotone in accuracy: a subnet may be slower
    // than a more accurate one.
    const double row = irregular ? 0.85 + 0.3 * u(rng) : 1.0;
    const double alpha = l1 * per_query * f * row;
    const double beta = l1 * (1 - per_query) * f * row;
    double prev_ms = 0;
    for (size_t bi = 0; bi < p.batch_sizes.size(); ++bi) {
      const int32_t b = p.batch_sizes[bi];
      double ms = beta + alpha * std::min(b, knee) + alpha * saturated * std::max(0, b - knee);
      // A batch size that costs more per query than the one below it.
      if (irregular && bi > 0 && u(rng) < 0.15) {
        const double below = prev_ms / p.batch_sizes[bi - 1];
        ms = std::max(ms, below * b * (1.05 + 0.25 * u(rng)));
      }
      ms = std::max(ms, prev_ms);  // the profile rule: non-decreasing in batch
      prev_ms = ms;
      s.latency.push_back(Micros(1000.0 * ms));
    }
    p.subnets.push_back(std::move(s));
  }
  // The fastest batch 1 no faster than kMinL1Ms (measured rows can scale a
  // subnet below the drawn one).
  Nanos fastest = p.subnets[0].latency[0];
  for (const auto& s : p.subnets) fastest = std::min(fastest, s.latency[0]);
  if (fastest < Millis(kMinL1Ms)) {
    const double up = static_cast<double>(Millis(kMinL1Ms)) / static_cast<double>(fastest);
    for (auto& s : p.subnets) {
      for (Nanos& l : s.latency) l = static_cast<Nanos>(std::ceil(static_cast<double>(l) * up));
    }
  }
  // No latency above kMaxLatencyMs: drop the largest batch sizes past it.
  size_t keep = p.batch_sizes.size();
  while (keep > 1) {
    Nanos worst = 0;
    for (const auto& s : p.subnets) worst = std::max(worst, s.latency[keep - 1]);
    if (worst <= Millis(kMaxLatencyMs)) break;
    --keep;
  }
  p.batch_sizes.resize(keep);
  for (auto& s : p.subnets) s.latency.resize(keep);
  p.model = absl::StrFormat("%s-%d-%d", CaseShapeName(shape), subnets, seed);
  return p;
}

std::vector<Nanos> MakeArrivals(std::mt19937_64& rng, CaseTrace kind, double rate,
                                Nanos duration, Nanos slo, uint64_t seed, std::string* what) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  switch (kind) {
    case CaseTrace::kPoisson:
      *what = "poisson";
      return PoissonArrivals(rate, duration, seed);
    case CaseTrace::kGamma: {
      const double cv2 = 1 + 7 * u(rng);
      *what = absl::StrFormat("gamma cv2=%.1f", cv2);
      return GammaArrivals(rate, cv2, duration, seed);
    }
    case CaseTrace::kOnOff: {
      // Bins a few SLOs wide, on with probability `duty`, off carrying
      // `floor` of an on bin's rate.
      const double duty = 0.2 + 0.5 * u(rng);
      const double floor = 0.1 * u(rng);
      const double bin = std::max(2.0, 3 + 20 * u(rng)) * static_cast<double>(slo);
      const int bins = std::max(4, static_cast<int>(static_cast<double>(duration) / bin));
      std::vector<double> counts(bins);
      for (double& c : counts) c = u(rng) < duty ? 1.0 : floor;
      *what = absl::StrFormat("on/off duty=%.2f", duty);
      return ArrivalsFromBinCounts(counts, rate, duration, seed);
    }
    case CaseTrace::kRamp: {
      // From `low` to `high` of the mean and back, in 40 bins.
      const double low = 0.2 + 0.5 * u(rng);
      const double high = 2 - low;
      std::vector<double> counts(40);
      for (int i = 0; i < 40; ++i) {
        const double t = i < 20 ? i / 19.0 : (39 - i) / 19.0;
        counts[i] = low + (high - low) * t;
      }
      *what = absl::StrFormat("ramp %.1f-%.1fx", low, high);
      return ArrivalsFromBinCounts(counts, rate, duration, seed);
    }
    case CaseTrace::kGaps: {
      // Poisson with silent gaps of 5-30 SLOs (the rest carries the mean).
      const int bins = 50;
      std::vector<double> counts(bins, 1.0);
      const double gap_share = 0.1 + 0.3 * u(rng);
      for (double& c : counts) {
        if (u(rng) < gap_share) c = 0;
      }
      counts[0] = 1.0;
      *what = absl::StrFormat("gaps %.0f%%", 100 * gap_share);
      return ArrivalsFromBinCounts(counts, rate, duration, seed);
    }
  }
  return {};
}

}  // namespace

const char* CaseShapeName(CaseShape s) {
  switch (s) {
    case CaseShape::kCpuLike: return "cpu";
    case CaseShape::kGpuLike: return "gpu";
    case CaseShape::kIrregular: return "irregular";
  }
  return "?";
}

const char* CaseTraceName(CaseTrace t) {
  switch (t) {
    case CaseTrace::kPoisson: return "poisson";
    case CaseTrace::kGamma: return "gamma";
    case CaseTrace::kOnOff: return "onoff";
    case CaseTrace::kRamp: return "ramp";
    case CaseTrace::kGaps: return "gaps";
  }
  return "?";
}

double SubnetCapacity(const ModelProfile& p, int subnet_index, int32_t workers, Nanos slo,
                      Nanos overhead) {
  double best = 0;
  const SubnetProfile& s = p.subnets[subnet_index];
  for (size_t bi = 0; bi < p.batch_sizes.size(); ++bi) {
    if (s.latency[bi] + overhead > slo) break;
    best = std::max(best, p.batch_sizes[bi] * 1e9 / static_cast<double>(s.latency[bi] + overhead));
  }
  return best * workers;
}

double FastestCapacity(const ModelProfile& p, int32_t workers, Nanos slo, Nanos overhead,
                       int* subnet_index) {
  double best = 0;
  int which = 0;
  for (int i = 0; i < static_cast<int>(p.subnets.size()); ++i) {
    const double c = SubnetCapacity(p, i, workers, slo, overhead);
    if (c > best) {
      best = c;
      which = i;
    }
  }
  if (subnet_index != nullptr) *subnet_index = which;
  return best;
}

SchedulingCase MakeSchedulingCase(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  SchedulingCase c;
  c.seed = seed;
  c.shape = static_cast<CaseShape>(std::uniform_int_distribution<int>(0, 2)(rng));
  c.trace = static_cast<CaseTrace>(std::uniform_int_distribution<int>(0, 4)(rng));
  c.profile = MakeProfile(rng, c.shape, seed);
  Nanos l1 = c.profile.subnets[0].latency[0];
  for (const auto& s : c.profile.subnets) l1 = std::min(l1, s.latency[0]);
  constexpr int32_t kWorkers[] = {1, 2, 4, 8, 16};
  c.sim.workers = kWorkers[std::uniform_int_distribution<int>(0, 4)(rng)];
  c.sim.seed = seed;
  c.sim.noise_cv = 0.03;
  c.sim.dispatch_overhead = static_cast<Nanos>(LogUniform(rng, 50e3, 1e6));
  const double slo_factor = LogUniform(rng, 1.5, 20);
  c.sim.slo = std::max(static_cast<Nanos>(slo_factor * static_cast<double>(l1)),
                       l1 + l1 / 2 + c.sim.dispatch_overhead);
  c.sim.timeline = false;
  const double capacity =
      FastestCapacity(c.profile, c.sim.workers, c.sim.slo, c.sim.dispatch_overhead);
  c.load = u(rng) < 0.6 ? 0.3 + 0.7 * u(rng) : 1.0 + 2.0 * u(rng);
  const double rate = c.load * capacity;
  const double queries = 4000 + 16000 * u(rng);
  // Long enough for 20 SLOs where that keeps the trace under 40,000 queries.
  const Nanos duration = std::max(Seconds(queries / rate),
                                  std::min<Nanos>(20 * c.sim.slo, Seconds(40000 / rate)));
  std::string what;
  c.arrivals = MakeArrivals(rng, c.trace, rate, duration, c.sim.slo, seed, &what);
  c.label = absl::StrFormat(
      "seed=%d %s S=%zu B=%zu(max %d) l1=%.2fms slo=%.1fms(x%.1f) w=%d ovh=%.0fus %s "
      "load=%.2f (%.0f q/s, %zu queries)",
      seed, CaseShapeName(c.shape), c.profile.subnets.size(), c.profile.batch_sizes.size(),
      c.profile.max_batch(), ToMillis(l1), ToMillis(c.sim.slo),
      static_cast<double>(c.sim.slo) / static_cast<double>(l1), c.sim.workers,
      ToMicros(c.sim.dispatch_overhead), what, c.load, rate, c.arrivals.size());
  return c;
}

}  // namespace superserve
