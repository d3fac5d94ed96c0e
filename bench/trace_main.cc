// superserve-trace KIND --out FILE: writes a seeded arrival trace as CSV
// (header arrival_us); see --help.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
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

int main(int argc, char** argv) {
  auto args = superserve::InitMain(
      argc, argv,
      "superserve-trace bursty|time-varying|poisson|maf|multi --out FILE [flags]\n\nWrites a "
      "seeded arrival trace (CSV, header arrival_us) for superserve-sim and the load generator. "
      "multi: --models N models sharing --rate, each its own gamma process (--model_cv2), "
      "popularity equal or Zipf (--zipf s); adds the model column.");
  using namespace superserve;
  if (args.size() < 2 || absl::GetFlag(FLAGS_out).empty()) {
    std::fprintf(stderr, "superserve-trace: need KIND and --out (see --help)\n");
    return 2;
  }
  const std::string kind = args[1];
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
