// superserve-router: the serving front end. See docs/engine.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/baselines/baselines.h"
#include "common/init.h"
#include "common/logging.h"
#include "common/model_repository.h"
#include "common/secret.h"
#include "common/shutdown_signal.h"
#include "policies/policy_factory.h"
#include "policies/policy_flags.h"
#include "router/router_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:8500",
          "Client gRPC address: Inference, Admin, health, reflection (port 0 picks a free one).");
ABSL_FLAG(std::string, worker_listen, "127.0.0.1:8501",
          "WorkerLink address, apart from the client port; workers dial it (their --router). A "
          "non-loopback address needs --fleet_token_file or --allow_unauthenticated_workers.");
ABSL_FLAG(std::string, fleet_token_file, "",
          "File holding the fleet token every worker must present (its own --fleet_token_file). "
          "Empty: workers are not authenticated (allowed on a loopback --worker_listen only, "
          "with a warning).");
ABSL_FLAG(bool, allow_unauthenticated_workers, false,
          "Accept workers without a fleet token on a non-loopback --worker_listen (unsafe).");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate (chain) for TLS on the client port; needs --tls_key_file.");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA: clients must present a certificate it signed (mutual TLS).");
ABSL_FLAG(bool, worker_tls, false,
          "The worker port uses TLS too, with the same certificate (workers: --tls_ca_file).");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the Admin bearer token that superserve-admin presents (its own "
          "--admin_token_file or $SUPERSERVE_ADMIN_TOKEN); preferred over --admin_token, which "
          "shows in the process list. Make one: head -c 32 /dev/urandom | base64 > admin.token; "
          "chmod 600 admin.token. One line of printable ASCII (0x20-0x7E), any length; "
          "surrounding whitespace is dropped. Never logged. Without a token the Admin service "
          "is off.");
ABSL_FLAG(int64_t, max_applications, 1024,
          "Distinct application tags the router tracks; a query with a new tag beyond it is "
          "INVALID_ARGUMENT. 0 = unbounded.");
ABSL_FLAG(int64_t, max_stream_unsent_answers, 4096,
          "Answers an InferStream may pile up while its client does not read; beyond it the "
          "stream is finished RESOURCE_EXHAUSTED. 0 = unbounded.");
ABSL_FLAG(int32_t, max_concurrent_streams, 16384,
          "Calls one client connection may have open at once on the client port (HTTP/2 "
          "MAX_CONCURRENT_STREAMS); further calls wait in the client. 0 = no limit.");
ABSL_FLAG(bool, inline_call_completion, true,
          "Let gRPC finish a unary call on the thread that completes it instead of its "
          "executor thread (saves a thread wake-up per query; relies on a gRPC hook marked "
          "not-API, docs/decisions/inline-call-completion.md). false if a gRPC upgrade "
          "misbehaves.");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20,
          "Largest gRPC message accepted or sent on the client port; larger is "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:0",
          "Prometheus text endpoint address (port 0 picks one; empty disables).");
ABSL_FLAG(std::string, model_repo, "",
          "Model repository: serves every <dir>/<model>/profile.json (the folder holding the "
          "packages, e.g. models, not one package such as models/fmnist).");
ABSL_FLAG(double, repository_poll_s, 0,
          "Re-scan --model_repo every this many seconds and register new packages, new "
          "versions and removals (Triton's poll mode; docs/packages.md). 0 = off.");
// The policy flags (--policy, --fixed_subnet, --ratefit_pace, ...) are
// policies/policy_flags.h's, shared with superserve-sim and superserve-repro.
ABSL_FLAG(std::string, dynamic_policy, "orloj",
          "Policy of dynamic models (profiles with a `dynamic` block): orloj (the product); the "
          "baselines clockwork, nexus.");
ABSL_FLAG(std::vector<std::string>, model_policy, {},
          "Per-model policy overrides, comma-separated MODEL=POLICY (e.g. "
          "fmnist-exit=clockwork); the rest get --policy or --dynamic_policy.");
ABSL_FLAG(int32_t, lookahead, 1, "Batches a worker may hold at once (k-batch lookahead).");
ABSL_FLAG(bool, per_worker_speed, true,
          "Per-worker latency estimates: a worker measured slower than the fleet (a straggler) "
          "is given batches planned for its speed, and its measurements do not raise the "
          "fleet's estimates (docs/faults.md). false: one estimate for all workers.");
ABSL_FLAG(bool, shed_overload, true,
          "Past the peak, shed what cannot be served in time: answer DEADLINE_EXCEEDED on "
          "arrival when the queue ahead leaves no time at the achievable batch throughput, and "
          "drop a backlogged queue's head that is too late for an efficient batch (every "
          "policy; docs/engine.md, \"Overload\"). false: EDF serves every feasible head.");
ABSL_FLAG(double, default_slo_ms, 100, "Deadline for queries whose client set none, ms.");
ABSL_FLAG(int64_t, max_queue, 100000, "Pending queries per model before RESOURCE_EXHAUSTED.");
ABSL_FLAG(int32_t, heartbeat_ms, 500, "Worker heartbeat interval, ms.");
ABSL_FLAG(int32_t, missed_heartbeats, 2,
          "Silent heartbeat intervals that mark a worker dead (a partitioned worker is "
          "detected within this many intervals plus 10 ms).");
ABSL_FLAG(std::string, admin_token, "",
          "Bearer token for the Admin service (default: $SUPERSERVE_ADMIN_TOKEN; empty = Admin "
          "disabled).");
ABSL_FLAG(double, drain_timeout_s, 10,
          "On SIGTERM/SIGINT: stop accepting (health NOT_SERVING, new queries UNAVAILABLE) and "
          "serve what is queued for at most this long, then answer the rest UNAVAILABLE and "
          "exit. 0 = no drain.");
ABSL_FLAG(std::string, port_file, "",
          "Write \"grpc=PORT\\nworker=PORT\\nmetrics=PORT\\n\" here once serving (for scripts "
          "and tests).");

namespace {

// A numeric flag outside its range is a start-up error naming it: such
// values used to be taken as given (--heartbeat_ms=0, --missed_heartbeats=0)
// or quietly clamped (--lookahead=0, --max_message_bytes=-1).
template <typename T>
bool FlagInRange(const char* flag, T value, T lo, T hi) {
  if (value >= lo && value <= hi) return true;  // false for NaN too
  std::fprintf(stderr, "superserve-router: --%s=%s is out of range [%s, %s]\n", flag,
               absl::StrCat(value).c_str(), absl::StrCat(lo).c_str(), absl::StrCat(hi).c_str());
  return false;
}

bool NumericFlagsInRange() {
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  return FlagInRange("heartbeat_ms", absl::GetFlag(FLAGS_heartbeat_ms), 1, 3600 * 1000) &&
         FlagInRange("missed_heartbeats", absl::GetFlag(FLAGS_missed_heartbeats), 1, kMax32) &&
         FlagInRange("lookahead", absl::GetFlag(FLAGS_lookahead), 1, kMax32) &&
         FlagInRange<int64_t>("max_message_bytes", absl::GetFlag(FLAGS_max_message_bytes), 1024,
                              kMax32) &&
         FlagInRange("max_concurrent_streams", absl::GetFlag(FLAGS_max_concurrent_streams), 0,
                     kMax32) &&
         FlagInRange<int64_t>("max_stream_unsent_answers",
                              absl::GetFlag(FLAGS_max_stream_unsent_answers), 0, kMax64) &&
         FlagInRange<int64_t>("max_applications", absl::GetFlag(FLAGS_max_applications), 0,
                              kMax64) &&
         FlagInRange<int64_t>("max_queue", absl::GetFlag(FLAGS_max_queue), 1, kMax64) &&
         FlagInRange("default_slo_ms", absl::GetFlag(FLAGS_default_slo_ms), 1e-3, 86400e3) &&
         FlagInRange("drain_timeout_s", absl::GetFlag(FLAGS_drain_timeout_s), 0.0, 86400.0);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace superserve;
  // The paper baselines (slackfit, maxbatch, ...), selectable with --policy
  // for comparisons: the one bench/ piece the router links.
  RegisterBaselinePolicies();
  std::string usage = absl::StrCat(
      "superserve-router --model-repo DIR [--policy NAME] [--listen ADDR] [flags]\n\n"
      "Serves Inference.Infer: every query waits in its model's EDF queue until the policy\n"
      "dispatches it to a worker (workers dial in over WorkerLink, on --worker_listen).\n"
      "TLS, tokens and memory bounds: docs/security.md. Also serves Admin,\n"
      "grpc.health.v1, server reflection and Prometheus metrics. The policy flags and their\n"
      "defaults are superserve-sim's (one shared set); --print-policy-config prints the\n"
      "effective configuration.\nPolicies: ");
  for (const auto& name : PolicyNames()) absl::StrAppend(&usage, name, " ");
  absl::StrAppend(&usage, "\nDynamic-model policies (--dynamic_policy): ");
  for (const auto& name : DynamicPolicyNames()) absl::StrAppend(&usage, name, " ");
  // --help leads with what a new user sets; policy tuning and limits are
  // behind --helpfull.
  SetHelpSections({
      {"Addresses (the printed line \"listening grpc=P worker=P metrics=P\" gives the ports)",
       {"listen", "worker_listen", "metrics_listen", "port_file"}},
      {"Models",
       {"model_repo", "repository_poll_s", "policy", "dynamic_policy", "model_policy",
        "default_slo_ms"}},
      {"Tokens", {"fleet_token_file", "admin_token_file", "allow_unauthenticated_workers"}},
      {"TLS (docs/security.md)",
       {"tls_cert_file", "tls_key_file", "tls_client_ca_file", "worker_tls"}},
      {"Running", {"drain_timeout_s", "log_level"}},
  });
  InitMain(argc, argv, usage);
  PolicySpec policy = PolicySpecFromFlagsOrExit("superserve-router");

  if (!NumericFlagsInRange()) return 2;
  InstallShutdownSignalHandlers();

  RouterServerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.worker_listen = absl::GetFlag(FLAGS_worker_listen);
  o.allow_unauthenticated_workers = absl::GetFlag(FLAGS_allow_unauthenticated_workers);
  o.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  o.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  o.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  o.worker_tls = absl::GetFlag(FLAGS_worker_tls);
  // In range (NumericFlagsInRange).
  o.max_message_bytes = static_cast<int32_t>(absl::GetFlag(FLAGS_max_message_bytes));
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  o.inline_call_completion = absl::GetFlag(FLAGS_inline_call_completion);
  o.max_stream_unsent_answers =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_stream_unsent_answers));
  o.dispatcher.serving.max_applications =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_applications));
  if (const std::string f = absl::GetFlag(FLAGS_fleet_token_file); !f.empty()) {
    auto token = ReadSecretFile(f);
    if (!token.ok()) {
      SS_LOG(ERROR) << "router: --fleet_token_file: " << token.status().message();
      return 2;
    }
    o.fleet_token = *std::move(token);
  }
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.model_repo = absl::GetFlag(FLAGS_model_repo);
  {
    const double poll_s = absl::GetFlag(FLAGS_repository_poll_s);
    if (!(poll_s >= 0) || poll_s > 86400) {
      std::fprintf(stderr, "superserve-router: --repository_poll_s must be in [0, 86400]\n");
      return 2;
    }
    o.repository_poll = Seconds(poll_s);
  }
  o.default_slo = Millis(absl::GetFlag(FLAGS_default_slo_ms));
  // Every source of the admin token is checked as ReadSecretFile checks a
  // file: a token gRPC cannot carry would make every superserve-admin abort.
  o.admin_token = absl::GetFlag(FLAGS_admin_token);
  if (auto s = CheckSecret(o.admin_token, "--admin_token"); !s.ok()) {
    SS_LOG(ERROR) << "router: " << s.message();
    return 2;
  }
  if (const std::string f = absl::GetFlag(FLAGS_admin_token_file); !f.empty()) {
    auto token = ReadSecretFile(f);
    if (!token.ok()) {
      SS_LOG(ERROR) << "router: --admin_token_file: " << token.status().message();
      return 2;
    }
    o.admin_token = *std::move(token);
  }
  if (o.admin_token.empty()) {
    auto token = ReadSecretEnv("SUPERSERVE_ADMIN_TOKEN");
    if (!token.ok()) {
      SS_LOG(ERROR) << "router: " << token.status().message();
      return 2;
    }
    if (token->has_value()) o.admin_token = **std::move(token);
  }
  o.dispatcher.policy = policy.name;
  o.dispatcher.policy_config = policy.config;
  o.dispatcher.dynamic_policy = absl::GetFlag(FLAGS_dynamic_policy);
  for (const std::string& item : absl::GetFlag(FLAGS_model_policy)) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      SS_LOG(ERROR) << "router: --model_policy entry \"" << item << "\" is not MODEL=POLICY";
      return 2;
    }
    o.dispatcher.model_policies[kv[0]] = kv[1];
  }
  o.dispatcher.serving.lookahead = absl::GetFlag(FLAGS_lookahead);
  o.dispatcher.serving.max_queue = static_cast<size_t>(absl::GetFlag(FLAGS_max_queue));
  o.dispatcher.serving.heartbeat_interval = Millis(absl::GetFlag(FLAGS_heartbeat_ms));
  o.dispatcher.serving.missed_heartbeats = absl::GetFlag(FLAGS_missed_heartbeats);
  o.dispatcher.serving.overload.shed = absl::GetFlag(FLAGS_shed_overload);
  o.dispatcher.serving.per_worker_speed = absl::GetFlag(FLAGS_per_worker_speed);
  if (o.model_repo.empty()) {
    std::fprintf(stderr, "superserve-router: --model-repo is required\n");
    return 2;
  }
  // Addresses and TLS flags: a usage error (2) rather than Start's 1. A
  // package folder passed as the repository served nothing (with an admin
  // token) or said "has no <model>/profile.json" though it has one.
  if (auto s = CheckRouterServerOptions(o); !s.ok()) {
    std::fprintf(stderr, "superserve-router: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (auto s = CheckNotAPackage("--model_repo", o.model_repo); !o.model_repo.empty() && !s.ok()) {
    std::fprintf(stderr, "superserve-router: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  RouterServer server(o);
  if (auto s = server.Start(); !s.ok()) {
    SS_LOG(ERROR) << "router: " << s.message();
    return 1;
  }
  SS_LOG(INFO) << "router serving on port " << server.port() << " ("
               << (o.tls_cert_file.empty() ? "plaintext" : "TLS") << ", workers on port "
               << server.worker_port() << (o.fleet_token.empty() ? "" : " with fleet token")
               << ", metrics port "
               << server.metrics_port() << ", policy " << o.dispatcher.policy << ", lookahead "
               << o.dispatcher.serving.lookahead << ")";
  SS_LOG(INFO) << "router: policy configuration " << PolicySpecJson(policy);
  std::printf("listening grpc=%d worker=%d metrics=%d\n", server.port(), server.worker_port(),
              server.metrics_port());
  std::fflush(stdout);
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    std::string tmp = path + ".tmp";
    std::ofstream(tmp) << "grpc=" << server.port() << "\nworker=" << server.worker_port()
                       << "\nmetrics=" << server.metrics_port() << "\n";
    std::rename(tmp.c_str(), path.c_str());
  }
  int sig = WaitForShutdownSignal();
  const double drain_s = absl::GetFlag(FLAGS_drain_timeout_s);
  SS_LOG(INFO) << "router: signal " << sig << ", draining (at most " << drain_s << " s)";
  const bool drained = server.Drain(Seconds(drain_s));
  auto stats = server.dispatcher()->Stats();
  SS_LOG(INFO) << "router: " << (drained ? "drained" : "drain timed out") << ", " << stats.pending
               << " queries still pending; shutting down";
  server.Shutdown();
  SS_LOG(INFO) << "router: accepted " << stats.accepted << ", answered " << stats.answered
               << ", requeued " << stats.requeued << ", batches " << stats.batches;
  return 0;
}
