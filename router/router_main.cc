// superserve-router: the serving front end. See docs/engine.md.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/init.h"
#include "common/logging.h"
#include "common/shutdown_signal.h"
#include "router/policy_factory.h"
#include "router/router_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:8500", "gRPC listen address (port 0 picks a free one).");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:0",
          "Prometheus text endpoint address (port 0 picks one; empty disables).");
ABSL_FLAG(std::string, model_repo, "", "Model repository: serves every <dir>/<model>/profile.json.");
ABSL_FLAG(std::string, policy, "slackfit", "Scheduling policy (see --help for the list).");
ABSL_FLAG(int32_t, fixed_subnet, -1,
          "Subnet id for --policy clipper+ (one fixed subnet); -1 = the most accurate.");
ABSL_FLAG(int32_t, slackfit_buckets, 0, "SlackFit latency buckets; 0 = the policy's default.");
// Live default: DESIGN.md's drop rule. The first-bucket rule (the simulator's
// default, SuperServe's reading) drops every query on a 2-core box where the
// workers share the cores with the router and the load generator: the
// online-corrected latencies (~2x the quiet profile) stretch the buckets, the
// p99 dispatch overhead reaches 10-30 ms, and together they exceed a 40 ms
// SLO (main job: attainment 0.06 with it, 0.99 without; docs/engine.md).
ABSL_FLAG(bool, slackfit_drop_below_first_bucket, false,
          "SlackFit: drop heads whose slack fits no bucket (SuperServe's reading, the "
          "simulator's default); false = drop only heads that not even the fastest tuple can "
          "still serve (DESIGN.md's rule).");
// Live default off: with it, tuples without enough telemetry are scaled by
// the median measured/profiled ratio of the measured ones; early in a run
// one measured tuple can set that ratio alone, and one stalled batch (an
// emulated 1 ms batch measured 93 ms on the shared cores) then scales every
// other tuple ~90x: every head looks infeasible and is dropped (engine
// integration test: attainment 0.59-0.95 with it, docs/engine.md). The
// simulator keeps it on (--follow_drift), as the reproduction was tuned.
ABSL_FLAG(bool, follow_drift, false,
          "Tuples without telemetry follow the median measured/profiled ratio of the measured "
          "ones (the simulator's default).");
ABSL_FLAG(double, overhead_quantile, -1,
          "Quantile of the measured dispatch overheads (round trip - execution) every policy "
          "plans with; < 0 = the policy default.");
ABSL_FLAG(int32_t, lookahead, 1, "Batches a worker may hold at once (k-batch lookahead).");
ABSL_FLAG(double, default_slo_ms, 100, "Deadline for queries whose client set none, ms.");
ABSL_FLAG(int64_t, max_queue, 100000, "Pending queries per model before RESOURCE_EXHAUSTED.");
ABSL_FLAG(int32_t, heartbeat_ms, 500, "Worker heartbeat interval, ms.");
ABSL_FLAG(int32_t, missed_heartbeats, 4, "Silent heartbeat intervals that mark a worker dead.");
ABSL_FLAG(std::string, admin_token, "",
          "Bearer token for the Admin service (default: $SUPERSERVE_ADMIN_TOKEN; empty = Admin "
          "disabled).");
ABSL_FLAG(std::string, port_file, "",
          "Write \"grpc=PORT\\nmetrics=PORT\\n\" here once serving (for scripts and tests).");

int main(int argc, char** argv) {
  using namespace superserve;
  std::string usage = absl::StrCat(
      "superserve-router --model-repo DIR [--policy NAME] [--listen ADDR] [flags]\n\n"
      "Serves Inference.Infer: every query waits in its model's EDF queue until the policy\n"
      "dispatches it to a worker (workers dial in over WorkerLink). Also serves Admin,\n"
      "grpc.health.v1, server reflection and Prometheus metrics.\nPolicies: ");
  for (const auto& name : PolicyFactory::Global().Names()) absl::StrAppend(&usage, name, " ");
  InitMain(argc, argv, usage);

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
  o.dispatcher.policy = absl::GetFlag(FLAGS_policy);
  o.dispatcher.policy_config.fixed_subnet_id = absl::GetFlag(FLAGS_fixed_subnet);
  if (const double q = absl::GetFlag(FLAGS_overhead_quantile); q >= 0) {
    if (q > 1) {
      std::fprintf(stderr, "superserve-router: --overhead_quantile must be in [0, 1], got %g\n", q);
      return 2;
    }
    o.dispatcher.policy_config.slackfit.base.overhead_quantile = q;
  }
  o.dispatcher.policy_config.slackfit.base.latency.unmeasured_follow_drift =
      absl::GetFlag(FLAGS_follow_drift);
  o.dispatcher.policy_config.slackfit.drop_below_first_bucket =
      absl::GetFlag(FLAGS_slackfit_drop_below_first_bucket);
  if (absl::GetFlag(FLAGS_slackfit_buckets) > 0) {
    o.dispatcher.policy_config.slackfit.num_buckets = absl::GetFlag(FLAGS_slackfit_buckets);
  }
  o.dispatcher.serving.lookahead = std::max(1, absl::GetFlag(FLAGS_lookahead));
  o.dispatcher.serving.max_queue = static_cast<size_t>(absl::GetFlag(FLAGS_max_queue));
  o.dispatcher.serving.heartbeat_interval = Millis(absl::GetFlag(FLAGS_heartbeat_ms));
  o.dispatcher.serving.missed_heartbeats = absl::GetFlag(FLAGS_missed_heartbeats);
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
  std::printf("listening grpc=%d metrics=%d\n", server.port(), server.metrics_port());
  std::fflush(stdout);
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    std::string tmp = path + ".tmp";
    std::ofstream(tmp) << "grpc=" << server.port() << "\nmetrics=" << server.metrics_port() << "\n";
    std::rename(tmp.c_str(), path.c_str());
  }
  int sig = WaitForShutdownSignal();
  SS_LOG(INFO) << "router: signal " << sig << ", shutting down";
  auto stats = server.dispatcher()->Stats();
  server.Shutdown();
  SS_LOG(INFO) << "router: accepted " << stats.accepted << ", answered " << stats.answered
               << ", requeued " << stats.requeued << ", batches " << stats.batches;
  return 0;
}
