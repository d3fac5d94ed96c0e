#include "router/router_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "router/repository_poller.h"
#include "common/model_digest.h"
#include "common/model_repository.h"
#include "common/small_file.h"
#include "common/worker_link_limits.h"
#include "router/admin_service.h"
#include "router/inference_service.h"
#include "router/open_inference_service.h"
#include "router/router_metrics.h"
#include "router/worker_link_service.h"

namespace superserve {

RouterServer::RouterServer(RouterServerOptions options) : options_(std::move(options)) {}

RouterServer::~RouterServer() {
  Shutdown();
  // The metrics endpoint outlives the dispatcher (members go in reverse).
  if (metrics_ != nullptr) metrics_->ExportServingTotals(nullptr);
}

namespace {

// Bounded, regular files only: /dev/zero used to be read until memory ran
// out (std::bad_alloc), a FIFO blocked the router's start forever.
absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  auto pem = ReadSmallFile(path, kMaxPemBytes);
  if (!pem.ok()) return absl::Status(pem.status().code(), absl::StrCat(flag, ": ", pem.status().message()));
  return pem;
}

// "127.0.0.1:P", "localhost:P", "[::1]:P": reachable from this host only.
bool IsLoopback(const std::string& address) {
  const std::string host = address.substr(0, address.rfind(':'));
  return absl::StartsWith(host, "127.") || host == "localhost" || host == "[::1]" ||
         host == "ipv4:127.0.0.1" || host == "unix";
}

// A listen address taken apart: HOST:PORT, or a gRPC unix socket.
struct ListenAddress {
  std::string host;  // without IPv6 brackets, lower case
  int port = 0;      // 0: the kernel picks a free one
  bool unix_socket = false;
};

// `address` as the `flag` that gave it. gRPC parses the port into 16 bits
// without a range check (127.0.0.1:99999 listened on 34463), so the range is
// checked here; a metrics address (civetweb) is HOST:PORT only.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view flag,
                                                 const std::string& address, bool allow_unix) {
  ListenAddress a;
  if (allow_unix && (absl::StartsWith(address, "unix:") ||
                     absl::StartsWith(address, "unix-abstract:"))) {
    a.unix_socket = true;
    a.host = address;
    return a;
  }
  const size_t colon = address.rfind(':');
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " \"", address, "\": ", why, " (expected HOST:PORT, e.g. 127.0.0.1:8500 or "
        "[::]:8500; port 0 picks a free port)"));
  };
  if (colon == std::string::npos) return bad("no port");
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad("an IPv6 host goes in brackets, [::1]:PORT");
  }
  if (host.empty()) return bad("no host");
  uint32_t p = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(port, &p)) {
    return bad(absl::StrCat("port \"", port, "\" is not a number"));
  }
  if (p > 65535) return bad(absl::StrCat("port ", p, " is out of range 0-65535"));
  a.host = absl::AsciiStrToLower(host);
  a.port = static_cast<int>(p);
  return a;
}

bool IsWildcardHost(const std::string& host) {
  return host == "0.0.0.0" || host == "::";
}

// Why `a` cannot be bound, as far as a bind of our own can tell: gRPC logs
// its error but hands back only a null server.
std::string WhyCannotBind(const ListenAddress& a) {
  if (a.unix_socket) return "the socket path is in use or not writable";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(a.port);
  if (int rc = getaddrinfo(a.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return absl::StrCat("host ", a.host, " does not resolve (", gai_strerror(rc), ")");
  }
  std::string why = "see gRPC's error above";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;  // as gRPC's listener: a restarted router may rebind at once
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const int rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
    const int err = errno;
    close(fd);
    if (rc == 0) continue;
    why = err == EADDRINUSE ? "address already in use (another router, or another process, "
                              "listens on it)"
          : err == EADDRNOTAVAIL ? "not an address of this host"
          : err == EACCES ? "permission denied (ports below 1024 need privileges)"
                          : std::strerror(err);
    break;
  }
  freeaddrinfo(res);
  return why;
}

// Answers every call of a method its server does not serve UNIMPLEMENTED
// with `hint`: gRPC's own answer has an empty message, and a client or
// worker that dialled the router's other port learned nothing from it.
class WrongPortService final : public grpc::CallbackGenericService {
 public:
  explicit WrongPortService(std::string hint) : hint_(std::move(hint)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    class Refusal final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Refusal(const grpc::Status& s) { Finish(s); }
      void OnDone() override { delete this; }
    };
    return new Refusal(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                    absl::StrCat(context->method(), " is not served here: ", hint_)));
  }

 private:
  const std::string hint_;
};

}  // namespace

absl::Status CheckRouterServerOptions(const RouterServerOptions& o) {
  struct Named {
    const char* flag;
    const std::string* address;
    ListenAddress parsed;
  };
  std::vector<Named> listens = {{"--listen", &o.listen, {}},
                                {"--worker_listen", &o.worker_listen, {}}};
  if (!o.metrics_listen.empty()) listens.push_back({"--metrics_listen", &o.metrics_listen, {}});
  for (Named& n : listens) {
    auto a = ParseListenAddress(n.flag, *n.address, /*allow_unix=*/n.address != &o.metrics_listen);
    if (!a.ok()) return a.status();
    n.parsed = *std::move(a);
  }
  // One address for two of the router's servers: with SO_REUSEPORT the
  // kernel split the connections between them at random (queries answered
  // UNIMPLEMENTED, workers refused); without, the second fails to bind with
  // a less telling message. Port 0 gives each server a port of its own.
  for (size_t i = 0; i < listens.size(); ++i) {
    for (size_t j = i + 1; j < listens.size(); ++j) {
      const ListenAddress& a = listens[i].parsed;
      const ListenAddress& b = listens[j].parsed;
      const bool same =
          a.unix_socket || b.unix_socket
              ? a.host == b.host
              : a.port != 0 && a.port == b.port &&
                    (a.host == b.host || IsWildcardHost(a.host) || IsWildcardHost(b.host));
      if (same) {
        return absl::InvalidArgumentError(absl::StrCat(
            listens[j].flag, " ", *listens[j].address, " overlaps ", listens[i].flag, " ",
            *listens[i].address, ": each of the router's servers needs an address of its own"));
      }
    }
  }
  if (o.worker_tls && (o.tls_cert_file.empty() || o.tls_key_file.empty())) {
    // Ignoring it left the worker link in plaintext while the operator
    // believed it encrypted.
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker_tls needs ",
        o.tls_cert_file.empty() && o.tls_key_file.empty() ? "--tls_cert_file and --tls_key_file"
        : o.tls_cert_file.empty()                          ? "--tls_cert_file"
                                                           : "--tls_key_file",
        " (the worker port serves the client port's certificate)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const RouterServerOptions& o) {
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key file");
  }
  if (o.tls_cert_file.empty()) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("a client CA file needs a TLS certificate and key");
    }
    return grpc::InsecureServerCredentials();
  }
  auto cert = ReadPem("--tls_cert_file", o.tls_cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("--tls_key_file", o.tls_key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca_file.empty()) {
    auto ca = ReadPem("--tls_client_ca_file", o.tls_client_ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::Status RouterServer::Start() {
  // Debian's Abseil checks lock-order cycles on every Mutex::Lock (a debug
  // aid); on the query path that cost ~3-9% of the router's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (auto s = CheckRouterServerOptions(options_); !s.ok()) return s;
  if (options_.fleet_token.empty()) {
    if (!IsLoopback(options_.worker_listen) && !options_.allow_unauthenticated_workers) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to accept workers on ", options_.worker_listen,
          " without a fleet token: anyone who reaches it could join the fleet and read client "
          "tensors. Pass --fleet_token_file (workers too), or --allow_unauthenticated_workers"));
    }
    SS_LOG(WARNING) << "WORKER LINK UNAUTHENTICATED: no --fleet_token_file; any process that "
                       "can reach "
                    << options_.worker_listen << " can register as a worker (docs/security.md)";
  }
  auto client_creds = ServerCredentialsFor(options_);
  if (!client_creds.ok()) return client_creds.status();
  metrics_ = std::make_unique<RouterMetrics>();
  dispatcher_ = std::make_unique<Dispatcher>(options_.dispatcher, RealClock::Get(), metrics_.get());
  metrics_->ExportServingTotals([d = dispatcher_.get()] { return d->Stats(); });
  // Autoscaling advice at the objective of queries without a deadline.
  RouterMetrics::WorkersNeededOptions advice;
  advice.objective = options_.default_slo;
  metrics_->EnableWorkersNeeded(advice, RealClock::Get());
  if (!options_.model_repo.empty()) {
    auto models = LoadModelRepository(options_.model_repo);
    if (!models.ok()) return models.status();
    if (models->empty()) {
      // An empty repository is useful only to a fleet whose models will be
      // registered at run time; without an admin token none ever could be,
      // and the path is more likely a typo.
      if (options_.admin_token.empty()) {
        return absl::NotFoundError(absl::StrCat("model repository ", options_.model_repo,
                                                " has no <model>/profile.json (and no admin "
                                                "token to register models later)"));
      }
      SS_LOG(WARNING) << "router: model repository " << options_.model_repo
                      << " holds no model; serving none until one is registered "
                         "(superserve-admin register)";
    }
    for (const auto& m : *models) {
      if (auto s = dispatcher_->lifecycle().AddFromRepository(m); !s.ok()) return s;
    }
    // Not an error: a model by that name may be registered later. But a
    // typo would otherwise go unnoticed.
    for (const auto& [model, policy] : options_.dispatcher.model_policies) {
      if (std::none_of(models->begin(), models->end(),
                       [&model = model](const ModelEntry& m) { return m.name == model; })) {
        SS_LOG(WARNING) << "router: --model_policy " << model << "=" << policy << ": "
                        << options_.model_repo << " has no model " << model
                        << " (the override applies if one by that name is registered later)";
      }
    }
  }
  if (options_.repository_poll > 0 && !options_.model_repo.empty()) {
    ModelLifecycle* l = &dispatcher_->lifecycle();
    poller_ = std::make_unique<RepositoryPoller>(
        options_.model_repo,
        RepositoryPoller::Actions{
            // A short wait: the registration stands without a worker, and a
            // worker loading it later makes it visible.
            [l](const std::string& dir, const std::string& name) {
              return l->Register(dir, name, Seconds(1)).status;
            },
            [l](const std::string& name) { return l->Unregister(name, 0, Seconds(30)); }});
    if (auto models = LoadModelRepository(options_.model_repo); models.ok()) {
      poller_->Adopt(*models);
    }
    poller_->Start(options_.repository_poll);
    SS_LOG(INFO) << "router: re-scanning " << options_.model_repo << " every "
                 << ToSeconds(options_.repository_poll) << " s (poll mode)";
  }
  inference_ = std::make_unique<InferenceService>(dispatcher_.get(), options_.default_slo,
                                                  options_.max_stream_unsent_answers,
                                                  options_.inline_call_completion);
  open_inference_ = std::make_unique<OpenInferenceService>(
      dispatcher_.get(), options_.default_slo, options_.max_stream_unsent_answers,
      options_.inline_call_completion);
  worker_link_ = std::make_unique<WorkerLinkService>(dispatcher_.get(), options_.fleet_token);
  admin_ = std::make_unique<AdminService>(dispatcher_.get(), options_.admin_token,
                                          options_.model_repo);

  client_port_hint_ = std::make_unique<WrongPortService>(
      "this is the router's client port (--listen); workers dial its --worker_listen");
  worker_port_hint_ = std::make_unique<WrongPortService>(
      "this is the router's worker port (--worker_listen); clients use its --listen");
  // The address for a bind failure's message (checked above).
  const auto why_not = [](const std::string& flag, const std::string& address) {
    auto a = ParseListenAddress(flag, address, /*allow_unix=*/true);
    return absl::StrCat(address, " (", flag, "): ", a.ok() ? WhyCannotBind(*a) : "");
  };

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, *client_creds, &port_);
    // gRPC sets SO_REUSEPORT by default: a second router on the same
    // address then started fine and the kernel split clients between the
    // two. Off on both servers, a taken address fails Start().
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.RegisterCallbackGenericService(client_port_hint_.get());
    builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
    builder.SetMaxSendMessageSize(options_.max_message_bytes);
    if (options_.max_concurrent_streams > 0) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
    }
    builder.RegisterService(inference_.get());
    builder.RegisterService(open_inference_.get());
    builder.RegisterService(admin_.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", why_not("--listen", options_.listen)));
    }
  }
  {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.worker_listen,
                             options_.worker_tls ? *client_creds
                                                 : grpc::InsecureServerCredentials(),
                             &worker_port_);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // as on the client port
    builder.RegisterCallbackGenericService(worker_port_hint_.get());
    // Batches carry many queries' tensors; the worker's end sets the same
    // limit, and models whose batches exceed it are refused
    // (common/worker_link_limits.h).
    builder.SetMaxReceiveMessageSize(static_cast<int>(kWorkerLinkMaxMessageBytes));
    builder.SetMaxSendMessageSize(static_cast<int>(kWorkerLinkMaxMessageBytes));
    // Keepalive both ways on the worker link (docs/faults.md, partitioned
    // worker): the router pings a silent connection so that a dead path
    // ends its stream (heartbeats already mark the worker dead within
    // --missed_heartbeats intervals; this frees the connection), and it
    // accepts the workers' own pings (--keepalive_ms, 1 s by default) rather
    // than answering them GOAWAY "too many pings". The ping's answer may
    // take as long as the heartbeat rule allows silence: a watchdog any
    // shorter cut workers that the operator's --missed_heartbeats still
    // kept (a loaded host moving 128 MiB batches, a stalled process).
    const ServingOptions& liveness = options_.dispatcher.serving;
    const Nanos hb = liveness.heartbeat_interval;
    const Nanos silent_limit = hb * std::max(1, liveness.missed_heartbeats);
    const int ping_after_ms =
        static_cast<int>(std::max<Nanos>(Seconds(1), 2 * hb) / kNanosPerMilli);
    const int ping_timeout_ms =
        static_cast<int>(std::max<Nanos>(Seconds(1), silent_limit) / kNanosPerMilli);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ping_after_ms);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ping_timeout_ms);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 100);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.RegisterService(worker_link_.get());
    worker_server_ = builder.BuildAndStart();
    if (worker_server_ == nullptr || worker_port_ == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen for workers on ",
                                                 why_not("--worker_listen", options_.worker_listen)));
    }
  }
  server_->GetHealthCheckService()->SetServingStatus(true);
  if (!options_.metrics_listen.empty()) {
    auto port = metrics_->Serve(options_.metrics_listen);
    if (!port.ok()) {
      // civetweb's own words ("null context when constructing CivetServer")
      // do not say why.
      return absl::UnavailableError(absl::StrCat(
          "cannot serve metrics on ", why_not("--metrics_listen", options_.metrics_listen)));
    }
    metrics_port_ = *port;
  }
  return absl::OkStatus();
}

bool RouterServer::Drain(Nanos timeout) {
  if (shut_down_ || server_ == nullptr) return true;
  server_->GetHealthCheckService()->SetServingStatus(false);
  open_inference_->SetServing(false);
  return dispatcher_->Drain(timeout);
}

void RouterServer::Shutdown() {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  if (poller_ != nullptr) poller_->Stop();
  server_->GetHealthCheckService()->SetServingStatus(false);
  open_inference_->SetServing(false);
  dispatcher_->Shutdown();
  // Every accepted query has its answer by now (drained, or answered
  // UNAVAILABLE by the dispatcher): the worker streams carry nothing more and
  // never end on their own, so they are cancelled at once (a 2-s grace here
  // came on top of the client server's and a restart cost ~4 s of downtime,
  // docs/faults.md). Client calls get 0.5 s to flush the answers already
  // written; an InferStream a client keeps open would otherwise hold the
  // whole grace.
  if (worker_server_ != nullptr) worker_server_->Shutdown(std::chrono::system_clock::now());
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
}

void RouterServer::Wait() {
  if (server_ != nullptr) server_->Wait();
  if (worker_server_ != nullptr) worker_server_->Wait();
}

}  // namespace superserve
