#include "bench/harness/local_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "router/client/inference_client.h"
#include "superserve/v1/admin.grpc.pb.h"

namespace superserve {
namespace {

// Owner-only: a token file others can read is no secret.
absl::Status WriteSecret(const std::string& path, const std::string& secret) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", path));
  const bool ok = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ::close(fd);
  return ok ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  std::unique_ptr<LocalCluster> c(new LocalCluster());
  c->options_ = options;
  std::random_device rd;
  c->token_ = absl::StrCat("local-", rd(), "-", rd());
  const std::string admin_token_file = absl::StrCat(options.work_dir, "/admin.token");
  if (auto s = WriteSecret(admin_token_file, c->token_); !s.ok()) return s;
  if (options.fleet_token) {
    c->fleet_token_file_ = absl::StrCat(options.work_dir, "/fleet.token");
    if (auto s = WriteSecret(c->fleet_token_file_, absl::StrCat("fleet-", rd(), "-", rd(), "-", rd()));
        !s.ok()) {
      return s;
    }
  }
  if (auto s = c->StartRouter(); !s.ok()) return s;
  for (int i = 0; i < options.workers; ++i) {
    if (auto w = c->AddWorker(); !w.ok()) return w.status();
  }
  if (options.workers > 0) {
    if (auto s = c->WaitForWorkers(options.workers * options.instances_per_worker,
                                   options.startup_timeout);
        !s.ok()) {
      return s;
    }
  }
  return c;
}

absl::Status LocalCluster::StartRouter() {
  const LocalClusterOptions& options = options_;
  // The first router picks free ports; a restarted one binds the same three
  // again, so that workers (which keep dialling) and clients find it.
  const std::string suffix = router_starts_ == 0 ? "" : absl::StrCat(".", router_starts_);
  const std::string port_file = absl::StrCat(options.work_dir, "/router", suffix, ".ports");
  ::unlink(port_file.c_str());
  std::vector<std::string> argv = {
      absl::StrCat(options.bin_dir, "/superserve-router"),
      absl::StrCat("--listen=127.0.0.1:", port_),
      absl::StrCat("--worker_listen=127.0.0.1:", worker_port_),
      absl::StrCat("--metrics_listen=127.0.0.1:", metrics_port_),
      absl::StrCat("--model_repo=", options.model_repo),
      absl::StrCat("--admin_token_file=", options.work_dir, "/admin.token"),
      absl::StrCat("--port_file=", port_file)};
  if (!fleet_token_file_.empty()) {
    argv.push_back(absl::StrCat("--fleet_token_file=", fleet_token_file_));
  }
  if (!options.policy.empty()) argv.push_back(absl::StrCat("--policy=", options.policy));
  argv.insert(argv.end(), options.router_flags.begin(), options.router_flags.end());
  const std::string log = router_log(router_starts_);
  ++router_starts_;
  auto router = Subprocess::Start(argv, log);
  if (!router.ok()) return router.status();
  router_ = *std::move(router);
  auto ports = WaitForFile(port_file, options.startup_timeout, &router_);
  if (!ports.ok()) {
    return absl::Status(ports.status().code(),
                        absl::StrCat("router did not start (see ", log,
                                     "): ", ports.status().message()));
  }
  for (absl::string_view line : absl::StrSplit(*ports, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, '=');
    int v = 0;
    if (!absl::SimpleAtoi(kv.second, &v)) continue;
    if (kv.first == "grpc") port_ = v;
    if (kv.first == "worker") worker_port_ = v;
    if (kv.first == "metrics") metrics_port_ = v;
  }
  if (port_ == 0 || worker_port_ == 0) {
    return absl::InternalError(absl::StrCat("bad port file: ", *ports));
  }
  return absl::OkStatus();
}

std::string LocalCluster::router_log(int generation) const {
  return generation == 0 ? absl::StrCat(options_.work_dir, "/router.log")
                         : absl::StrCat(options_.work_dir, "/router.", generation, ".log");
}

absl::StatusOr<int> LocalCluster::RestartRouter(int signal, Nanos down) {
  router_.Kill(signal);
  auto status = router_.Wait(Seconds(30));
  if (!status.has_value()) {
    router_.Kill(SIGKILL);
    status = router_.Wait(Seconds(5));
    if (!status.has_value()) return absl::InternalError("the router did not exit");
  }
  if (down > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(down));
  if (auto s = StartRouter(); !s.ok()) return s;
  return *status;
}

LocalCluster::~LocalCluster() { Stop(); }

std::string LocalCluster::router_address() const { return absl::StrCat("127.0.0.1:", port_); }
std::string LocalCluster::worker_address() const {
  return absl::StrCat("127.0.0.1:", worker_port_);
}

absl::StatusOr<int> LocalCluster::AddWorker(const std::vector<std::string>& extra_flags) {
  int index = static_cast<int>(workers_.size());
  std::vector<std::string> argv = {absl::StrCat(options_.bin_dir, "/superserve-worker"),
                                   absl::StrCat("--router=", worker_address()),
                                   absl::StrCat("--model_repo=", options_.model_repo),
                                   absl::StrCat("--name=w", index)};
  if (options_.emulate) argv.push_back("--emulate");
  if (!fleet_token_file_.empty()) {
    argv.push_back(absl::StrCat("--fleet_token_file=", fleet_token_file_));
  }
  if (options_.instances_per_worker > 1) {
    argv.push_back(absl::StrCat("--instances=", options_.instances_per_worker));
  }
  argv.insert(argv.end(), options_.worker_flags.begin(), options_.worker_flags.end());
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  auto w = Subprocess::Start(argv, absl::StrCat(options_.work_dir, "/worker", index, ".log"));
  if (!w.ok()) return w.status();
  workers_.push_back(*std::move(w));
  return index;
}

absl::StatusOr<std::vector<std::pair<std::string, int>>> LocalCluster::WorkersPerModel() {
  auto creds = MakeChannelCredentials({options_.tls_ca_file, "", ""});
  if (!creds.ok()) return creds.status();
  auto channel = grpc::CreateChannel(router_address(), *creds);
  auto stub = v1::Admin::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ListModelsResponse resp;
  grpc::Status s = stub->ListModels(&ctx, v1::ListModelsRequest(), &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  std::vector<std::pair<std::string, int>> out;
  for (const auto& m : resp.models()) out.emplace_back(m.name(), m.workers());
  return out;
}

absl::Status LocalCluster::WaitForWorkers(int n, Nanos timeout) {
  Nanos end = RealClock::Get()->Now() + timeout;
  std::string last = "no answer";
  while (RealClock::Get()->Now() < end) {
    auto models = WorkersPerModel();
    if (models.ok()) {
      bool all = !models->empty();
      last.clear();
      for (const auto& [name, workers] : *models) {
        all = all && workers >= n;
        absl::StrAppend(&last, name, ":", workers, " ");
      }
      if (all) return absl::OkStatus();
    } else {
      last = std::string(models.status().message());
    }
    for (auto& w : workers_) {
      if (!w.running()) {
        return absl::UnavailableError(
            absl::StrCat("a worker exited during startup (see ", options_.work_dir, "/worker*.log)"));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("waiting for ", n, " workers per model; have ", last));
}

absl::StatusOr<std::string> LocalCluster::ScrapeMetrics() {
  if (metrics_port_ == 0) return absl::FailedPreconditionError("metrics endpoint disabled");
  return HttpGetLocal(metrics_port_, "/metrics");
}

void LocalCluster::Stop() {
  // Workers first: they would otherwise see the router vanish and log errors.
  for (auto& w : workers_) w.Stop(Seconds(3));
  router_.Stop(Seconds(5));
}

absl::StatusOr<double> MetricValue(absl::string_view text, absl::string_view series) {
  size_t at = 0;
  while ((at = text.find(series, at)) != absl::string_view::npos) {
    const bool line_start = at == 0 || text[at - 1] == '\n';
    const size_t value_at = at + series.size();
    if (line_start && value_at < text.size() && text[value_at] == ' ') {
      const size_t end = text.find('\n', value_at);
      double v = 0;
      if (absl::SimpleAtod(text.substr(value_at + 1, end == absl::string_view::npos
                                                         ? absl::string_view::npos
                                                         : end - value_at - 1),
                           &v)) {
        return v;
      }
    }
    at = value_at;
  }
  return absl::NotFoundError(absl::StrCat("no series ", series));
}

absl::StatusOr<RouterTotals> LocalCluster::ScrapeRouterTotals() {
  auto text = ScrapeMetrics();
  if (!text.ok()) return text.status();
  RouterTotals t;
  for (auto [name, field] : {std::pair<const char*, int64_t*>{"superserve_queries_accepted_total",
                                                              &t.accepted},
                             {"superserve_queries_answered_total", &t.answered},
                             {"superserve_queries_pending", &t.pending}}) {
    auto v = MetricValue(*text, name);
    if (!v.ok()) return v.status();
    *field = static_cast<int64_t>(*v);
  }
  return t;
}

absl::StatusOr<RouterTotals> RouterExitTotals(absl::string_view log) {
  // router_main.cc's last line: "router: accepted A, answered B, ...".
  const size_t at = log.rfind("router: accepted ");
  if (at == absl::string_view::npos) return absl::NotFoundError("no exit totals in the router log");
  std::vector<absl::string_view> words =
      absl::StrSplit(log.substr(at, log.find('\n', at) - at), absl::ByAnyChar(" ,"),
                     absl::SkipEmpty());
  RouterTotals t;
  if (words.size() < 5 || !absl::SimpleAtoi(words[2], &t.accepted) ||
      !absl::SimpleAtoi(words[4], &t.answered)) {
    return absl::DataLossError("unreadable router exit totals");
  }
  t.pending = t.accepted - t.answered;
  return t;
}

absl::StatusOr<std::string> HttpGetLocal(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect 127.0.0.1:", port));
  }
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("write");
  }
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  auto body = out.find("\r\n\r\n");
  if (out.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::DataLossError("not an HTTP response");
  }
  if (out.find(" 200 ") > body) {
    return absl::UnavailableError(absl::StrCat("HTTP ", out.substr(0, out.find("\r\n"))));
  }
  return out.substr(body + 4);
}

}  // namespace superserve
