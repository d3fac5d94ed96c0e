#ifndef SUPERSERVE_BENCH_HARNESS_LOCAL_CLUSTER_H_
#define SUPERSERVE_BENCH_HARNESS_LOCAL_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/subprocess.h"
#include "common/time.h"

namespace superserve {

// A router and its workers as child processes on 127.0.0.1 with ports picked
// at run time (port 0, read back from the router's --port_file): the client
// port, the worker port, the metrics port. Tokens go through files
// (<work_dir>/admin.token, fleet.token), never the command line. For
// integration tests and benchmarks; everything is stopped on destruction, and
// the children die with this process (see Subprocess).
struct LocalClusterOptions {
  std::string bin_dir;     // holds superserve-router and superserve-worker
  std::string model_repo;
  std::string work_dir;    // logs and port file go here (must exist)
  std::string policy;      // --policy; empty: the router's default
  int workers = 2;         // worker processes
  int instances_per_worker = 1;  // worker --instances (emulated fleets)
  bool emulate = false;
  std::vector<std::string> router_flags;  // extra flags, e.g. "--lookahead=2"
  std::vector<std::string> worker_flags;
  // A fresh random fleet token in <work_dir>/fleet.token, given to the router
  // and every worker; false: none (the router warns, loopback only).
  bool fleet_token = true;
  // When router_flags turn TLS on: the CA this cluster's own Admin calls
  // verify the router against (the certificate must name 127.0.0.1).
  std::string tls_ca_file;
  Nanos startup_timeout = Seconds(60);
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();

  std::string router_address() const;
  int router_port() const { return port_; }
  // Where workers dial (the router's --worker_listen).
  std::string worker_address() const;
  int worker_port() const { return worker_port_; }
  const std::string& fleet_token_file() const { return fleet_token_file_; }
  int metrics_port() const { return metrics_port_; }
  const std::string& admin_token() const { return token_; }
  Subprocess& router() { return router_; }
  Subprocess& worker(int i) { return workers_[i]; }
  int num_workers() const { return static_cast<int>(workers_.size()); }

  // Starts one more worker process (returns its index), with `extra_flags`
  // after the options' worker flags.
  absl::StatusOr<int> AddWorker(const std::vector<std::string>& extra_flags = {});
  // Polls Admin.ListModels until every model has >= n live workers.
  absl::Status WaitForWorkers(int n, Nanos timeout);
  // Worker counts per model from Admin.ListModels.
  absl::StatusOr<std::vector<std::pair<std::string, int>>> WorkersPerModel();
  // Fetches http://127.0.0.1:<metrics_port>/metrics.
  absl::StatusOr<std::string> ScrapeMetrics();
  // The router's accepted / answered / pending from its metrics.
  absl::StatusOr<struct RouterTotals> ScrapeRouterTotals();

  // Sends the router `signal` (SIGTERM: it drains and exits; SIGKILL), waits
  // for its exit, stays down `down`, then starts a new router on the same
  // three ports (the workers reconnect by themselves). Returns the old
  // router's wait status. Router n's log is router_log(n) (0: router.log).
  absl::StatusOr<int> RestartRouter(int signal, Nanos down = 0);
  std::string router_log(int generation) const;
  int router_generation() const { return router_starts_ - 1; }
  void Stop();

 private:
  LocalCluster() = default;
  absl::Status StartRouter();
  LocalClusterOptions options_;
  int router_starts_ = 0;
  Subprocess router_;
  std::vector<Subprocess> workers_;
  int port_ = 0;
  int worker_port_ = 0;
  int metrics_port_ = 0;
  std::string token_;
  std::string fleet_token_file_;
};

// The router's side of the exactly-once count: every accepted query is
// answered once, so accepted == answered + pending at any moment and
// answered == accepted once it has exited.
struct RouterTotals {
  int64_t accepted = 0;
  int64_t answered = 0;
  int64_t pending = 0;
};

// The totals a router logged when it exited (after a drain or SIGTERM; a
// SIGKILLed router logs none: NOT_FOUND).
absl::StatusOr<RouterTotals> RouterExitTotals(absl::string_view log);

// The value of the Prometheus series `series` (name and labels, exactly as
// exposed) in a text exposition.
absl::StatusOr<double> MetricValue(absl::string_view text, absl::string_view series);

// Fetches an http://127.0.0.1:PORT/PATH text page (plain HTTP/1.0 GET).
absl::StatusOr<std::string> HttpGetLocal(int port, const std::string& path);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_HARNESS_LOCAL_CLUSTER_H_
