// `faults`: SuperServe Fig. 11a live (issue 15, docs/faults.md). One router
// and --workers emulated workers, each a process of its own, on 127.0.0.1;
// this process is the open-loop client (gamma arrivals, CV² 2, at
// --load_fraction of the capacity measured first; half the queries over
// InferStream, half unary). Variants, each on a fresh cluster:
//   none:    no fault (the baseline of the same run)
//   sigkill: SIGKILL one worker every --kill_every_s until half remain
//   sigstop: the same with SIGSTOP (hung; woken only after the run)
//   restart: one router restart at half time (--restart_signal)
// Per variant: queries, answered, lost, duplicated (client side, plus the
// router's accepted / answered), SLO attainment and its ratio to the
// baseline's, mean served accuracy before and after the first fault; a
// per-second timeline CSV, the fault times, and a PNG drawn by
// scripts/plot-faults.py.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/benchmark_registry.h"
#include "bench/benchmarks/grpc/emulated_fleet.h"
#include "bench/harness/faulted_load.h"
#include "bench/harness/local_cluster.h"
#include "bench/sim/trace_generators.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "common/model_profile.h"
#include "common/subprocess.h"
#include "common/tensor_codec.h"
#include "policies/policy_factory.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"

ABSL_FLAG(double, duration_s, 60, "faults: seconds of load per variant.");
ABSL_FLAG(double, kill_every_s, 12,
          "faults: sigkill/sigstop variants fault one worker this often until half remain.");
ABSL_FLAG(int32_t, workers, 8, "faults: emulated workers, one process each.");
ABSL_FLAG(double, load_fraction, 0.45,
          "faults: offered load as a fraction of the measured capacity (at 0.5 the last "
          "kill_every_s of the sigkill / sigstop variants run at 100 % of what is left).");
ABSL_FLAG(double, faults_scale, 4.0,
          "faults: the emulated profile's latencies (fastest subnet 2.8 .. 16.5 ms at batch "
          "1..16) times this; larger means fewer queries per second for the same load.");
ABSL_FLAG(double, faults_probe_s, 4, "faults: seconds of the capacity probe (> 1).");
// Shared with `scaling` (defined in scaling_benchmark.cc): here, where the
// timeline CSVs and the PNG go; empty: faults-report.
ABSL_DECLARE_FLAG(std::string, out_dir);
ABSL_FLAG(std::string, variants, "none,sigkill,sigstop,restart",
          "faults: variants to run, in order (the first is the baseline of the ratios).");
ABSL_FLAG(std::string, restart_signal, "term",
          "faults: the restart variant stops the router with SIGTERM (term: it drains) or "
          "SIGKILL (kill).");
ABSL_FLAG(uint64_t, faults_seed, 11, "faults: seed of the arrivals and the victims.");
ABSL_FLAG(bool, faults_plot, true,
          "faults: draw the PNG with scripts/plot-faults.py (python3-matplotlib).");

#ifndef SUPERSERVE_BENCH_SOURCE_DIR
#define SUPERSERVE_BENCH_SOURCE_DIR ""
#endif

namespace superserve::bench::faults_bench {
namespace {

namespace fs = std::filesystem;

constexpr double kSloFactor = 6;  // SLO = 6x the fastest subnet's batch-16 latency (as overload)
constexpr double kCv2 = 2;

// Four subnets; subnet i's latency at batch b = 2.8 / 3.8 / 5.5 / 9.2 / 16.5 ms at
// batch 1 / 2 / 4 / 8 / 16 times its slowdown, times `scale`.
ModelProfile FaultsProfile(double scale) {
  EmulatedModel m;
  m.model = "faults";
  m.batch_sizes = {1, 2, 4, 8, 16};
  m.accuracy = {74, 77, 79.5, 81};
  m.base_us = {1000, 1500, 2200, 3200};
  m.batch_factor = {2.8, 3.8, 5.5, 9.2, 16.5};
  m.scale = scale;
  return MakeEmulatedProfile(m);
}

struct Second {
  int64_t queries = 0, in_slo = 0;
  double accuracy_sum = 0;
};

struct Variant {
  std::string name;
  FaultedLoadResult run;
  Nanos first_fault = 0;  // the split for the before / after accuracy
  double acc_before = 0, acc_after = 0;
  double att_before = 0, att_after = 0;
  std::vector<Second> seconds;
};

class FaultsBench {
 public:
  explicit FaultsBench(std::string work) : work_(std::move(work)) {}

  int Main(const BenchmarkArgs& args) {
    const double duration_s = absl::GetFlag(FLAGS_duration_s);
    const double kill_every_s = absl::GetFlag(FLAGS_kill_every_s);
    workers_ = absl::GetFlag(FLAGS_workers);
    const double load_fraction = absl::GetFlag(FLAGS_load_fraction);
    const double scale = absl::GetFlag(FLAGS_faults_scale);
    const std::string restart_signal = absl::GetFlag(FLAGS_restart_signal);
    // Upper bounds too: an infinite or 1e300 duration overflowed nanoseconds,
    // and every worker is a process of this machine.
    const double probe_s = absl::GetFlag(FLAGS_faults_probe_s);
    if (!(duration_s > 0 && duration_s <= 86400) || !(kill_every_s > 0 && kill_every_s <= 86400) ||
        workers_ < 2 || workers_ > 1024 || !(load_fraction > 0 && load_fraction <= 100) ||
        !(probe_s > 1 && probe_s <= 3600) || !(scale > 0 && scale <= 1000) ||
        (restart_signal != "term" && restart_signal != "kill")) {
      std::fprintf(stderr, "faults: need --duration_s and --kill_every_s in (0, 86400], --workers in "
                           "[2, 1024], --load_fraction in (0, 100], --faults_probe_s in (1, 3600], "
                           "--faults_scale in (0, 1000], --restart_signal term|kill\n");
      return 2;
    }
    std::vector<std::string> variants =
        absl::StrSplit(absl::GetFlag(FLAGS_variants), ',', absl::SkipEmpty());
    for (const std::string& v : variants) {
      if (v != "none" && v != "sigkill" && v != "sigstop" && v != "restart") {
        std::fprintf(stderr, "faults: --variants: unknown variant \"%s\"\n", v.c_str());
        return 2;
      }
    }
    if (variants.empty()) {
      std::fprintf(stderr, "faults: --variants is empty\n");
      return 2;
    }
    const std::string out_dir =
        absl::GetFlag(FLAGS_out_dir).empty() ? "faults-report" : absl::GetFlag(FLAGS_out_dir);
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) {
      std::fprintf(stderr, "faults: --out_dir %s: %s\n", out_dir.c_str(), ec.message().c_str());
      return 2;
    }
    profile_ = FaultsProfile(scale);
    slo_ = static_cast<Nanos>(kSloFactor * static_cast<double>(profile_.subnets[0].latency.back()));
    fs::create_directories(work_ + "/repo/faults");
    if (auto s = profile_.SaveFile(work_ + "/repo/faults/profile.json"); !s.ok()) {
      std::fprintf(stderr, "faults: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    const Nanos start = RealClock::Get()->Now();
    // Capacity: the goodput of the fastest subnet (infaas) at 1.5x the
    // profile's nominal capacity, on the same fleet.
    const double nominal = workers_ * 16 / ToSeconds(profile_.subnets[0].latency.back());
    auto capacity = ProbeCapacity(1.5 * nominal);
    if (!capacity.ok()) {
      std::fprintf(stderr, "faults: %s\n", std::string(capacity.status().message()).c_str());
      return 1;
    }
    const double rate = load_fraction * *capacity;
    std::printf("faults: %d workers, nominal capacity %.0f q/s, measured %.0f q/s; load %.0f q/s "
                "(CV² %.0f), SLO %.0f ms, policy %s, %.0f s per variant\n",
                workers_, nominal, *capacity, rate, kCv2, ToMillis(slo_), PolicySpec().name.c_str(),
                duration_s);
    std::fflush(stdout);
    const Nanos duration = static_cast<Nanos>(duration_s * 1e9);
    const Nanos kill_every = static_cast<Nanos>(kill_every_s * 1e9);
    const LabelledRequests inputs = BenchInputs(32, "faults");
    std::vector<Variant> results;
    int exit_code = 0;
    for (const std::string& name : variants) {
      FaultedLoadOptions lo;
      lo.arrivals = GammaArrivals(rate, kCv2, duration, absl::GetFlag(FLAGS_faults_seed));
      lo.slo = slo_;
      lo.stream_share = 0.5;
      lo.seed = absl::GetFlag(FLAGS_faults_seed);
      Variant v;
      v.name = name;
      v.first_fault = std::min(kill_every, duration / 2);
      if (name == "sigkill" || name == "sigstop") {
        for (int k = 1; k <= workers_ - workers_ / 2 && kill_every * k < duration; ++k) {
          Fault f;
          f.at = kill_every * k;
          f.kind = name == "sigkill" ? FaultKind::kKillWorker : FaultKind::kHangWorker;
          lo.faults.push_back(f);
        }
        if (!lo.faults.empty()) v.first_fault = lo.faults.front().at;
      } else if (name == "restart") {
        Fault f;
        f.at = duration / 2;
        f.kind = restart_signal == "term" ? FaultKind::kRestartRouterDrain
                                          : FaultKind::kRestartRouterKill;
        lo.faults.push_back(f);
        v.first_fault = f.at;
      }
      auto cluster = StartCluster("");
      if (!cluster.ok()) {
        std::fprintf(stderr, "faults: %s\n", std::string(cluster.status().message()).c_str());
        return 1;
      }
      auto run = RunFaultedLoad(**cluster, inputs, lo);
      (*cluster)->Stop();
      if (!run.ok()) {
        std::fprintf(stderr, "faults: %s\n", std::string(run.status().message()).c_str());
        return 1;
      }
      v.run = *std::move(run);
      Score(&v, duration);
      const auto& c = v.run.counts;
      std::printf("  %-8s queries %lld answered %lld lost %lld duplicated %lld attainment %.4f "
                  "(before %.4f, after %.4f) accuracy before %.2f after %.2f; router accepted "
                  "%lld answered %lld pending %lld\n",
                  name.c_str(), static_cast<long long>(c.sent),
                  static_cast<long long>(c.terminal), static_cast<long long>(v.run.lost()),
                  static_cast<long long>(v.run.duplicated()), c.slo_attainment(), v.att_before,
                  v.att_after, v.acc_before, v.acc_after,
                  static_cast<long long>(v.run.router_final ? v.run.router_final->accepted : -1),
                  static_cast<long long>(v.run.router_final ? v.run.router_final->answered : -1),
                  static_cast<long long>(v.run.router_final ? v.run.router_final->pending : -1));
      for (const AppliedFault& f : v.run.faults) {
        std::printf("           %6.2f s %s %s (%.0f ms)\n", ToSeconds(f.started),
                    FaultKindName(f.fault.kind), f.detail.c_str(), ToMillis(f.took));
      }
      std::fflush(stdout);
      if (v.run.lost() != 0 || v.run.duplicated() != 0) exit_code = 1;
      results.push_back(std::move(v));
    }
    if (auto s = WriteCsvs(out_dir, results); !s.ok()) {
      std::fprintf(stderr, "faults: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    const std::string png = out_dir + "/faults_timeline.png";
    const bool plotted = absl::GetFlag(FLAGS_faults_plot) && Plot(out_dir, png);
    const double elapsed = ToSeconds(RealClock::Get()->Now() - start);
    const double base = results.front().run.counts.slo_attainment();
    if (args.json) {
      std::vector<JsonWriter> rows;
      for (const Variant& v : results) {
        const auto& c = v.run.counts;
        std::vector<JsonWriter> faults;
        for (const AppliedFault& f : v.run.faults) {
          JsonWriter j;
          j.Add("kind", FaultKindName(f.fault.kind))
              .Add("at_s", ToSeconds(f.started))
              .Add("took_ms", ToMillis(f.took));
          if (f.router_exit) {  // the drained router's own count
            j.Add("router_exit_accepted", f.router_exit->accepted)
                .Add("router_exit_answered", f.router_exit->answered);
          }
          faults.push_back(std::move(j));
        }
        JsonWriter row;
        row.Add("variant", v.name)
            .Add("queries", c.sent)
            .Add("answered", c.terminal)
            .Add("lost", v.run.lost())
            .Add("duplicated", v.run.duplicated())
            .Add("slo_attainment", c.slo_attainment())
            .Add("ratio_vs_" + results.front().name, base > 0 ? c.slo_attainment() / base : 0)
            .Add("slo_attainment_before", v.att_before)
            .Add("slo_attainment_after", v.att_after)
            .Add("mean_accuracy_before", v.acc_before)
            .Add("mean_accuracy_after", v.acc_after)
            .Add("first_fault_s", ToSeconds(v.first_fault))
            .Add("unavailable", c.codes.count(absl::StatusCode::kUnavailable)
                                    ? c.codes.at(absl::StatusCode::kUnavailable)
                                    : 0)
            .Add("deadline_exceeded", c.codes.count(absl::StatusCode::kDeadlineExceeded)
                                          ? c.codes.at(absl::StatusCode::kDeadlineExceeded)
                                          : 0)
            .Add("router_accepted", v.run.router_final ? v.run.router_final->accepted : -1)
            .Add("router_answered", v.run.router_final ? v.run.router_final->answered : -1)
            .AddArray("faults", faults);
        rows.push_back(std::move(row));
      }
      JsonWriter out;
      out.Add("benchmark", "faults")
          .Add("workers", workers_)
          .Add("policy", PolicySpec().name)
          .Add("slo_ms", ToMillis(slo_))
          .Add("cv2", kCv2)
          .Add("nominal_capacity_qps", nominal)
          .Add("measured_capacity_qps", *capacity)
          .Add("offered_qps", rate)
          .Add("duration_s", duration_s)
          .Add("kill_every_s", kill_every_s)
          .Add("baseline", results.front().name)
          .Add("timeline_csv", out_dir + "/faults_timeline.csv")
          .Add("png", plotted ? png : std::string())
          .Add("elapsed_s", elapsed)
          .AddArray("variants", rows);
      std::printf("%s\n", out.ToString().c_str());
    }
    return exit_code;
  }

 private:
  absl::StatusOr<std::unique_ptr<LocalCluster>> StartCluster(const std::string& policy) {
    LocalClusterOptions o;
    o.bin_dir = SelfDir();
    o.model_repo = work_ + "/repo";
    o.work_dir = work_ + "/run" + std::to_string(runs_++);
    fs::create_directories(o.work_dir);
    o.policy = policy;
    o.workers = workers_;
    o.emulate = true;
    // Hung or killed workers are found within 3 heartbeats (300 ms).
    o.router_flags = {"--heartbeat_ms=100", "--missed_heartbeats=3", "--drain_timeout_s=5"};
    o.worker_flags = {"--log_level=warning", "--reconnect_max_backoff_ms=500"};
    o.startup_timeout = Seconds(30);
    return LocalCluster::Start(o);
  }

  absl::StatusOr<double> ProbeCapacity(double offered) {
    auto cluster = StartCluster("infaas");
    if (!cluster.ok()) return cluster.status();
    InferenceClient client((*cluster)->router_address(), Transport::kStream);
    client.WaitForConnected(Seconds(5));
    const double probe_s = absl::GetFlag(FLAGS_faults_probe_s);
    std::vector<TraceArrival> trace;
    for (Nanos t : GammaArrivals(offered, 1, static_cast<Nanos>(probe_s * 1e9), 5)) {
      TraceArrival a;
      a.arrival = t;
      trace.push_back(a);
    }
    ReplayOptions ro;
    ro.default_slo = slo_;
    ro.progress = false;
    auto records = ReplayTrace(client, trace, BenchInputs(32, "faults"), ro);
    (*cluster)->Stop();
    if (!records.ok()) return records.status();
    // Goodput of the queries sent after the first second (the queue has
    // filled): served in time per second of sending. (Counting every answer
    // over the probe's length would add the work queued at its end, up to an
    // SLO's worth, and overstate the capacity.)
    const Nanos from = std::min<Nanos>(Seconds(1), static_cast<Nanos>(probe_s * 0.5e9));
    int64_t ok = 0;
    for (const QueryRecord& r : *records) ok += r.sent >= from && r.in_slo ? 1 : 0;
    const double goodput = static_cast<double>(ok) / (probe_s - ToSeconds(from));
    if (goodput <= 0) return absl::UnavailableError("the capacity probe served nothing in time");
    return goodput;
  }

  void Score(Variant* v, Nanos duration) {
    const int n = static_cast<int>((duration + Seconds(1) - 1) / Seconds(1));
    v->seconds.assign(n, Second());
    int64_t nb = 0, na = 0, okb = 0, oka = 0;
    double accb = 0, acca = 0;
    for (const AnswerLedger::Entry& e : v->run.queries) {
      const int s = std::clamp(static_cast<int>(e.sent / Seconds(1)), 0, n - 1);
      Second& sec = v->seconds[s];
      ++sec.queries;
      const bool before = e.sent < v->first_fault;
      (before ? nb : na)++;
      if (!e.in_slo) continue;
      ++sec.in_slo;
      sec.accuracy_sum += e.accuracy;
      if (before) {
        ++okb;
        accb += e.accuracy;
      } else {
        ++oka;
        acca += e.accuracy;
      }
    }
    v->att_before = nb > 0 ? double(okb) / nb : 0;
    v->att_after = na > 0 ? double(oka) / na : 0;
    v->acc_before = okb > 0 ? accb / okb : 0;
    v->acc_after = oka > 0 ? acca / oka : 0;
  }

  absl::Status WriteCsvs(const std::string& dir, const std::vector<Variant>& results) {
    std::ofstream t(dir + "/faults_timeline.csv");
    std::ofstream f(dir + "/faults_events.csv");
    if (!t || !f) return absl::InternalError(absl::StrCat("cannot write CSVs in ", dir));
    t << "variant,second,queries,in_slo,slo_attainment,mean_accuracy\n";
    f << "variant,time_s,kind\n";
    for (const Variant& v : results) {
      for (size_t s = 0; s < v.seconds.size(); ++s) {
        const Second& sec = v.seconds[s];
        t << v.name << "," << s << "," << sec.queries << "," << sec.in_slo << ","
          << (sec.queries > 0 ? double(sec.in_slo) / sec.queries : 0) << ","
          << (sec.in_slo > 0 ? sec.accuracy_sum / sec.in_slo : 0) << "\n";
      }
      for (const AppliedFault& a : v.run.faults) {
        f << v.name << "," << ToSeconds(a.started) << "," << FaultKindName(a.fault.kind) << "\n";
      }
    }
    return absl::OkStatus();
  }

  // scripts/plot-faults.py (python3-matplotlib); false with a line on
  // stderr when it cannot run.
  static bool Plot(const std::string& dir, const std::string& png) {
    const std::string script = std::string(SUPERSERVE_BENCH_SOURCE_DIR) + "/scripts/plot-faults.py";
    if (!fs::exists(script)) {
      std::fprintf(stderr, "faults: %s not found: no PNG\n", script.c_str());
      return false;
    }
    auto p = Subprocess::Start({"/usr/bin/python3", script, dir + "/faults_timeline.csv",
                                dir + "/faults_events.csv", png},
                               dir + "/plot.log");
    if (!p.ok()) return false;
    auto st = p->Wait(Seconds(60));
    const bool ok = st.has_value() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
    if (!ok) std::fprintf(stderr, "faults: the plot failed (see %s/plot.log)\n", dir.c_str());
    return ok;
  }

  const std::string work_;
  ModelProfile profile_;
  int32_t workers_ = 8;
  Nanos slo_ = 0;
  int runs_ = 0;
};

int RunFaults(const BenchmarkArgs& args) {
  return InScratchDir("faults", [&](const std::string& dir) { return FaultsBench(dir).Main(args); });
}

RegisterBenchmark reg_faults(
    "faults",
    "SuperServe Fig. 11a live: SLO attainment, accuracy and lost / duplicated queries while "
    "workers are SIGKILLed or SIGSTOPped one by one, or the router restarts, vs no fault",
    RunFaults);

}  // namespace
}  // namespace superserve::bench::faults_bench
