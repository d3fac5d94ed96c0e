// superserve-repro: SuperServe's simulated experiments (§6.2, §6.4, App. A.5)
// plus our bucket sweep and overload traces, in one process with a progress
// bar. Writes DIR/results.csv (one row per run) and DIR/timeline_*.csv; the
// tables and plots come from scripts/scheduling-report.py.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/baselines/baselines.h"
#include "bench/sim/simulator.h"
#include "bench/sim/trace_generators.h"
#include "common/init.h"
#include "common/model_profile.h"
#include "common/progress.h"
#include "policies/policy_factory.h"
#include "policies/policy_flags.h"

ABSL_FLAG(std::string, profile, "bench/data/paper_ofa_resnet50_profile.json", "ModelProfile JSON.");
ABSL_FLAG(std::string, out, "build/repro", "Output folder (must exist).");
ABSL_FLAG(double, duration_s, 30, "Length of every synthetic trace (the fault trace: 60 s).");
ABSL_FLAG(double, noise_cv, 0.03, "Execution-time noise CV of the emulated workers.");
ABSL_FLAG(double, dispatch_overhead_us, 500,
          "Simulated RPC + transfer time per batch, us (the policies' estimate before telemetry "
          "is --initial_overhead_us).");
ABSL_FLAG(uint64_t, seed, 1, "Base seed of traces and noise.");
ABSL_FLAG(std::string, only, "", "Run only this experiment (bursty, time-varying, policies, "
                                 "faults, buckets, overload, maf, ablation, seeds).");
ABSL_FLAG(bool, scale_to_profile, false,
          "Scale every arrival rate by C / 9446 q/s and every SLO by Lmax / 102.7 ms, where C is "
          "8 workers x the best throughput any tuple of --profile offers and Lmax its slowest "
          "tuple (9446 q/s and 102.7 ms are those of the paper-shaped profile), so that the same "
          "grid loads a different profile alike.");

namespace superserve {
namespace {

struct Cell {
  std::string experiment;
  std::string cell;
  std::function<std::vector<Nanos>()> make_trace;
  std::vector<std::string> policies;  // "clipper+:ID", "slackfit:K" or plain names
  int32_t workers = 8;
  double slo_ms = 36;
  std::vector<Nanos> failures;
  bool timeline = false;
  // Unset: the shared policy flags (the router's defaults), so that a
  // reproduced table describes what the router runs. The ablation pins
  // SuperServe's reading (heads whose slack fits no bucket dropped, unmeasured
  // tuples following the measured drift) and switches each back per policy
  // ("slackfit~fastest-tuple-drop", "~no-drift", "~design").
  std::optional<bool> drop_below_first_bucket;
  std::optional<bool> follow_drift;
};

std::vector<std::string> ClipperAll(const ModelProfile& p) {
  std::vector<std::string> v;
  for (const auto& s : p.subnets) v.push_back(absl::StrCat("clipper+:", s.id));
  return v;
}

// The longest synthetic trace, seconds of simulated time (a day).
constexpr double kMaxDurationS = 86400;

int Main(const PolicySpec& flags) {
  // A NaN, negative, zero, infinite or huge duration used to run all 99
  // cells on empty (or overflowed) traces and report success.
  if (const double d = absl::GetFlag(FLAGS_duration_s); !(d > 0) || d > kMaxDurationS) {
    std::fprintf(stderr, "superserve-repro: --duration_s=%g must be in (0, %g] seconds\n", d,
                 kMaxDurationS);
    return 2;
  }
  // Checked as a double: converted first, inf or 1e300 overflowed nanoseconds
  // (undefined behaviour) and was reported as -9.2e15 us.
  if (const double us = absl::GetFlag(FLAGS_dispatch_overhead_us);
      !(us >= 0) || us > ToMicros(kMaxQueryTimeout)) {
    std::fprintf(stderr, "superserve-repro: --dispatch_overhead_us=%g must be in [0, %g] us (a day)\n",
                 us, ToMicros(kMaxQueryTimeout));
    return 2;
  }
  auto profile = ModelProfile::LoadFile(absl::GetFlag(FLAGS_profile));
  if (!profile.ok()) {
    std::fprintf(stderr, "superserve-repro: %s\n", profile.status().ToString().c_str());
    return 1;
  }
  const Nanos dur = Seconds(absl::GetFlag(FLAGS_duration_s));
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  // Rate and SLO scales (1 for the paper-shaped profile).
  double capacity = 0;
  Nanos slowest = 0;
  for (const auto& sn : profile->subnets) {
    for (size_t b = 0; b < profile->batch_sizes.size(); ++b) {
      capacity = std::max(capacity, 8.0 * profile->batch_sizes[b] / ToSeconds(sn.latency[b]));
      slowest = std::max(slowest, sn.latency[b]);
    }
  }
  const bool scale = absl::GetFlag(FLAGS_scale_to_profile);
  const double rs = scale ? capacity / 9446.0 : 1.0;
  const double ss = scale ? ToMillis(slowest) / 102.7 : 1.0;
  std::fprintf(stderr,
               "superserve-repro: profile capacity %.0f q/s (8 workers), slowest tuple %.2f ms; "
               "rate scale %.4f, SLO scale %.4f\n",
               capacity, ToMillis(slowest), rs, ss);
  const std::string only = absl::GetFlag(FLAGS_only);
  std::vector<Cell> cells;
  // The default policy (PolicySpec().name) first, in every experiment but
  // the SlackFit ablation.
  const std::string def = PolicySpec().name;
  std::vector<std::string> main_policies = {def, "slackfit", "infaas"};
  for (const auto& c : ClipperAll(*profile)) main_policies.push_back(c);

  // §6.2.1 bursty grid: lambda_b = 1500 (Fig. 12), SLO 36 ms, 8 workers.
  for (double lv : {2950.0, 4900.0, 5550.0}) {
    for (double cv2 : {2.0, 4.0, 8.0}) {
      cells.push_back({"bursty", absl::StrFormat("lv=%.0f cv2=%.0f", lv, cv2),
                       [=] { return BurstyArrivals(1500 * rs, lv * rs, cv2, dur, seed); },
                       main_policies});
    }
  }
  // Ablation: each of SlackFit's fixes switched back to DESIGN.md's first
  // resolution, one at a time.
  for (double lv : {2950.0, 4900.0, 5550.0}) {
    for (double cv2 : {2.0, 4.0, 8.0}) {
      cells.push_back({"ablation", absl::StrFormat("lv=%.0f cv2=%.0f", lv, cv2),
                       [=] { return BurstyArrivals(1500 * rs, lv * rs, cv2, dur, seed); },
                       {"slackfit", "slackfit~accuracy-ties", "slackfit~fastest-tuple-drop",
                        "slackfit~no-drift", "infaas"}});
      cells.back().drop_below_first_bucket = true;
      cells.back().follow_drift = true;
    }
  }
  // Robustness: the heavy bursty cells with four more trace seeds.
  for (uint64_t extra = 1; extra <= 4; ++extra) {
    for (double lv : {4900.0, 5550.0}) {
      for (double cv2 : {2.0, 4.0, 8.0}) {
        cells.push_back({"seeds", absl::StrFormat("lv=%.0f cv2=%.0f seed=%d", lv, cv2,
                                                  static_cast<int>(seed + extra)),
                         [=] { return BurstyArrivals(1500 * rs, lv * rs, cv2, dur, seed + extra); },
                         {def, "slackfit", "infaas"}});
      }
    }
  }
  // §6.2.2 time-varying: lambda_1 = 2500 -> lambda_2 at tau, CV² = 8.
  for (double l2 : {4800.0, 6800.0, 7800.0}) {
    for (double tau : {250.0, 500.0, 5000.0}) {
      cells.push_back({"time-varying", absl::StrFormat("l2=%.0f tau=%.0f", l2, tau),
                       [=] {
                         return TimeVaryingArrivals(2500 * rs, l2 * rs, tau * rs, 8, Seconds(5), dur,
                                                    seed);
                       },
                       main_policies});
    }
  }
  // App. A.5 policy comparison: lambda = 1500 + 5550, CV² in {2, 4, 8}.
  for (double cv2 : {2.0, 4.0, 8.0}) {
    cells.push_back({"policies", absl::StrFormat("cv2=%.0f", cv2),
                     [=] { return BurstyArrivals(1500 * rs, 5550 * rs, cv2, dur, seed); },
                     {def, "slackfit", "maxbatch", "maxacc", "infaas"}});
  }
  // §6.4 faults: lambda = 3500, CV² = 2, 60 s, one of 8 workers fails every 12 s.
  {
    Cell c{"faults", "l=3500 cv2=2 fail@12/24/36/48 s",
           [=] { return GammaArrivals(3500 * rs, 2, Seconds(60), seed); },
           {def, "slackfit", "infaas", "maxbatch", "clipper+:1", "clipper+:3",
            "clipper+:5"}};
    c.failures = {Seconds(12), Seconds(24), Seconds(36), Seconds(48)};
    c.timeline = true;
    cells.push_back(c);
  }
  // Bucket sweep: K on every bursty cell and the heaviest time-varying cells.
  std::vector<std::string> ks;
  for (const std::string& name : {def, std::string("slackfit")}) {
    for (int k : {2, 4, 6, 7, 8, 9, 10, 12, 16, 24, 32, 64}) {
      ks.push_back(absl::StrCat(name, ":", k));
    }
  }
  for (double lv : {2950.0, 4900.0, 5550.0}) {
    for (double cv2 : {2.0, 4.0, 8.0}) {
      cells.push_back({"buckets", absl::StrFormat("bursty lv=%.0f cv2=%.0f", lv, cv2),
                       [=] { return BurstyArrivals(1500 * rs, lv * rs, cv2, dur, seed); }, ks});
    }
  }
  for (double tau : {500.0, 5000.0}) {
    cells.push_back({"buckets", absl::StrFormat("tv l2=7800 tau=%.0f", tau),
                     [=] {
                       return TimeVaryingArrivals(2500 * rs, 7800 * rs, tau * rs, 8, Seconds(5),
                                                  dur, seed);
                     },
                     ks});
  }
  // Deliberate overload: arrival rates above the fastest subnet's capacity.
  std::vector<std::string> over = {def, "slackfit", "infaas", "maxbatch"};
  for (double rate : {8500.0, 9500.0, 11000.0}) {
    cells.push_back({"overload", absl::StrFormat("poisson l=%.0f", rate),
                     [=] { return PoissonArrivals(rate * rs, dur, seed); }, over});
  }
  for (double lv : {7000.0, 8500.0}) {
    cells.push_back({"overload", absl::StrFormat("bursty lb=1500 lv=%.0f cv2=8", lv),
                     [=] { return BurstyArrivals(1500 * rs, lv * rs, 8, dur, seed); }, over});
  }
  cells.push_back({"overload", "tv 2500->11000 tau=5000",
                   [=] {
                     return TimeVaryingArrivals(2500 * rs, 11000 * rs, 5000 * rs, 8, Seconds(5),
                                                dur, seed);
                   },
                   over});
  // §6.3-shaped MAF (synthetic: diurnal swing + per-minute spikes, 24 h
  // compressed into 120 s) at the paper's 6400 q/s, and App. B's setting
  // (4000 q/s, 6 workers, SLO 30 ms).
  {
    std::vector<std::string> maf = main_policies;
    maf.push_back("maxbatch");
    maf.push_back("maxacc");
    for (double mean : {6400.0, 4000.0}) {
      Cell c{"maf", absl::StrFormat("synthetic mean=%.0f", mean),
             [=] {
               MafOptions o;
               o.mean_rate = mean * rs;
               o.duration = Seconds(120);
               o.seed = seed;
               return *MafArrivals(o);
             },
             maf};
      if (mean == 4000) {
        c.cell += " workers=6 slo=30";
        c.workers = 6;
        c.slo_ms = 30;
      }
      cells.push_back(c);
    }
  }
  int64_t total = 0;
  std::vector<std::string> experiments;
  for (const Cell& c : cells) {
    if (only.empty() || only == c.experiment) total += static_cast<int64_t>(c.policies.size());
    if (std::find(experiments.begin(), experiments.end(), c.experiment) == experiments.end()) {
      experiments.push_back(c.experiment);
    }
  }
  // An unknown --only used to run nothing and report success.
  if (!only.empty() && std::find(experiments.begin(), experiments.end(), only) == experiments.end()) {
    std::fprintf(stderr, "superserve-repro: --only=%s is not an experiment (known: %s)\n",
                 only.c_str(), absl::StrJoin(experiments, ", ").c_str());
    return 2;
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (FILE* meta = std::fopen((out + "/meta.txt").c_str(), "w")) {
    std::fprintf(meta,
                 "profile=%s\ncapacity_qps=%.1f\nslowest_ms=%.3f\nrate_scale=%.6f\n"
                 "slo_scale=%.6f\nduration_s=%g\n",
                 absl::GetFlag(FLAGS_profile).c_str(), capacity, ToMillis(slowest), rs, ss,
                 absl::GetFlag(FLAGS_duration_s));
    std::fclose(meta);
  }
  const std::string csv_path = out + "/results.csv";
  FILE* csv = std::fopen(csv_path.c_str(), "w");
  if (csv == nullptr) {
    std::fprintf(stderr, "superserve-repro: cannot write %s (does the folder exist?)\n",
                 csv_path.c_str());
    return 1;
  }
  std::fprintf(csv,
               "experiment,cell,policy,buckets,queries,slo_attainment,mean_accuracy,met,late,"
               "dropped,p99_latency_ms,throughput_qps,mean_batch,arrival_qps\n");
  ProgressBar progress("superserve-repro", total);
  for (const Cell& c : cells) {
    if (!only.empty() && only != c.experiment) continue;
    std::vector<Nanos> arrivals = c.make_trace();
    const double arrival_qps =
        arrivals.empty() ? 0 : arrivals.size() / ToSeconds(arrivals.back() + 1);
    for (const std::string& spec : c.policies) {
      std::string name = spec;
      // The shared policy flags (--buckets, --bucket_ties,
      // --initial_overhead_us, ...), then what the cell pins.
      PolicyConfig config = flags.config;
      if (c.drop_below_first_bucket) {
        config.baselines.slackfit_drop_below_first_bucket = *c.drop_below_first_bucket;
      }
      if (c.follow_drift) config.base.latency.unmeasured_follow_drift = *c.follow_drift;
      // "slackfit~MOD": one of SlackFit's options back at DESIGN.md's first
      // resolution (ablation); the row is reported under the full spec.
      std::string label;
      const size_t tilde = name.find('~');
      if (tilde != std::string::npos) {
        const std::string mod = name.substr(tilde + 1);
        label = name;
        name = name.substr(0, tilde);
        if (mod == "accuracy-ties") config.baselines.slackfit_ties_to_accuracy = true;
        if (mod == "fastest-tuple-drop") config.baselines.slackfit_drop_below_first_bucket = false;
        if (mod == "no-drift") config.base.latency.unmeasured_follow_drift = false;
      }
      size_t colon = spec.find(':');
      if (colon != std::string::npos) {
        name = spec.substr(0, colon);
        int v = std::stoi(spec.substr(colon + 1));
        if (name == "clipper+") config.fixed_subnet_id = v;
        else config.baselines.slackfit_buckets = v;
      }
      auto policy = MakePolicy(name, *profile, config);
      if (!policy.ok()) {
        std::fprintf(stderr, "superserve-repro: %s\n", policy.status().ToString().c_str());
        return 1;
      }
      SimulatorOptions o;
      o.workers = c.workers;
      o.slo = static_cast<Nanos>(static_cast<double>(Millis(c.slo_ms)) * ss);
      o.seed = seed + 7;
      o.noise_cv = absl::GetFlag(FLAGS_noise_cv);
      o.dispatch_overhead = Micros(absl::GetFlag(FLAGS_dispatch_overhead_us));
      o.worker_failures = c.failures;
      auto r = Simulate(*profile, arrivals, policy->get(), o);
      if (!r.ok()) {
        std::fprintf(stderr, "superserve-repro: %s\n", r.status().ToString().c_str());
        return 1;
      }
      std::fprintf(csv, "%s,%s,%s,%d,%lld,%.6f,%.4f,%lld,%lld,%lld,%.3f,%.1f,%.3f,%.1f\n",
                   c.experiment.c_str(), c.cell.c_str(),
                   label.empty() ? r->policy.c_str() : label.c_str(),
                   name.rfind("slackfit", 0) == 0 || name == def ? config.baselines.slackfit_buckets : 0,
                   static_cast<long long>(r->queries), r->slo_attainment(), r->mean_accuracy(),
                   static_cast<long long>(r->met), static_cast<long long>(r->late),
                   static_cast<long long>(r->dropped), ToMillis(r->p99_latency),
                   r->throughput_qps(), r->mean_batch(), arrival_qps);
      std::fflush(csv);
      if (c.timeline) {
        std::string file = out + "/timeline_" + c.experiment + "_" + r->policy + ".csv";
        auto s = WriteTimelineCsv(*r, o.timeline_bin, file);
        if (!s.ok()) std::fprintf(stderr, "superserve-repro: %s\n", s.ToString().c_str());
      }
      progress.Add(1, c.experiment + " " + c.cell);
    }
  }
  progress.Finish();
  std::fclose(csv);
  std::printf("superserve-repro: %lld runs -> %s\n", static_cast<long long>(total),
              csv_path.c_str());
  return 0;
}

}  // namespace
}  // namespace superserve

int main(int argc, char** argv) {
  superserve::RegisterBaselinePolicies();
  const std::vector<std::string> args = superserve::InitMain(
      argc, argv,
      "superserve-repro [--out DIR] [--duration-s S] [--only EXPERIMENT]\n\n"
      "Runs SuperServe's simulated experiments and our additions; writes DIR/results.csv.\n"
      "Every run starts from the policy flags shared with superserve-router and superserve-sim\n"
      "(--buckets, --bucket_ties, --initial_overhead_us, ...; --policy and\n"
      "--fixed_subnet are not used: each cell names its policies). The ablation pins\n"
      "drop_below_first_bucket=true and follow_drift=true (SuperServe's reading) and\n"
      "switches each back per policy, whatever those two flags say.\n"
      "--print-policy-config prints the flags' configuration.");
  if (args.size() > 1) {  // a stray word used to be ignored
    std::fprintf(stderr, "superserve-repro: unexpected argument '%s' (flags only; --help)\n",
                 args[1].c_str());
    return 2;
  }
  const superserve::PolicySpec flags = superserve::PolicySpecFromFlagsOrExit("superserve-repro");
  return superserve::Main(flags);
}
