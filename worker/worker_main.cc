// superserve-worker: hosts supernets and runs the batches the router sends.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/init.h"
#include "common/logging.h"
#include "common/shutdown_signal.h"
#include "common/model_digest.h"
#include "common/model_repository.h"
#include "common/output_path.h"
#include "common/secret.h"
#include "common/small_file.h"
#include "worker/emulated_executor.h"
#include "worker/latency_probe.h"
#include "worker/router_link.h"
#include "worker/torch_executor.h"

ABSL_FLAG(std::string, router, "127.0.0.1:8501",
          "Router worker address host:port to dial (the router's --worker_listen).");
ABSL_FLAG(std::string, fleet_token_file, "",
          "File holding the fleet token (the router's --fleet_token_file); sent on every "
          "connection. Empty: none sent.");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA to verify the router's certificate when it runs --worker_tls; empty = "
          "plaintext.");
ABSL_FLAG(std::string, model_repo, "",
          "Model repository: the folder holding the packages (<repo>/<model>/profile.json + "
          "checkpoint), e.g. models, not one package such as models/fmnist.");
ABSL_FLAG(std::string, models, "", "Comma-separated subset of the repository's models (default: all).");
ABSL_FLAG(int32_t, threads, 1, "Intra-op threads for the torch executor, 1 to 1024.");
ABSL_FLAG(std::string, device, "cpu",
          "Where the torch executor keeps the supernets and runs batches: cpu, cuda or cuda:N "
          "(cuda needs a worker built against a CUDA LibTorch: docs/gpu.md).");
ABSL_FLAG(std::string, measure_profiles_to, "",
          "Profile this machine instead of serving: load every supernet of --model_repo (or "
          "--models) on --device, measure its latency table (every subnet at every batch size, "
          "median of 7), write a copy of its folder with the measured profile.json to "
          "DIR/<model>/ and exit. DIR is then a repository profiled where it will run "
          "(docs/gpu.md).");
ABSL_FLAG(bool, emulate, false,
          "Sleep the profiled latency instead of running torch (reported at registration).");
ABSL_FLAG(int64_t, memory_budget_mb, 0,
          "Model memory this worker may use, MiB. 0 = unlimited: every model of the repository "
          "(or --models) is loaded at start-up and stays. > 0: none is loaded at start-up; the "
          "router loads and unloads them as demand asks, within the budget, counting each "
          "model's footprint as measured when it is loaded (torch: its parameters and buffers; "
          "--emulate: its profile's memory_bytes). docs/engine.md, Placement.");
ABSL_FLAG(int32_t, instances, 1,
          "Independent workers in this process, each with its own stream (needs --emulate); "
          "1 to 4096.");
ABSL_FLAG(std::string, name, "", "Worker id reported to the router (default: worker-<pid>).");
ABSL_FLAG(double, connect_timeout_s, 30,
          "How long the first registration may take (the router may start later); the worker "
          "exits with status 1 when it passes. <= 0 waits forever; at most 10^6.");
ABSL_FLAG(bool, reconnect, true,
          "Once registered, survive the router: when the stream ends (router restarted or gone, "
          "connection broken, or the router dropped this worker), dial again with capped "
          "exponential backoff, forever, and register anew. false: exit when the stream ends.");
ABSL_FLAG(int32_t, reconnect_initial_backoff_ms, 100,
          "First delay between reconnection attempts, ms; doubles per failed attempt.");
ABSL_FLAG(int32_t, reconnect_max_backoff_ms, 2000,
          "Cap on the delay between reconnection attempts, ms (each delay is drawn from "
          "[0.8, 1] of the capped value). Bounds how long after a router restart the fleet is "
          "back.");
ABSL_FLAG(double, slowdown, 1.0,
          "Testing, with --emulate: every batch takes this many times its profiled latency "
          "(a straggler; docs/faults.md); in (0, 1000].");
ABSL_FLAG(int32_t, keepalive_ms, 1000,
          "gRPC keepalive on the router connection: ping after this long without a frame "
          "from the router, drop the connection (and reconnect) when the ping is not answered "
          "within --keepalive_timeout_ms. Notices a path that silently stopped forwarding. "
          "0 = off.");
ABSL_FLAG(int32_t, keepalive_timeout_ms, 20000,
          "How long a keepalive ping may go unanswered before the worker drops its connection "
          "(gRPC's own default). Keep it above the router's --heartbeat_ms x "
          "--missed_heartbeats: a router stalled for less than that still counts this worker "
          "alive, and a shorter timeout would throw away the batches it holds.");

ABSL_FLAG(int32_t, start_delay_ms, 0,
          "Testing: wait this long before starting each batch (a worker delayed on purpose). "
          "A batch that cannot start within its action window is refused: the router re-queues "
          "its queries or answers them DEADLINE_EXCEEDED.");

namespace {

// Flag bounds (each refused with exit status 2).
constexpr int32_t kMaxThreads = 1024;       // intra-op threads
constexpr int32_t kMaxInstances = 4096;     // emulated workers in one process
constexpr double kMaxConnectTimeoutS = 1e6;  // 11.6 days; <= 0 is "forever"
constexpr double kMaxSlowdown = 1000;       // a straggler 1000 times slower
constexpr int64_t kMaxMemoryBudgetMb = int64_t{1} << 30;  // 1 PiB

// --measure_profiles_to: each loaded supernet's latency table measured on
// this worker, written with a copy of its folder (checkpoint, manifest).
int MeasureProfiles(superserve::Executor* executor,
                    const std::vector<superserve::ModelEntry>& models, const std::string& out_dir,
                    const std::string& device) {
  namespace fs = std::filesystem;
  using superserve::ModelProfile;
  int written = 0;
  for (const auto& m : models) {
    if (m.profile.is_dynamic) {
      SS_LOG(INFO) << "not measuring " << m.name
                   << ": a dynamic model's execution times depend on its inputs "
                      "(superserve-early-exit profile --device measures them)";
      continue;
    }
    auto measured = superserve::MeasureLatencies(executor, m);
    if (!measured.ok()) {
      SS_LOG(ERROR) << "measuring " << m.name << ": " << measured.status().message();
      return 1;
    }
    // Every slot is measured and written, the subnets loading left out as
    // dominated too: on this device's figures they may not be (which are
    // dominated is decided again when the written profile is loaded).
    ModelProfile profile = m.profile;
    profile.subnets = profile.EverySubnet();
    profile.left_out.clear();
    if (auto st = profile.FillLatencies(*measured); !st.ok()) {
      SS_LOG(ERROR) << "measuring " << m.name << ": " << st.message();
      return 1;
    }
    const size_t dominated_here = profile.left_out.size();
    profile.subnets = profile.EverySubnet();
    profile.left_out.clear();
    profile.measured_on = absl::StrCat("superserve-worker --device ", device);
    const fs::path dst = fs::path(out_dir) / m.name;
    std::error_code ec;
    fs::create_directories(dst, ec);
    fs::copy(m.directory, dst,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
    if (ec) {
      SS_LOG(ERROR) << "copying " << m.directory << " to " << dst << ": " << ec.message();
      return 1;
    }
    if (auto st = profile.SaveFile((dst / "profile.json").string()); !st.ok()) {
      SS_LOG(ERROR) << st.message();
      return 1;
    }
    const auto& smallest = profile.subnets.front().latency;
    SS_LOG(INFO) << "measured " << m.name << " on " << device << ": " << profile.subnets.size()
                 << " subnets (" << dominated_here << " dominated on these figures) x "
                 << profile.batch_sizes.size() << " batch sizes, first subnet "
                 << superserve::ToMillis(smallest.front()) << " ms at batch " << profile.batch_sizes.front()
                 << "; wrote " << (dst / "profile.json").string();
    ++written;
  }
  if (written == 0) {
    SS_LOG(ERROR) << "--measure_profiles_to: no supernet to measure";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace superserve;
  // --help leads with what a new user sets; reconnection tuning and testing
  // flags are behind --helpfull.
  SetHelpSections({
      {"Router and models", {"router", "model_repo", "models", "name"}},
      {"Tokens and TLS (docs/security.md)", {"fleet_token_file", "tls_ca_file"}},
      {"Execution",
       {"device", "threads", "memory_budget_mb", "emulate", "instances", "measure_profiles_to"}},
      {"Running", {"connect_timeout_s", "reconnect", "log_level"}},
  });
  InitMain(argc, argv,
           "superserve-worker --router ADDR --model-repo DIR [--threads N] [--emulate]\n"
           "                  [--fleet_token_file F] [--tls_ca_file CA]\n\n"
           "ADDR is the router's worker address (--worker_listen), not its client port.\n"
           "Dials the router, registers, heartbeats, loads each supernet once and runs every\n"
           "batch with the subnet the router chose; replies with outputs and exec time.\n"
           "The first registration must succeed within --connect_timeout_s. After that the\n"
           "worker outlives the router: when its stream ends it reconnects with capped\n"
           "exponential backoff (--reconnect_initial_backoff_ms, --reconnect_max_backoff_ms)\n"
           "and registers again; batches queued from the old stream are dropped (the router\n"
           "re-queues or answers them). --reconnect=false exits when the stream ends instead.");
  InstallShutdownSignalHandlers();

  const std::string repo = absl::GetFlag(FLAGS_model_repo);
  if (repo.empty()) {
    std::fprintf(stderr, "superserve-worker: --model-repo is required\n");
    return 2;
  }
  // Bounded before anything is loaded: --threads=1000000 used to start tens
  // of thousands of intra-op threads (the process then hung, deaf to
  // SIGTERM), --instances=10^8 as many links; a NaN or huge
  // --connect_timeout_s overflowed nanoseconds into "wait forever", and an
  // infinite --slowdown into a sleep of a negative or endless length.
  if (const int32_t t = absl::GetFlag(FLAGS_threads); t < 1 || t > kMaxThreads) {
    std::fprintf(stderr, "superserve-worker: --threads=%d must be in [1, %d]\n", t, kMaxThreads);
    return 2;
  }
  if (const int32_t n = absl::GetFlag(FLAGS_instances); n < 1 || n > kMaxInstances) {
    std::fprintf(stderr, "superserve-worker: --instances=%d must be in [1, %d]\n", n,
                 kMaxInstances);
    return 2;
  }
  if (const double t = absl::GetFlag(FLAGS_connect_timeout_s);
      !std::isfinite(t) || t > kMaxConnectTimeoutS) {
    std::fprintf(stderr,
                 "superserve-worker: --connect_timeout_s=%g must be a finite number of seconds "
                 "<= %g (<= 0 waits forever)\n",
                 t, kMaxConnectTimeoutS);
    return 2;
  }
  if (const double f = absl::GetFlag(FLAGS_slowdown); !(f > 0) || f > kMaxSlowdown) {
    std::fprintf(stderr, "superserve-worker: --slowdown=%g must be in (0, %g]\n", f, kMaxSlowdown);
    return 2;
  }
  const int64_t budget_mb = absl::GetFlag(FLAGS_memory_budget_mb);
  if (budget_mb < 0 || budget_mb > kMaxMemoryBudgetMb) {
    std::fprintf(stderr, "superserve-worker: --memory_budget_mb=%lld must be in [0, %lld]\n",
                 static_cast<long long>(budget_mb), static_cast<long long>(kMaxMemoryBudgetMb));
    return 2;
  }
  const int32_t initial_backoff_ms = absl::GetFlag(FLAGS_reconnect_initial_backoff_ms);
  const int32_t max_backoff_ms = absl::GetFlag(FLAGS_reconnect_max_backoff_ms);
  if (initial_backoff_ms <= 0 || max_backoff_ms < initial_backoff_ms) {
    std::fprintf(stderr,
                 "superserve-worker: need 0 < --reconnect_initial_backoff_ms <= "
                 "--reconnect_max_backoff_ms\n");
    return 2;
  }
  // The secrets first: a bad token file is reported before seconds of model
  // loading, not after.
  std::string fleet_token;
  if (const std::string f = absl::GetFlag(FLAGS_fleet_token_file); !f.empty()) {
    auto token = ReadSecretFile(f);
    if (!token.ok()) {
      SS_LOG(ERROR) << "--fleet_token_file: " << token.status().message();
      return 2;
    }
    fleet_token = *std::move(token);
  }
  std::string tls_ca_pem;
  if (const std::string f = absl::GetFlag(FLAGS_tls_ca_file); !f.empty()) {
    // Bounded, regular files only: /dev/zero used to be read until memory
    // ran out (std::bad_alloc, SIGABRT), a FIFO blocked forever.
    auto pem = ReadSmallFile(f, kMaxPemBytes);
    if (!pem.ok() || pem->empty()) {
      SS_LOG(ERROR) << "cannot read --tls_ca_file " << f
                    << (pem.ok() ? std::string(": empty") : ": " + std::string(pem.status().message()));
      return 2;
    }
    tls_ca_pem = *std::move(pem);
  }
  // A package folder passed as the repository used to leave the worker
  // serving nothing with a warning.
  if (auto st = CheckNotAPackage("--model_repo", repo); !st.ok()) {
    std::fprintf(stderr, "superserve-worker: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  auto all = LoadModelRepository(repo);
  if (!all.ok()) {
    SS_LOG(ERROR) << all.status().message();
    return 1;
  }
  // What the profile loader adjusted (dips raised, dominated subnets left out).
  for (const auto& m : *all) {
    for (const std::string& w : m.profile.warnings) SS_LOG(WARNING) << w;
  }
  std::vector<ModelEntry> models;
  const std::string subset = absl::GetFlag(FLAGS_models);
  const std::string measure_to = absl::GetFlag(FLAGS_measure_profiles_to);
  // A name of --models that the repository lacks (a typo) used to be
  // skipped without a word when another name matched.
  for (absl::string_view want : absl::StrSplit(subset, ',', absl::SkipEmpty())) {
    bool found = false;
    std::vector<std::string> names;
    for (const auto& m : *all) {
      found = found || m.name == want;
      names.push_back(m.name);
    }
    if (!found) {
      SS_LOG(ERROR) << "--models: " << want << " is not in " << repo << " (it holds: "
                    << (names.empty() ? std::string("nothing") : absl::StrJoin(names, ", "))
                    << ")";
      return 1;
    }
  }
  // Measuring takes minutes: its output folder is checked first.
  if (!measure_to.empty()) {
    if (auto st = MakeOutputDirectory("--measure_profiles_to", measure_to); !st.ok()) {
      std::fprintf(stderr, "superserve-worker: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  }
  for (auto& m : *all) {
    if (!m.profile.latencies_measured && measure_to.empty()) {
      // Its latencies are measured when the router sends it (a package the
      // router's repository or superserve-admin register holds).
      SS_LOG(INFO) << "not loading " << m.name << " at start-up: its profile leaves latency_us "
                   << "out; the router sends it for this worker to load and measure";
      continue;
    }
    if (subset.empty()) {
      models.push_back(m);
      continue;
    }
    for (absl::string_view want : absl::StrSplit(subset, ',')) {
      if (want == m.name) models.push_back(m);
    }
  }
  if (models.empty() && !subset.empty()) {
    SS_LOG(ERROR) << "--models=" << subset << ": none of these is in " << repo;
    return 1;
  }
  if (models.empty()) {
    SS_LOG(WARNING) << "no models in " << repo
                    << ": this worker serves what the router registers at run time";
  }
  const bool emulate = absl::GetFlag(FLAGS_emulate);
  const int instances = absl::GetFlag(FLAGS_instances);
  if (instances > 1 && !emulate) {
    std::fprintf(stderr, "superserve-worker: --instances > 1 needs --emulate\n");
    return 2;
  }
  std::unique_ptr<Executor> executor;
  if (emulate) {
    const double slowdown = absl::GetFlag(FLAGS_slowdown);
    executor = std::make_unique<EmulatedExecutor>(slowdown);
  } else {
    auto e = MakeTorchExecutor(absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_device));
    if (!e.ok()) {
      SS_LOG(ERROR) << e.status().message();
      return 1;
    }
    executor = *std::move(e);
  }
  // With a budget the models wait for the router's LoadModel (placement).
  const bool budgeted = budget_mb > 0 && measure_to.empty();
  if (budgeted) {
    SS_LOG(INFO) << "memory budget " << budget_mb << " MiB: " << models.size()
                 << " models loadable, none loaded until the router asks";
  }
  for (const auto& m : models) {
    if (budgeted) break;
    if (auto s = executor->Load(m); !s.ok()) {
      SS_LOG(ERROR) << "loading " << m.name << ": " << s.message();
      return 1;
    }
    SS_LOG(INFO) << "loaded " << m.name << " (" << m.profile.subnets.size() << " subnets, "
                 << executor->kind() << ")";
  }
  if (!measure_to.empty()) {
    if (emulate) {
      std::fprintf(stderr, "superserve-worker: --measure_profiles_to needs the torch executor\n");
      return 2;
    }
    return MeasureProfiles(executor.get(), models, measure_to, absl::GetFlag(FLAGS_device));
  }
  // The router refuses a model whose version differs from its own copy.
  std::vector<v1::ModelVersion> versions;
  for (const auto& m : models) {
    auto digest = DigestModelDirectory(m.directory);
    if (!digest.ok()) {
      SS_LOG(ERROR) << "digest of " << m.name << ": " << digest.status().message();
      return 1;
    }
    v1::ModelVersion v;
    v.set_model(m.name);
    v.set_profile_digest(digest->profile);
    v.set_checkpoint_digest(digest->checkpoint);
    versions.push_back(std::move(v));
  }
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty()) name = absl::StrCat("worker-", getpid());

  std::vector<std::unique_ptr<Executor>> instance_executors;
  std::vector<std::unique_ptr<RouterLink>> links;
  for (int i = 0; i < instances; ++i) {
    RouterLinkOptions o;
    o.router = absl::GetFlag(FLAGS_router);
    o.name = instances > 1 ? absl::StrCat(name, ".", i) : name;
    o.intra_op_threads = absl::GetFlag(FLAGS_threads);
    o.channel_tag = i;
    o.connect_timeout = Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
    o.reconnect = absl::GetFlag(FLAGS_reconnect);
    o.reconnect_initial_backoff = Millis(initial_backoff_ms);
    o.reconnect_max_backoff = Millis(max_backoff_ms);
    o.fleet_token = fleet_token;
    o.tls_ca_pem = tls_ca_pem;
    o.versions = versions;
    o.start_delay = Millis(std::max(0, absl::GetFlag(FLAGS_start_delay_ms)));
    o.keepalive = Millis(std::max(0, absl::GetFlag(FLAGS_keepalive_ms)));
    o.keepalive_timeout = Millis(std::max(1, absl::GetFlag(FLAGS_keepalive_timeout_ms)));
    o.memory_budget = budgeted ? budget_mb << 20 : 0;
    // Emulated instances share one (stateless) executor, unless each loads
    // and unloads its own models (a budget): then each gets its own.
    Executor* e = executor.get();
    if (budgeted && i > 0) {
      instance_executors.push_back(std::make_unique<EmulatedExecutor>(absl::GetFlag(FLAGS_slowdown)));
      e = instance_executors.back().get();
    }
    links.push_back(std::make_unique<RouterLink>(o, e, models));
  }
  std::atomic<int> failures{0};
  std::atomic<int> running{instances};
  std::vector<std::thread> threads;
  for (auto& link : links) {
    threads.emplace_back([&, l = link.get()] {
      absl::Status s = l->Run();
      if (!s.ok()) {
        SS_LOG(ERROR) << "worker link: " << s.message();
        failures++;
      }
      // The last link to end wakes main.
      if (--running == 0) RequestShutdown();
    });
  }
  WaitForShutdownSignal();
  for (auto& link : links) link->Stop();
  for (auto& t : threads) t.join();
  int64_t batches = 0, reconnects = 0;
  for (auto& link : links) {
    batches += link->batches_run();
    reconnects += link->reconnects();
  }
  SS_LOG(INFO) << "worker " << name << " exiting after " << batches << " batches, " << reconnects
               << " reconnects";
  return failures > 0 ? 1 : 0;
}
