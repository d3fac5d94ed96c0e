// `early-exit-live`: the early-exit model served live beside the supernet
// (issue 14, item 5) against the simulator's prediction for the same trace.
// One router, two torch workers as processes on 127.0.0.1 (one hosts
// fmnist-exit, the other the fmnist supernet), this process as the open-loop
// load generator. The trace mixes the two models and the early-exit model's
// applications (easy / hard / noisy, equally likely, seeded). The baseline is
// the simulator (bench/sim: the same serving core and policy) replaying the
// early-exit rows of that trace with the model's profile; the result is the
// live finish rate next to the simulated one, and their difference.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/benchmark_registry.h"
#include "bench/harness/local_cluster.h"
#include "bench/sim/simulator.h"
#include "common/idx_reader.h"
#include "common/image_applications.h"
#include "common/json_writer.h"
#include "common/model_repository.h"
#include "policies/policy_factory.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"

ABSL_FLAG(double, eelive_seconds, 20, "early-exit-live: seconds of arrivals.");
ABSL_FLAG(double, eelive_qps, 150, "early-exit-live: early-exit queries per second.");
ABSL_FLAG(double, eelive_supernet_qps, 30,
          "early-exit-live: supernet queries per second served at the same time.");
ABSL_FLAG(double, eelive_slo_ms, 10, "early-exit-live: SLO of every query, ms.");
ABSL_FLAG(std::string, eelive_policy, "orloj", "early-exit-live: the early-exit model's policy.");
ABSL_FLAG(std::string, eelive_profile, "",
          "early-exit-live: the early-exit profile the router and the simulator use (default: "
          "the bundled models/dynamic/fmnist-exit/profile.json; re-measure it on the machine "
          "with `superserve-early-exit profile` for a fair prediction).");
ABSL_FLAG(double, eelive_overhead_ms, 0.5,
          "early-exit-live: the simulator's dispatch overhead (router -> worker -> router, per "
          "batch), ms. The run also reports the simulation with the overhead measured live "
          "(median of latency - queue - exec over the answered early-exit queries) and with each "
          "batch's overhead drawn from those measurements.");
ABSL_FLAG(uint64_t, eelive_seed, 1, "early-exit-live: seed of the trace.");
ABSL_FLAG(std::string, eelive_trace_out, "",
          "early-exit-live: also write the early-exit rows as a superserve-sim trace CSV here.");

namespace superserve::bench::early_exit_live_bench {
namespace {

namespace fs = std::filesystem;

const char* const kApplications[] = {"easy", "hard", "noisy"};

int Fail(const std::string& why) {
  std::fprintf(stderr, "early-exit-live: %s\n", why.c_str());
  return 1;
}

std::string SourceDir() {
  // The binary lives in <build>/bin; the models in the source tree.
  if (const char* s = std::getenv("SUPERSERVE_SOURCE_DIR")) return s;
  return fs::current_path().string();
}

int Main(const BenchmarkArgs& args) {
  // Usage errors before anything starts: a NaN --eelive_seconds or a zero
  // --eelive_qps ran an empty trace and reported finish rates of 0 or 1.
  {
    const double seconds = absl::GetFlag(FLAGS_eelive_seconds);
    const double qps = absl::GetFlag(FLAGS_eelive_qps);
    const double supernet_qps = absl::GetFlag(FLAGS_eelive_supernet_qps);
    const double slo_ms = absl::GetFlag(FLAGS_eelive_slo_ms);
    const double overhead_ms = absl::GetFlag(FLAGS_eelive_overhead_ms);
    if (!(seconds > 0 && seconds <= 86400) || !(qps > 0 && qps <= 1e6) ||
        !(supernet_qps >= 0 && supernet_qps <= 1e6) || !(slo_ms > 0 && slo_ms <= 3600e3) ||
        !(overhead_ms >= 0 && overhead_ms <= 3600e3)) {
      std::fprintf(stderr,
                   "early-exit-live: need --eelive_seconds in (0, 86400], --eelive_qps in (0, 1e6], "
                   "--eelive_supernet_qps in [0, 1e6], --eelive_slo_ms in (0, 3.6e6], "
                   "--eelive_overhead_ms in [0, 3.6e6]\n");
      return 2;
    }
  }
  const std::string source = SourceDir();
  const std::string bin_dir = fs::path(fs::read_symlink("/proc/self/exe")).parent_path().string();
  const std::string work = (fs::temp_directory_path() /
                            absl::StrCat("superserve-eelive-", getpid()))
                               .string();
  fs::create_directories(work + "/repo/fmnist-exit");
  std::error_code ec;
  fs::create_directory_symlink(source + "/models/fmnist", work + "/repo/fmnist", ec);
  if (ec) return Fail(absl::StrCat("cannot link models/fmnist: ", ec.message()));
  const std::string exit_dir = source + "/models/dynamic/fmnist-exit";
  const std::string profile_path = absl::GetFlag(FLAGS_eelive_profile).empty()
                                       ? exit_dir + "/profile.json"
                                       : absl::GetFlag(FLAGS_eelive_profile);
  fs::copy_file(profile_path, work + "/repo/fmnist-exit/profile.json");
  fs::create_symlink(exit_dir + "/checkpoint.pt", work + "/repo/fmnist-exit/checkpoint.pt");
  auto profile = ModelProfile::LoadFile(work + "/repo/fmnist-exit/profile.json");
  if (!profile.ok()) return Fail(std::string(profile.status().message()));

  // The trace: Poisson arrivals of both models, applications uniform.
  const double seconds = absl::GetFlag(FLAGS_eelive_seconds);
  const Nanos slo = Micros(absl::GetFlag(FLAGS_eelive_slo_ms) * 1000);
  std::mt19937_64 rng(absl::GetFlag(FLAGS_eelive_seed));
  std::vector<TraceArrival> trace;
  auto add = [&](double qps, const std::string& model, bool tagged) {
    std::exponential_distribution<double> gap(qps);
    std::uniform_int_distribution<int> app(0, 2);
    for (double s = gap(rng); s < seconds; s += gap(rng)) {
      TraceArrival a;
      a.arrival = static_cast<Nanos>(s * 1e9);
      a.slo = slo;
      a.model = model;
      if (tagged) a.application = kApplications[app(rng)];
      trace.push_back(a);
    }
  };
  add(absl::GetFlag(FLAGS_eelive_qps), "fmnist-exit", true);
  if (absl::GetFlag(FLAGS_eelive_supernet_qps) > 0) {
    add(absl::GetFlag(FLAGS_eelive_supernet_qps), "fmnist", false);
  }
  std::stable_sort(trace.begin(), trace.end(),
                   [](const TraceArrival& a, const TraceArrival& b) { return a.arrival < b.arrival; });

  // The simulator's prediction for the early-exit rows.
  std::vector<Nanos> arrivals;
  SimulatorOptions so;
  so.workers = 1;
  so.slo = slo;
  so.seed = absl::GetFlag(FLAGS_eelive_seed);
  so.dispatch_overhead = Micros(absl::GetFlag(FLAGS_eelive_overhead_ms) * 1000);
  std::map<std::string, int32_t> app_index;
  for (size_t i = 0; i < profile->dynamic.applications.size(); ++i) {
    app_index[profile->dynamic.applications[i].application] = static_cast<int32_t>(i);
  }
  std::FILE* trace_out = nullptr;
  if (!absl::GetFlag(FLAGS_eelive_trace_out).empty()) {
    trace_out = std::fopen(absl::GetFlag(FLAGS_eelive_trace_out).c_str(), "w");
    if (trace_out != nullptr) std::fprintf(trace_out, "arrival_us,app\n");
  }
  for (const TraceArrival& a : trace) {
    if (a.model != "fmnist-exit") continue;
    arrivals.push_back(a.arrival);
    auto it = app_index.find(a.application);
    if (it == app_index.end()) return Fail(absl::StrCat("profile has no application ", a.application));
    so.applications.push_back(it->second);
    if (trace_out != nullptr) {
      std::fprintf(trace_out, "%lld,%s\n", static_cast<long long>(a.arrival / kNanosPerMicro),
                   a.application.c_str());
    }
  }
  if (trace_out != nullptr) std::fclose(trace_out);
  const std::string policy_name = absl::GetFlag(FLAGS_eelive_policy);
  auto policy = MakePolicy(policy_name, *profile, PolicyConfig());
  if (!policy.ok()) return Fail(std::string(policy.status().message()));
  auto sim = Simulate(*profile, arrivals, policy->get(), so);
  if (!sim.ok()) return Fail(std::string(sim.status().message()));

  // Live.
  auto test_set = LoadFashionMnist("t10k");
  if (!test_set.ok()) return Fail(std::string(test_set.status().message()));
  auto supernet_inputs = MakeImageRequests(*test_set, "fmnist", {1, 28, 28}, 0, 1, 2000);
  if (!supernet_inputs.ok()) return Fail(std::string(supernet_inputs.status().message()));
  std::map<std::string, LabelledRequests> app_inputs;
  for (const char* name : kApplications) {
    auto in = MakeApplicationRequests(*test_set, "fmnist-exit", profile->input_shape,
                                      *FindImageApplication(FashionMnistApplications(), name),
                                      2000);
    if (!in.ok()) return Fail(std::string(in.status().message()));
    app_inputs.emplace(name, *std::move(in));
  }
  LocalClusterOptions o;
  o.bin_dir = bin_dir;
  o.model_repo = work + "/repo";
  o.work_dir = work;
  o.workers = 0;
  o.router_flags = {absl::StrCat("--dynamic_policy=", policy_name)};
  o.worker_flags = {"--threads=1"};
  o.startup_timeout = Seconds(90);
  auto cluster = LocalCluster::Start(o);
  if (!cluster.ok()) return Fail(std::string(cluster.status().message()));
  for (const char* m : {"fmnist-exit", "fmnist"}) {
    if (auto w = (*cluster)->AddWorker({absl::StrCat("--models=", m)}); !w.ok()) {
      return Fail(std::string(w.status().message()));
    }
  }
  if (auto s = (*cluster)->WaitForWorkers(1, Seconds(90)); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  InferenceClient client((*cluster)->router_address());
  if (!client.WaitForConnected(Seconds(10))) return Fail("cannot connect to the router");
  ReplayOptions ro;
  ro.progress = false;
  ro.default_slo = slo;
  auto records = ReplayTrace(
      client, trace,
      [&](const TraceArrival& a) -> const LabelledRequests* {
        if (a.model == "fmnist") return &*supernet_inputs;
        auto it = app_inputs.find(a.application);
        return it == app_inputs.end() ? nullptr : &it->second;
      },
      ro);
  (*cluster)->Stop();
  if (!records.ok()) return Fail(std::string(records.status().message()));

  std::vector<QueryRecord> exit_records, supernet_records;
  for (const auto& r : *records) {
    (r.model == "fmnist-exit" ? exit_records : supernet_records).push_back(r);
  }
  ReplaySummary live = Summarize(exit_records);
  // The overhead the simulator does not see: what the client waited beyond
  // the router's queue and the worker's execution (RPCs, transfer, the
  // shared cores' scheduling), per answered early-exit query.
  std::vector<double> overhead_us;
  for (const auto& r : exit_records) {
    if (r.code != absl::StatusCode::kOk) continue;
    overhead_us.push_back(ToMicros(r.latency) - static_cast<double>(r.queue_us + r.exec_us));
  }
  double measured_overhead_us = 0;
  std::vector<Nanos> overhead_samples;
  if (!overhead_us.empty()) {
    for (double us : overhead_us) overhead_samples.push_back(Micros(std::max(0.0, us)));
    std::nth_element(overhead_us.begin(), overhead_us.begin() + overhead_us.size() / 2,
                     overhead_us.end());
    measured_overhead_us = std::max(0.0, overhead_us[overhead_us.size() / 2]);
  }
  auto policy2 = MakePolicy(policy_name, *profile, PolicyConfig());
  if (!policy2.ok()) return Fail(std::string(policy2.status().message()));
  SimulatorOptions so_measured = so;
  so_measured.dispatch_overhead = Micros(measured_overhead_us);
  auto sim_measured = Simulate(*profile, arrivals, policy2->get(), so_measured);
  if (!sim_measured.ok()) return Fail(std::string(sim_measured.status().message()));
  const double simulated_measured = sim_measured->slo_attainment();
  // ... and with each batch's overhead drawn from the live distribution, so
  // that the machine's tail (RPCs and worker threads waiting for one of the
  // shared cores) reaches the simulation, not only its median.
  auto policy3 = MakePolicy(policy_name, *profile, PolicyConfig());
  if (!policy3.ok()) return Fail(std::string(policy3.status().message()));
  SimulatorOptions so_drawn = so;
  so_drawn.dispatch_overhead_samples = overhead_samples;
  auto sim_drawn = Simulate(*profile, arrivals, policy3->get(), so_drawn);
  if (!sim_drawn.ok()) return Fail(std::string(sim_drawn.status().message()));
  const double simulated_drawn = sim_drawn->slo_attainment();
  ReplaySummary supernet = Summarize(supernet_records);
  const double simulated = sim->slo_attainment();
  const double diff = live.slo_attainment - simulated;
  std::printf("early-exit-live: %zu early-exit queries at %.0f q/s (+ %zu supernet at %.0f q/s), "
              "SLO %.1f ms, policy %s\n",
              exit_records.size(), absl::GetFlag(FLAGS_eelive_qps), supernet_records.size(),
              absl::GetFlag(FLAGS_eelive_supernet_qps), ToMillis(slo), policy_name.c_str());
  for (const std::string& line : SummarizeGroupsJson(*records)) std::printf("  %s\n", line.c_str());
  std::printf("  finish rate: live %.4f, simulated %.4f, live - simulated %+.4f  [target |d| <= 0.03]\n",
              live.slo_attainment, simulated, diff);
  std::printf("  with the overhead measured live (%.2f ms per query): simulated %.4f, live - "
              "simulated %+.4f\n",
              measured_overhead_us / 1000, simulated_measured,
              live.slo_attainment - simulated_measured);
  std::printf("  with each batch's overhead drawn from the live distribution: simulated %.4f, "
              "live - simulated %+.4f (sim p99 %.2f ms, live p99 %.2f ms)\n",
              simulated_drawn, live.slo_attainment - simulated_drawn,
              ToMillis(sim_drawn->p99_latency), live.p99_ms);
  std::printf("  supernet finish rate live %.4f\n", supernet.slo_attainment);
  fs::remove_all(work, ec);
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "early-exit-live")
                            .Add("policy", policy_name)
                            .Add("qps", absl::GetFlag(FLAGS_eelive_qps))
                            .Add("supernet_qps", absl::GetFlag(FLAGS_eelive_supernet_qps))
                            .Add("slo_ms", ToMillis(slo))
                            .Add("queries", live.queries)
                            .Add("live_finish_rate", live.slo_attainment)
                            .Add("sim_finish_rate", simulated)
                            .Add("live_minus_sim", diff)
                            .Add("live_vs_sim", simulated > 0 ? live.slo_attainment / simulated : 0)
                            .Add("live_p99_ms", live.p99_ms)
                            .Add("sim_p99_ms", ToMillis(sim->p99_latency))
                            .Add("sim_overhead_ms", ToMillis(so.dispatch_overhead))
                            .Add("measured_overhead_ms", measured_overhead_us / 1000)
                            .Add("sim_measured_overhead_finish_rate", simulated_measured)
                            .Add("live_minus_sim_measured_overhead",
                                 live.slo_attainment - simulated_measured)
                            .Add("sim_drawn_overhead_finish_rate", simulated_drawn)
                            .Add("live_minus_sim_drawn_overhead",
                                 live.slo_attainment - simulated_drawn)
                            .Add("sim_drawn_overhead_p99_ms", ToMillis(sim_drawn->p99_latency))
                            .Add("supernet_finish_rate", supernet.slo_attainment)
                            .Add("target_met", std::abs(diff) <= 0.03)
                            .ToString()
                            .c_str());
  }
  return 0;
}

RegisterBenchmark kEarlyExitLive(
    "early-exit-live",
    "the early-exit model served live beside the supernet (2 torch workers) vs the simulator's "
    "finish rate on the same trace (run from the source tree)",
    Main);

}  // namespace
}  // namespace superserve::bench::early_exit_live_bench
