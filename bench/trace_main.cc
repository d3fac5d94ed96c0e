// superserve-trace KIND --out FILE: writes a seeded arrival trace as CSV
// (header arrival_us); see --help.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "bench/sim/trace.h"
#include "bench/sim/trace_generators.h"
#include "common/init.h"
#include "common/json_writer.h"

ABSL_FLAG(std::string, out, "", "Output CSV (required).");
ABSL_FLAG(double, duration_s, 60, "Trace length in seconds.");
ABSL_FLAG(uint64_t, seed, 1, "Seed.");
ABSL_FLAG(double, rate, 4000, "poisson: mean rate (q/s); maf: target mean rate.");
ABSL_FLAG(double, base_rate, 1500, "bursty: deterministic base rate lambda_b (q/s).");
ABSL_FLAG(double, variant_rate, 5550, "bursty: gamma variant rate lambda_v (q/s).");
ABSL_FLAG(double, cv2, 2, "bursty / time-varying: squared CV of the gamma inter-arrivals.");
ABSL_FLAG(double, rate1, 2500, "time-varying: starting rate lambda_1 (q/s).");
ABSL_FLAG(double, rate2, 6800, "time-varying: final rate lambda_2 (q/s).");
ABSL_FLAG(double, accel, 500, "time-varying: acceleration tau (q/s^2).");
ABSL_FLAG(double, hold_s, 10, "time-varying: seconds at lambda_1 before accelerating.");
ABSL_FLAG(std::string, maf_file, "",
          "maf: invocations_per_function_md.anon.dNN.csv to replay (empty = synthetic).");
ABSL_FLAG(int32_t, models, 20, "multi: number of models.");
ABSL_FLAG(double, zipf, 0, "multi: Zipf popularity exponent s (0 = equally popular).");
ABSL_FLAG(double, model_cv2, 1,
          "multi: squared CV of each model's gamma inter-arrivals (1 = Poisson; Symphony's "
          "bursty case: 1/0.05 = 20).");
ABSL_FLAG(bool, json, false, "End with one JSON object on the last line.");

namespace superserve {
namespace {

// Arrivals are whole nanoseconds: a higher rate than one per nanosecond only
// piles arrivals onto the same instants.
constexpr double kMaxRate = 1e9;

// "" when `value` is finite and in [lo, hi] ((lo, hi] when lo_open; hi
// INFINITY: no upper end), else the usage error naming the flag, its value
// and the range.
std::string OutOfRange(const char* flag, double value, double lo, double hi, bool lo_open = false) {
  if (std::isfinite(value) && (lo_open ? value > lo : value >= lo) && value <= hi) return "";
  if (std::isinf(hi)) {
    return absl::StrFormat("--%s %g: must be a finite number %s %g", flag, value,
                           lo_open ? ">" : ">=", lo);
  }
  return absl::StrFormat("--%s %g: must be a finite number in %s%g, %g]", flag, value,
                         lo_open ? "(" : "[", lo, hi);
}

// The usage error of the first flag of `kind` that is out of range, or of an
// expected trace (rates x --duration_s) beyond kMaxTraceArrivals; "" when
// every flag `kind` reads is fine. Unknown kinds are left to the caller.
std::string CheckFlags(const std::string& kind) {
  const std::vector<std::string> kinds = {"bursty", "time-varying", "poisson", "maf", "multi"};
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) return "";
  std::vector<std::string> errors = {
      OutOfRange("duration_s", absl::GetFlag(FLAGS_duration_s), 1e-9, kMaxTraceDurationS)};
  double peak_rate = 0;  // an upper bound of the trace's mean rate
  std::string rate_flags;
  if (kind == "poisson" || kind == "maf" || kind == "multi") {
    errors.push_back(OutOfRange("rate", absl::GetFlag(FLAGS_rate), 0, kMaxRate, true));
    peak_rate = absl::GetFlag(FLAGS_rate);
    rate_flags = "--rate";
  }
  if (kind == "multi") {
    errors.push_back(OutOfRange("models", absl::GetFlag(FLAGS_models), 1, kMaxTraceModels));
    errors.push_back(
        OutOfRange("model_cv2", absl::GetFlag(FLAGS_model_cv2), 0, kMaxTraceCv2, true));
    errors.push_back(OutOfRange("zipf", absl::GetFlag(FLAGS_zipf), 0, INFINITY));
  }
  if (kind == "bursty") {
    const double base = absl::GetFlag(FLAGS_base_rate), variant = absl::GetFlag(FLAGS_variant_rate);
    errors.push_back(OutOfRange("base_rate", base, 0, kMaxRate));
    errors.push_back(OutOfRange("variant_rate", variant, 0, kMaxRate));
    if (base == 0 && variant == 0) errors.push_back("--base_rate and --variant_rate are both 0");
    peak_rate = base + variant;
    rate_flags = "(--base_rate + --variant_rate)";
  }
  if (kind == "time-varying") {
    const double rate1 = absl::GetFlag(FLAGS_rate1), rate2 = absl::GetFlag(FLAGS_rate2);
    errors.push_back(OutOfRange("rate1", rate1, 0, kMaxRate, true));
    errors.push_back(OutOfRange("rate2", rate2, 0, kMaxRate));
    errors.push_back(OutOfRange("accel", absl::GetFlag(FLAGS_accel), 0, INFINITY));
    errors.push_back(OutOfRange("hold_s", absl::GetFlag(FLAGS_hold_s), 0, kMaxTraceDurationS));
    peak_rate = std::max(rate1, rate2);
    rate_flags = "max(--rate1, --rate2)";
  }
  if (kind == "bursty" || kind == "time-varying") {
    errors.push_back(OutOfRange("cv2", absl::GetFlag(FLAGS_cv2), 0, kMaxTraceCv2));
  }
  for (const std::string& e : errors) {
    if (!e.empty()) return e;
  }
  const double expected = peak_rate * absl::GetFlag(FLAGS_duration_s);
  if (expected > kMaxTraceArrivals) {
    return absl::StrFormat(
        "%s %g q/s x --duration_s %g s is %g expected arrivals, more than the %g a trace may "
        "hold (bench/sim/trace_generators.h: kMaxTraceArrivals); lower the rate or the duration",
        rate_flags, peak_rate, absl::GetFlag(FLAGS_duration_s), expected, kMaxTraceArrivals);
  }
  return "";
}

}  // namespace
}  // namespace superserve

int main(int argc, char** argv) {
  auto args = superserve::InitMain(
      argc, argv,
      "superserve-trace bursty|time-varying|poisson|maf|multi --out FILE [flags]\n\nWrites a "
      "seeded arrival trace (CSV, header arrival_us) for superserve-sim and the load generator. "
      "multi: --models N models sharing --rate, each its own gamma process (--model_cv2), "
      "popularity equal or Zipf (--zipf s); adds the model column. A flag out of range, or a "
      "trace of more than 1e8 expected arrivals (rate x --duration_s), is a usage error (exit 2).");
  using namespace superserve;
  if (args.size() < 2 || absl::GetFlag(FLAGS_out).empty()) {
    std::fprintf(stderr, "superserve-trace: need KIND and --out (see --help)\n");
    return 2;
  }
  const std::string kind = args[1];
  if (const std::string e = CheckFlags(kind); !e.empty()) {
    std::fprintf(stderr, "superserve-trace: %s\n", e.c_str());
    return 2;
  }
  const Nanos duration = Seconds(absl::GetFlag(FLAGS_duration_s));
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  Trace t;
  if (kind == "bursty") {
    t.arrivals = BurstyArrivals(absl::GetFlag(FLAGS_base_rate), absl::GetFlag(FLAGS_variant_rate),
                                absl::GetFlag(FLAGS_cv2), duration, seed);
  } else if (kind == "time-varying") {
    t.arrivals = TimeVaryingArrivals(absl::GetFlag(FLAGS_rate1), absl::GetFlag(FLAGS_rate2),
                                     absl::GetFlag(FLAGS_accel), absl::GetFlag(FLAGS_cv2),
                                     Seconds(absl::GetFlag(FLAGS_hold_s)), duration, seed);
  } else if (kind == "poisson") {
    t.arrivals = PoissonArrivals(absl::GetFlag(FLAGS_rate), duration, seed);
  } else if (kind == "multi") {
    MultiModelTraceOptions o;
    o.models = absl::GetFlag(FLAGS_models);
    o.rate = absl::GetFlag(FLAGS_rate);
    o.cv2 = absl::GetFlag(FLAGS_model_cv2);
    o.zipf_s = absl::GetFlag(FLAGS_zipf);
    o.duration = duration;
    o.seed = seed;
    auto m = MultiModelArrivals(o);
    if (!m.ok()) {
      std::fprintf(stderr, "superserve-trace: %s\n", m.status().ToString().c_str());
      return 2;
    }
    t = *std::move(m);
  } else if (kind == "maf") {
    MafOptions o;
    o.file = absl::GetFlag(FLAGS_maf_file);
    o.mean_rate = absl::GetFlag(FLAGS_rate);
    o.duration = duration;
    o.seed = seed;
    auto a = MafArrivals(o);
    if (!a.ok()) {
      std::fprintf(stderr, "superserve-trace: %s\n", a.status().ToString().c_str());
      return 1;
    }
    t.arrivals = *std::move(a);
  } else {
    std::fprintf(stderr, "superserve-trace: unknown KIND \"%s\" (see --help)\n", kind.c_str());
    return 2;
  }
  auto s = t.WriteCsv(absl::GetFlag(FLAGS_out));
  if (!s.ok()) {
    std::fprintf(stderr, "superserve-trace: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%s: %zu arrivals over %.1f s, mean %.1f q/s, inter-arrival CV^2 %.3f -> %s\n",
              kind.c_str(), t.size(), ToSeconds(duration),
              static_cast<double>(t.size()) / ToSeconds(duration), InterArrivalCv2(t.arrivals),
              absl::GetFlag(FLAGS_out).c_str());
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", JsonWriter()
                            .Add("kind", kind)
                            .Add("arrivals", static_cast<int64_t>(t.size()))
                            .Add("mean_rate_qps", static_cast<double>(t.size()) / ToSeconds(duration))
                            .Add("interarrival_cv2", InterArrivalCv2(t.arrivals))
                            .ToString()
                            .c_str());
  }
  return 0;
}
