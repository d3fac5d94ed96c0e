// `overload`: goodput past the peak, live and simulated (issue 20). One
// router with emulated workers (real processes on 127.0.0.1) and this
// process as the open-loop load generator. The measured peak is INFaaS's
// goodput (the highest-throughput policy: the least accurate subnet) at 1.5x
// the profile's nominal capacity; then the default policy, the baselines and
// the default policy without overload shedding (the engine before it) each
// replay Poisson traces at 0.5x, 1x, 1.25x and 2x that peak. The simulator
// replays the very same traces through the same serving core and policy in
// the same run: its prediction sits next to each live number.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/benchmark_registry.h"
#include "bench/benchmarks/grpc/emulated_fleet.h"
#include "bench/harness/local_cluster.h"
#include "bench/sim/simulator.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "common/model_profile.h"
#include "common/tensor_codec.h"
#include "policies/policy_factory.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"

ABSL_FLAG(double, overload_trial_s, 2.5, "overload: seconds of arrivals per trial.");
ABSL_FLAG(int32_t, overload_workers, 2, "overload: emulated workers (one process).");
ABSL_FLAG(double, overload_scale, 2.0,
          "overload: the profile's latencies are the issue's (2.8 / 3.8 / 5.5 / 9.2 / 16.5 ms at "
          "batch 1..16 for the fastest subnet) times this; a larger scale means fewer queries "
          "per second for the same load (the router and the client share this machine's cores).");
ABSL_FLAG(std::string, overload_policies, "",
          "overload: comma-separated policies (default: the default policy, maxbatch, maxacc, "
          "clipper+, infaas).");

namespace superserve::bench::overload_bench {
namespace {

namespace fs = std::filesystem;

constexpr double kSloFactor = 6;  // SLO = 6x the fastest subnet's batch-16 latency (issue)

// Four subnets; subnet i's latency at batch b = 2.8 / 3.8 / 5.5 / 9.2 / 16.5 ms at
// batch 1 / 2 / 4 / 8 / 16 times its slowdown, times `scale`.
ModelProfile OverloadProfile(double scale) {
  EmulatedModel m;
  m.model = "overload";
  m.batch_sizes = {1, 2, 4, 8, 16};
  m.accuracy = {76, 78, 80, 82};
  m.base_us = {1000, 1300, 1700, 2300};
  m.batch_factor = {2.8, 3.8, 5.5, 9.2, 16.5};
  m.scale = scale;
  return MakeEmulatedProfile(m);
}

std::vector<TraceArrival> Poisson(double qps, double seconds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(qps);
  std::vector<TraceArrival> t;
  for (double s = gap(rng); s < seconds; s += gap(rng)) {
    TraceArrival a;
    a.arrival = static_cast<Nanos>(s * 1e9);
    t.push_back(a);
  }
  return t;
}

struct Trial {
  double x = 0;  // offered rate / measured peak
  double offered = 0;
  double live = 0;  // goodput, q/s in time
  double sim = 0;
  double live_attainment = 0;
};

struct Run {
  std::string label;   // policy, or "<policy>-no-shedding"
  std::string policy;
  bool shed = true;
  std::vector<Trial> trials;
  double best_live = 0, best_sim = 0;  // at or below the peak
  double worst_live = 0, worst_sim = 0;  // min ratio at 1.25x and 2x to the best
};

class OverloadBench {
 public:
  OverloadBench(const std::string& work) : work_(work) {}

  int Main(const BenchmarkArgs& args) {
    const double scale = absl::GetFlag(FLAGS_overload_scale);
    workers_ = absl::GetFlag(FLAGS_overload_workers);
    trial_s_ = absl::GetFlag(FLAGS_overload_trial_s);
    // Upper bounds too: an infinite --overload_trial_s ran forever (its
    // nanoseconds overflowed), and the workers are one worker's --instances.
    if (!(scale > 0 && scale <= 1000) || workers_ < 1 || workers_ > 4096 ||
        !(trial_s_ > 0 && trial_s_ <= 3600)) {
      std::fprintf(stderr, "overload: need --overload_scale in (0, 1000], --overload_workers in "
                           "[1, 4096], --overload_trial_s in (0, 3600]\n");
      return 2;
    }
    profile_ = OverloadProfile(scale);
    slo_ = static_cast<Nanos>(kSloFactor * static_cast<double>(profile_.subnets[0].latency.back()));
    fs::create_directories(work_ + "/repo/overload");
    if (auto s = profile_.SaveFile(work_ + "/repo/overload/profile.json"); !s.ok()) {
      std::fprintf(stderr, "overload: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    const double nominal = workers_ * 16 / ToSeconds(profile_.subnets[0].latency.back());
    std::vector<std::string> policies;
    const std::string flag = absl::GetFlag(FLAGS_overload_policies);
    if (flag.empty()) {
      policies = {PolicySpec().name, "maxbatch", "maxacc", "clipper+", "infaas"};
    } else {
      for (absl::string_view p : absl::StrSplit(flag, ',')) policies.emplace_back(p);
    }
    const Nanos start = RealClock::Get()->Now();
    // The measured peak.
    Run probe{"probe", "infaas", true, {}, 0, 0, 0, 0};
    if (!Measure(&probe, {1.5}, nominal)) return 1;
    const double peak = probe.trials[0].live;
    std::printf("overload: nominal capacity %.0f q/s (%d workers x 16 / %.1f ms), measured peak "
                "%.0f q/s (infaas at %.0f q/s offered), SLO %.0f ms\n",
                nominal, workers_, ToMillis(profile_.subnets[0].latency.back()), peak,
                probe.trials[0].offered, ToMillis(slo_));
    std::fflush(stdout);
    if (peak <= 0) {
      std::fprintf(stderr, "overload: the probe served nothing in time\n");
      return 1;
    }
    std::vector<Run> runs;
    for (const std::string& p : policies) runs.push_back({p, p, true, {}, 0, 0, 0, 0});
    runs.push_back({PolicySpec().name + "-no-shedding", PolicySpec().name, false, {}, 0, 0, 0, 0});
    for (Run& r : runs) {
      if (!Measure(&r, {0.5, 1.0, 1.25, 2.0}, peak)) return 1;
      Score(&r);
      std::printf("  %-22s live: best<=peak %6.0f, worst ratio past it %.3f | sim: best %6.0f, "
                  "worst ratio %.3f\n",
                  r.label.c_str(), r.best_live, r.worst_live, r.best_sim, r.worst_sim);
      std::fflush(stdout);
    }
    const double elapsed = ToSeconds(RealClock::Get()->Now() - start);
    double worst_live = 1e9, worst_sim = 1e9;
    for (const Run& r : runs) {
      if (!r.shed) continue;
      worst_live = std::min(worst_live, r.worst_live);
      worst_sim = std::min(worst_sim, r.worst_sim);
    }
    const Run& dflt = runs.front();
    const Run& noshed = runs.back();
    const double at2 = dflt.trials.back().live, at2_noshed = noshed.trials.back().live;
    std::printf("overload: worst goodput ratio at 1.25x/2x the peak over the policies: live %.3f, "
                "simulated %.3f (target >= 0.9); default policy at 2x: %.0f q/s with shedding, "
                "%.0f without (x%.2f); %.0f s\n",
                worst_live, worst_sim, at2, at2_noshed, at2_noshed > 0 ? at2 / at2_noshed : 0,
                elapsed);
    if (args.json) {
      std::vector<JsonWriter> rows;
      for (const Run& r : runs) {
        std::vector<JsonWriter> trials;
        for (const Trial& t : r.trials) {
          JsonWriter j;
          j.Add("x_peak", t.x)
              .Add("offered_qps", t.offered)
              .Add("goodput_qps", t.live)
              .Add("sim_goodput_qps", t.sim)
              .Add("slo_attainment", t.live_attainment);
          trials.push_back(std::move(j));
        }
        JsonWriter row;
        row.Add("run", r.label)
            .Add("policy", r.policy)
            .Add("shedding", r.shed)
            .Add("best_goodput_qps", r.best_live)
            .Add("worst_ratio_past_peak", r.worst_live)
            .Add("sim_best_goodput_qps", r.best_sim)
            .Add("sim_worst_ratio_past_peak", r.worst_sim)
            .AddArray("trials", trials);
        rows.push_back(std::move(row));
      }
      JsonWriter out;
      out.Add("benchmark", "overload")
          .Add("workers", workers_)
          .Add("slo_ms", ToMillis(slo_))
          .Add("nominal_capacity_qps", nominal)
          .Add("measured_peak_qps", peak)
          .Add("trial_s", trial_s_)
          .Add("worst_ratio_past_peak", worst_live)
          .Add("sim_worst_ratio_past_peak", worst_sim)
          .Add("default_policy", PolicySpec().name)
          .Add("default_goodput_2x_qps", at2)
          .Add("default_no_shedding_goodput_2x_qps", at2_noshed)
          .Add("ratio_vs_no_shedding_2x", at2_noshed > 0 ? at2 / at2_noshed : 0)
          .Add("elapsed_s", elapsed)
          .AddArray("runs", rows);
      std::printf("%s\n", out.ToString().c_str());
    }
    return 0;
  }

 private:
  static void Score(Run* r) {
    for (const Trial& t : r->trials) {
      if (t.x <= 1.0) {
        r->best_live = std::max(r->best_live, t.live);
        r->best_sim = std::max(r->best_sim, t.sim);
      }
    }
    r->worst_live = r->worst_sim = 1e9;
    for (const Trial& t : r->trials) {
      if (t.x <= 1.0) continue;
      r->worst_live = std::min(r->worst_live, r->best_live > 0 ? t.live / r->best_live : 0);
      r->worst_sim = std::min(r->worst_sim, r->best_sim > 0 ? t.sim / r->best_sim : 0);
    }
  }

  // Starts a router with the run's policy, replays one trace per rate, and
  // simulates each trace.
  bool Measure(Run* run, const std::vector<double>& xs, double unit) {
    LocalClusterOptions o;
    o.bin_dir = SelfDir();
    o.model_repo = work_ + "/repo";
    o.work_dir = work_;
    o.policy = run->policy;
    o.workers = 1;
    o.instances_per_worker = workers_;
    o.emulate = true;
    o.router_flags = {"--log_level=warning", absl::StrCat("--shed_overload=", run->shed)};
    o.worker_flags = {"--log_level=warning"};
    auto cluster = LocalCluster::Start(o);
    if (!cluster.ok()) {
      std::fprintf(stderr, "overload: %s\n", std::string(cluster.status().message()).c_str());
      return false;
    }
    InferenceClient client((*cluster)->router_address(), Transport::kStream);
    client.WaitForConnected(Seconds(5));
    const LabelledRequests inputs = BenchInputs(64, "overload");
    uint64_t seed = 1;
    for (double x : xs) {
      Trial t;
      t.x = x;
      t.offered = x * unit;
      const std::vector<TraceArrival> trace = Poisson(t.offered, trial_s_, seed++);
      ReplayOptions ro;
      ro.default_slo = slo_;
      ro.progress = false;
      auto records = ReplayTrace(client, trace, inputs, ro);
      if (!records.ok()) {
        std::fprintf(stderr, "overload: %s\n", std::string(records.status().message()).c_str());
        return false;
      }
      const ReplaySummary s = Summarize(*records);
      t.live = static_cast<double>(s.ok) / trial_s_;
      t.live_attainment = s.slo_attainment;
      // The simulator's prediction for the same arrivals.
      std::vector<Nanos> arrivals;
      arrivals.reserve(trace.size());
      for (const TraceArrival& a : trace) arrivals.push_back(a.arrival);
      auto policy = MakePolicy(run->policy, profile_, PolicyConfig());
      if (!policy.ok()) {
        std::fprintf(stderr, "overload: %s\n", std::string(policy.status().message()).c_str());
        return false;
      }
      SimulatorOptions so;
      so.workers = workers_;
      so.slo = slo_;
      so.serving.overload.shed = run->shed;
      auto sim = Simulate(profile_, arrivals, policy->get(), so);
      if (!sim.ok()) {
        std::fprintf(stderr, "overload: %s\n", std::string(sim.status().message()).c_str());
        return false;
      }
      t.sim = static_cast<double>(sim->met) / trial_s_;
      std::printf("    %-22s %.2fx peak (%5.0f q/s): goodput live %6.0f q/s (attainment %.3f), "
                  "simulated %6.0f q/s\n",
                  run->label.c_str(), x, t.offered, t.live, t.live_attainment, t.sim);
      std::fflush(stdout);
      run->trials.push_back(t);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // queues drain
    }
    (*cluster)->Stop();
    return true;
  }

  const std::string work_;
  ModelProfile profile_;
  int32_t workers_ = 2;
  double trial_s_ = 2.5;
  Nanos slo_ = 0;
};

int RunOverload(const BenchmarkArgs& args) {
  return InScratchDir("overload", [&](const std::string& dir) { return OverloadBench(dir).Main(args); });
}

RegisterBenchmark reg_overload(
    "overload",
    "goodput at 0.5x / 1x / 1.25x / 2x the measured peak, live (router + emulated workers as "
    "processes) and simulated on the same traces, for the default policy, the baselines and "
    "the default policy without overload shedding",
    RunOverload);

}  // namespace
}  // namespace superserve::bench::overload_bench
