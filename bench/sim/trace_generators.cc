#include "bench/sim/trace_generators.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace superserve {

std::vector<Nanos> PoissonArrivals(double rate, Nanos duration, uint64_t seed) {
  return GammaArrivals(rate, 1.0, duration, seed);
}

namespace {

// Gamma(shape = 1/cv2, scale = cv2) has mean 1 and CV² = cv2; multiplied by
// the current mean gap it gives one inter-arrival time.
class UnitGamma {
 public:
  UnitGamma(double cv2, uint64_t seed)
      : rng_(seed), gamma_(1.0 / cv2, cv2), exponential_(cv2 == 1.0) {}
  double Next() { return exponential_ ? exp_(rng_) : gamma_(rng_); }

 private:
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gamma_;
  std::exponential_distribution<double> exp_{1.0};
  bool exponential_;
};

}  // namespace

std::vector<Nanos> GammaArrivals(double rate, double cv2, Nanos duration, uint64_t seed) {
  std::vector<Nanos> out;
  // NaN or infinite inputs would never end the loop below (a zero or NaN gap).
  if (!(rate > 0) || !std::isfinite(rate) || !std::isfinite(cv2) || duration <= 0) return out;
  // Capped, so that an unchecked rate (callers bound rate x duration) fails
  // by the arrivals it produces rather than by one huge reservation.
  out.reserve(static_cast<size_t>(std::min(rate * ToSeconds(duration) * 1.05, kMaxTraceArrivals)) +
              16);
  UnitGamma g(cv2 <= 0 ? 1e-9 : cv2, seed);
  const double gap = kNanosPerSecond / rate;
  double t = 0;
  while (true) {
    t += gap * g.Next();
    if (t >= static_cast<double>(duration)) break;
    out.push_back(static_cast<Nanos>(t));
  }
  return out;
}

std::vector<Nanos> BurstyArrivals(double base_rate, double variant_rate, double cv2,
                                  Nanos duration, uint64_t seed) {
  std::vector<Nanos> base;
  if (base_rate > 0 && std::isfinite(base_rate)) {
    const double gap = kNanosPerSecond / base_rate;
    for (double t = gap / 2; t < static_cast<double>(duration); t += gap) {
      base.push_back(static_cast<Nanos>(t));
    }
  }
  std::vector<Nanos> variant = GammaArrivals(variant_rate, cv2, duration, seed);
  std::vector<Nanos> out(base.size() + variant.size());
  std::merge(base.begin(), base.end(), variant.begin(), variant.end(), out.begin());
  return out;
}

double TimeVaryingRate(double rate1, double rate2, double accel, Nanos hold, Nanos t) {
  if (t <= hold) return rate1;
  double moved = accel * ToSeconds(t - hold);
  if (rate2 >= rate1) return std::min(rate2, rate1 + moved);
  return std::max(rate2, rate1 - moved);
}

std::vector<Nanos> TimeVaryingArrivals(double rate1, double rate2, double accel, double cv2,
                                       Nanos hold, Nanos duration, uint64_t seed) {
  std::vector<Nanos> out;
  UnitGamma g(cv2 <= 0 ? 1e-9 : cv2, seed);
  double t = 0;
  while (true) {
    double rate = TimeVaryingRate(rate1, rate2, accel, hold, static_cast<Nanos>(t));
    if (!(rate > 0) || !std::isfinite(rate)) break;  // NaN or infinite: no gap
    t += kNanosPerSecond / rate * g.Next();
    if (t >= static_cast<double>(duration)) break;
    out.push_back(static_cast<Nanos>(t));
  }
  return out;
}

absl::StatusOr<std::vector<double>> ReadMafMinuteCounts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("MAF file ", path, ": cannot open"));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header = absl::StrSplit(line, ',');
  // HashOwner,HashApp,HashFunction,Trigger,1,...,1440
  int first = -1;
  for (int i = 0; i < static_cast<int>(header.size()); ++i) {
    if (header[i] == "1") {
      first = i;
      break;
    }
  }
  if (first < 0 || header.size() - first < 1440) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MAF file ", path, ": header lacks minute columns 1..1440 (expected the "
        "invocations_per_function_md.anon.dNN.csv format)"));
  }
  std::vector<double> counts(1440, 0.0);
  int64_t row = 1;
  while (std::getline(in, line)) {
    ++row;
    if (line.empty()) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (static_cast<int>(cells.size()) < first + 1440) {
      return absl::InvalidArgumentError(
          absl::StrCat("MAF file ", path, " line ", row, ": fewer than 1440 minute columns"));
    }
    for (int m = 0; m < 1440; ++m) {
      const double c = std::strtod(std::string(cells[first + m]).c_str(), nullptr);
      // A NaN or infinite count would make every minute's rate NaN or 0 gaps.
      if (!std::isfinite(c) || c < 0) {
        return absl::InvalidArgumentError(absl::StrCat("MAF file ", path, " line ", row, " minute ",
                                                       m + 1, ": count ", c,
                                                       " is not a finite number >= 0"));
      }
      counts[m] += c;
    }
  }
  return counts;
}

std::vector<double> SyntheticMafMinuteCounts(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(0.0, 0.08);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> counts(1440);
  for (int m = 0; m < 1440; ++m) {
    // Diurnal swing: trough at 04:00, peak at 16:00, peak/trough = 1.5;
    // short spikes in ~5 % of the minutes up to ~1.4x (the paper's MAF
    // trace peaks at 8750 q/s for a 6400 q/s mean).
    double diurnal = 1.0 + 0.2 * std::sin(2 * M_PI * (m - 600) / 1440.0);
    double spike = u(rng) < 0.05 ? 1.15 + 0.25 * u(rng) : 1.0;
    counts[m] = diurnal * noise(rng) * spike;
  }
  return counts;
}

std::vector<Nanos> ArrivalsFromBinCounts(const std::vector<double>& counts, double mean_rate,
                                         Nanos duration, uint64_t seed) {
  std::vector<Nanos> out;
  double total = 0;
  for (double c : counts) total += c;
  if (total <= 0 || counts.empty()) return out;
  const double bin = static_cast<double>(duration) / counts.size();
  const double scale = mean_rate * ToSeconds(duration) / total;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> exp(1.0);
  for (size_t i = 0; i < counts.size(); ++i) {
    double rate_per_ns = counts[i] * scale / bin;
    if (!(rate_per_ns > 0) || !std::isfinite(rate_per_ns)) continue;  // NaN: no gap
    double t = bin * i, end = bin * (i + 1);
    while (true) {
      t += exp(rng) / rate_per_ns;
      if (t >= end) break;
      out.push_back(static_cast<Nanos>(t));
    }
  }
  return out;
}

absl::StatusOr<std::vector<Nanos>> MafArrivals(const MafOptions& o) {
  std::vector<double> counts;
  if (o.file.empty()) {
    counts = SyntheticMafMinuteCounts(o.seed);
  } else {
    auto c = ReadMafMinuteCounts(o.file);
    if (!c.ok()) return c.status();
    counts = *std::move(c);
  }
  return ArrivalsFromBinCounts(counts, o.mean_rate, o.duration, o.seed + 1);
}

std::vector<double> ZipfShares(int32_t models, double s) {
  std::vector<double> p(std::max<int32_t>(0, models));
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::pow(static_cast<double>(i + 1), -s);
  for (double& x : p) x /= total;
  return p;
}

absl::StatusOr<Trace> MultiModelArrivals(const MultiModelTraceOptions& o) {
  // Named as the options, not as any tool's flags: superserve-trace checks its
  // flags first, and the Symphony experiments call this with rates of their own.
  if (o.models < 1 || o.models > kMaxTraceModels) {
    return absl::InvalidArgumentError(absl::StrCat("multi-model trace: models must be in [1, ",
                                                   kMaxTraceModels, "], got ", o.models));
  }
  if (!std::isfinite(o.rate) || o.rate <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi-model trace: rate must be finite and > 0 q/s, got ", o.rate));
  }
  if (o.duration <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi-model trace: duration must be > 0, got ", ToSeconds(o.duration), " s"));
  }
  if (!(o.cv2 > 0 && o.cv2 <= kMaxTraceCv2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "multi-model trace: the squared CV must be in (0, ", kMaxTraceCv2, "], got ", o.cv2));
  }
  if (!std::isfinite(o.zipf_s) || o.zipf_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "multi-model trace: the Zipf exponent must be finite and >= 0, got ", o.zipf_s));
  }
  const double expected = o.rate * ToSeconds(o.duration);
  if (expected > kMaxTraceArrivals) {
    return absl::InvalidArgumentError(absl::StrCat(
        "multi-model trace: rate ", o.rate, " q/s over ", ToSeconds(o.duration), " s is ", expected,
        " expected arrivals, more than the ", kMaxTraceArrivals, " a trace may hold"));
  }
  const std::vector<double> shares = ZipfShares(o.models, o.zipf_s);
  std::vector<std::pair<Nanos, int32_t>> all;
  for (int32_t m = 0; m < o.models; ++m) {
    // One seed per model, so that adding models leaves the others' streams.
    for (Nanos t : GammaArrivals(o.rate * shares[m], o.cv2, o.duration,
                                 o.seed * 1000003 + static_cast<uint64_t>(m))) {
      all.emplace_back(t, m);
    }
  }
  std::sort(all.begin(), all.end());
  Trace t;
  t.arrivals.reserve(all.size());
  t.model.reserve(all.size());
  for (const auto& [at, m] : all) {
    t.arrivals.push_back(at);
    t.model.push_back(m);
  }
  for (int32_t m = 0; m < o.models; ++m) t.model_names.push_back(absl::StrCat(o.prefix, m));
  return t;
}

}  // namespace superserve
