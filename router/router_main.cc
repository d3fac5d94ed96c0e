// superserve-router: the serving front end. See docs/engine.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/init.h"
#include "common/logging.h"
#include "common/shutdown_signal.h"
#include "policies/policy_factory.h"
#include "policies/policy_flags.h"
#include "router/router_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:8500", "gRPC listen address (port 0 picks a free one).");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:0",
          "Prometheus text endpoint address (port 0 picks one; empty disables).");
ABSL_FLAG(std::string, model_repo, "", "Model repository: serves every <dir>/<model>/profile.json.");
// The policy flags (--policy, --buckets, --drop_below_first_bucket, ...) are
// policies/policy_flags.h's, shared with superserve-sim and superserve-repro.
ABSL_FLAG(int32_t, lookahead, 1, "Batches a worker may hold at once (k-batch lookahead).");
ABSL_FLAG(bool, shed_overload, true,
          "Past the peak, shed what cannot be served in time: answer DEADLINE_EXCEEDED on "
          "arrival when the queue ahead leaves no time at the achievable batch throughput, and "
          "drop a backlogged queue's head that is too late for an efficient batch (every "
          "policy; docs/engine.md, \"Overload\"). false: EDF serves every feasible head.");
ABSL_FLAG(double, default_slo_ms, 100, "Deadline for queries whose client set none, ms.");
ABSL_FLAG(int64_t, max_queue, 100000, "Pending queries per model before RESOURCE_EXHAUSTED.");
ABSL_FLAG(int32_t, heartbeat_ms, 500, "Worker heartbeat interval, ms.");
ABSL_FLAG(int32_t, missed_heartbeats, 4, "Silent heartbeat intervals that mark a worker dead.");
ABSL_FLAG(std::string, admin_token, "",
          "Bearer token for the Admin service (default: $SUPERSERVE_ADMIN_TOKEN; empty = Admin "
          "disabled).");
ABSL_FLAG(double, drain_timeout_s, 10,
          "On SIGTERM/SIGINT: stop accepting (health NOT_SERVING, new queries UNAVAILABLE) and "
          "serve what is queued for at most this long, then answer the rest UNAVAILABLE and "
          "exit. 0 = no drain.");
ABSL_FLAG(std::string, port_file, "",
          "Write \"grpc=PORT\\nmetrics=PORT\\n\" here once serving (for scripts and tests).");

int main(int argc, char** argv) {
  using namespace superserve;
  std::string usage = absl::StrCat(
      "superserve-router --model-repo DIR [--policy NAME] [--listen ADDR] [flags]\n\n"
      "Serves Inference.Infer: every query waits in its model's EDF queue until the policy\n"
      "dispatches it to a worker (workers dial in over WorkerLink). Also serves Admin,\n"
      "grpc.health.v1, server reflection and Prometheus metrics. The policy flags and their\n"
      "defaults are superserve-sim's (one shared set); --print-policy-config prints the\n"
      "effective configuration.\nPolicies: ");
  for (const auto& name : PolicyNames()) absl::StrAppend(&usage, name, " ");
  InitMain(argc, argv, usage);
  PolicySpec policy = PolicySpecFromFlagsOrExit("superserve-router");

  InstallShutdownSignalHandlers();

  RouterServerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.model_repo = absl::GetFlag(FLAGS_model_repo);
  o.default_slo = Millis(absl::GetFlag(FLAGS_default_slo_ms));
  o.admin_token = absl::GetFlag(FLAGS_admin_token);
  if (o.admin_token.empty() && std::getenv("SUPERSERVE_ADMIN_TOKEN") != nullptr) {
    o.admin_token = std::getenv("SUPERSERVE_ADMIN_TOKEN");
  }
  o.dispatcher.policy = policy.name;
  o.dispatcher.policy_config = policy.config;
  o.dispatcher.serving.lookahead = std::max(1, absl::GetFlag(FLAGS_lookahead));
  o.dispatcher.serving.max_queue = static_cast<size_t>(absl::GetFlag(FLAGS_max_queue));
  o.dispatcher.serving.heartbeat_interval = Millis(absl::GetFlag(FLAGS_heartbeat_ms));
  o.dispatcher.serving.missed_heartbeats = absl::GetFlag(FLAGS_missed_heartbeats);
  o.dispatcher.serving.overload.shed = absl::GetFlag(FLAGS_shed_overload);
  if (o.model_repo.empty()) {
    std::fprintf(stderr, "superserve-router: --model-repo is required\n");
    return 2;
  }
  RouterServer server(o);
  if (auto s = server.Start(); !s.ok()) {
    SS_LOG(ERROR) << "router: " << s.message();
    return 1;
  }
  SS_LOG(INFO) << "router serving on port " << server.port() << " (metrics port "
               << server.metrics_port() << ", policy " << o.dispatcher.policy << ", lookahead "
               << o.dispatcher.serving.lookahead << ")";
  SS_LOG(INFO) << "router: policy configuration " << PolicySpecJson(policy);
  std::printf("listening grpc=%d metrics=%d\n", server.port(), server.metrics_port());
  std::fflush(stdout);
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    std::string tmp = path + ".tmp";
    std::ofstream(tmp) << "grpc=" << server.port() << "\nmetrics=" << server.metrics_port() << "\n";
    std::rename(tmp.c_str(), path.c_str());
  }
  int sig = WaitForShutdownSignal();
  const double drain_s = std::max(0.0, absl::GetFlag(FLAGS_drain_timeout_s));
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
