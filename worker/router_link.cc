#include "worker/router_link.h"

#include <grpcpp/grpcpp.h>

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/model_digest.h"
#include "common/secret.h"
#include "common/worker_link_limits.h"
#include "worker/backoff.h"
#include "worker/batch_runner.h"
#include "worker/latency_probe.h"

namespace superserve {
namespace {

// A worker that cannot reach its router says so at least this often
// (ReconnectLogSchedule: also the first attempts and every change of reason).
constexpr Nanos kReconnectLogInterval = Seconds(30);

constexpr char kConnectionFailed[] = "connection failed";
constexpr char kNotInTime[] = "connection not established in time";

std::string DescribeGrpcStatus(const grpc::Status& s) {
  // gRPC's codes are Abseil's, number for number.
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())),
                      ": ", s.error_message().empty() ? "no message" : s.error_message());
}

// A refusal the same worker would get again on every attempt: a wrong or
// missing fleet token, another model version, the router's client port
// instead of its worker port. Retrying continues (the router may be
// restarted with other settings), but each one is a warning, not routine.
bool IsLastingRefusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED ||
         code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::FAILED_PRECONDITION ||
         code == grpc::StatusCode::UNIMPLEMENTED || code == grpc::StatusCode::INVALID_ARGUMENT;
}

}  // namespace

RouterLink::RouterLink(RouterLinkOptions options, Executor* executor,
                       std::vector<ModelEntry> models)
    : options_(std::move(options)),
      executor_(executor),
      // With a budget nothing is loaded yet: the models are the repository.
      models_(std::make_shared<const std::vector<ModelEntry>>(
          options_.memory_budget > 0 ? std::vector<ModelEntry>() : models)),
      repository_(options_.memory_budget > 0 ? std::move(models) : std::vector<ModelEntry>()) {}

bool RouterLink::InRepository(const std::string& model) const {
  if (std::any_of(repository_.begin(), repository_.end(),
                  [&](const ModelEntry& m) { return m.name == model; })) {
    return true;
  }
  absl::MutexLock lock(&models_mu_);
  return stored_.count(model) > 0;
}

void RouterLink::UnloadRepositoryModels() {
  if (options_.memory_budget <= 0) return;
  // A snapshot held through the loop: each Unload replaces the list.
  const auto models = Models();
  for (const ModelEntry& m : *models) {
    if (InRepository(m.name)) Unload(m.name, /*keep_package=*/true);
  }
  // Loaded as the last session ended, never installed nor announced.
  std::map<std::string, int64_t> left;
  {
    absl::MutexLock lock(&models_mu_);
    left.swap(footprints_);
  }
  for (const auto& [name, bytes] : left) (void)executor_->Unload(name);
}

RouterLink::~RouterLink() {
  Stop();
  absl::MutexLock lock(&models_mu_);
  if (owns_package_root_) {
    std::error_code ec;
    std::filesystem::remove_all(package_root_, ec);
  }
}

std::shared_ptr<const std::vector<ModelEntry>> RouterLink::Models() const {
  absl::MutexLock lock(&models_mu_);
  return models_;
}

void RouterLink::Stop() {
  stop_requested_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (context_) context_->TryCancel();
  }
  batch_cv_.notify_all();
  heartbeat_cv_.notify_all();
  load_cv_.notify_all();
  stop_cv_.notify_all();
  prepared_cv_.notify_all();
}

bool RouterLink::Write(const v1::WorkerMessage& m) {
  std::lock_guard<std::mutex> lock(write_mu_);
  return stream_->Write(m);
}

bool RouterLink::SleepUnlessStopped(Nanos d) {
  std::unique_lock<std::mutex> lock(mu_);
  return stop_cv_.wait_for(lock, std::chrono::nanoseconds(std::max<Nanos>(d, 0)),
                           [this] { return stop_requested_.load(); });
}

absl::Status RouterLink::Run() {
  RealClock* clock = RealClock::Get();
  BackoffOptions bo;
  bo.initial = options_.reconnect_initial_backoff;
  bo.max = options_.reconnect_max_backoff;
  // Deterministic per worker, different between workers (and between the
  // instances of one process), so that a fleet does not dial in lockstep.
  bo.seed = std::hash<std::string>()(options_.name) ^
            (static_cast<uint64_t>(options_.channel_tag) * 0x9E3779B97F4A7C15ull);
  Backoff backoff(bo);

  const Nanos start = clock->Now();
  const Nanos first_deadline = options_.connect_timeout > 0
                                   ? start + options_.connect_timeout
                                   : std::numeric_limits<Nanos>::max();
  bool ever_registered = false;
  int64_t failures = 0;      // failed attempts since the last registration
  Nanos down_since = start;  // when the last registered stream ended
  ReconnectLogSchedule log_schedule(kReconnectLogInterval);
  // Why the last attempt that got an answer failed (a refusal, a refused
  // or closed connection): a later attempt cut short by the deadline must
  // not hide it from the final message.
  std::string last_reason;

  auto on_registered = [&](const std::string& assigned_id) {
    if (!ever_registered) {
      SS_LOG(INFO) << "registered with router " << options_.router << " as " << assigned_id << " ("
                   << executor_->kind() << " executor)";
    } else {
      const int64_t n = ++reconnects_;
      SS_LOG(INFO) << "re-registered with router " << options_.router << " as " << assigned_id
                   << " after " << ToSeconds(clock->Now() - down_since) << " s (" << failures
                   << " failed attempts; reconnect " << n << ")";
    }
    ever_registered = true;
    backoff.Reset();
    failures = 0;
    log_schedule.Reset();
    last_reason.clear();
  };

  while (!stop_requested_) {
    Nanos attempt_deadline = clock->Now() + options_.attempt_timeout;
    if (!ever_registered) attempt_deadline = std::min(attempt_deadline, first_deadline);
    SessionEnd end = RunSession(attempt_deadline, on_registered);
    if (stop_requested_) break;
    const std::string why(end.status.message());
    if (!end.timed_out) last_reason = why;
    if (end.registered) {
      if (!options_.reconnect) return end.status;
      down_since = clock->Now();
      SS_LOG(WARNING) << why << "; reconnecting to " << options_.router
                      << " (backoff up to " << ToMillis(options_.reconnect_max_backoff) << " ms)";
    } else {
      if (!options_.reconnect && end.refused) return end.status;
      if (!ever_registered && clock->Now() >= first_deadline) {
        return absl::UnavailableError(absl::StrCat(
            "cannot register with router at ", options_.router, " within ",
            ToSeconds(options_.connect_timeout), " s (--connect_timeout_s): ",
            last_reason.empty() || last_reason == why
                ? why
                : absl::StrCat(last_reason, "; the last attempt: ", why)));
      }
    }
    Nanos delay = backoff.Next();
    if (!ever_registered) delay = std::min(delay, std::max<Nanos>(0, first_deadline - clock->Now()));
    if (!end.registered) {
      const int64_t n = ++failures;
      if (end.lasting) {
        SS_LOG(WARNING) << "router " << options_.router << ": attempt " << n << " refused ("
                        << why << "); retrying in " << static_cast<int64_t>(ToMillis(delay))
                        << " ms, but it will likely refuse again until its settings or this "
                           "worker's are changed";
        log_schedule.Logged(clock->Now(), why);
      } else if (log_schedule.Due(n, clock->Now(), why)) {
        // Waiting for a router that has not started yet is routine; losing
        // one that served is not.
        const std::string line = absl::StrCat(
            "router ", options_.router, ": attempt ", n, " failed (", why, "); next in ",
            static_cast<int64_t>(ToMillis(delay)), " ms; trying for ",
            static_cast<int64_t>(ToSeconds(clock->Now() - (ever_registered ? down_since : start))),
            " s");
        if (ever_registered) {
          SS_LOG(WARNING) << line;
        } else {
          SS_LOG(INFO) << line;
        }
        log_schedule.Logged(clock->Now(), why);
      }
    }
    if (SleepUnlessStopped(delay)) break;
  }
  return absl::OkStatus();
}

std::string RouterLink::ConnectionFailure(const std::shared_ptr<grpc::Channel>& channel) {
  // The channel's state says only that the attempt failed; a fail-fast call
  // made now fails with gRPC's reason ("Connection refused", or "Socket
  // closed": a TLS router hanging up on plaintext). Its token is the real
  // one, in case the router came up meanwhile and the call reaches it.
  grpc::ClientContext probe;
  probe.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (!options_.fleet_token.empty()) probe.AddMetadata(kFleetTokenMetadata, options_.fleet_token);
  auto call = v1::WorkerLink::NewStub(channel)->Connect(&probe);
  call->WritesDone();
  const grpc::Status s = call->Finish();
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE || s.error_message().empty()) {
    return kConnectionFailed;
  }
  std::string why = absl::StrCat(kConnectionFailed, " (", s.error_message(), ")");
  if (s.error_message().find("Connection refused") == std::string::npos) {
    absl::StrAppend(&why, options_.tls_ca_pem.empty()
                              ? "; if the router runs --worker_tls, this worker needs --tls_ca_file"
                              : "; with --tls_ca_file the router must run --worker_tls with a "
                                "certificate that CA signed");
  }
  return why;
}

bool RouterLink::WaitReady(grpc::Channel* channel, Nanos deadline, std::string* why) {
  RealClock* clock = RealClock::Get();
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (stop_requested_) {
      *why = "stopped";
      return false;
    }
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      *why = kConnectionFailed;
      return false;
    }
    const Nanos now = clock->Now();
    if (now >= deadline) {
      *why = kNotInTime;
      return false;
    }
    // Short slices, so that Stop() is seen at once.
    const Nanos slice = std::min<Nanos>(deadline - now, Millis(50));
    channel->WaitForStateChange(state,
                                std::chrono::system_clock::now() + std::chrono::nanoseconds(slice));
    state = channel->GetState(/*try_to_connect=*/true);
  }
  return true;
}

RouterLink::SessionEnd RouterLink::RunSession(
    Nanos connect_deadline, const std::function<void(const std::string&)>& on_registered) {
  grpc::ChannelArguments args;
  // The router's end sets the same limit (common/worker_link_limits.h).
  args.SetMaxReceiveMessageSize(static_cast<int>(kWorkerLinkMaxMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(kWorkerLinkMaxMessageBytes));
  args.SetInt("superserve.channel_tag", options_.channel_tag);
  // A fresh subchannel per session: no connection backoff of gRPC's own
  // (1 s growing to 120 s by default) carries over from the last session;
  // Run()'s backoff is the only one.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (options_.keepalive > 0) {
    // Notices a dead path (see RouterLinkOptions::keepalive). The router's
    // worker server permits pings this frequent (router/router_server.cc).
    const auto ms = [](Nanos d) {
      return static_cast<int>(std::max<Nanos>(1, d / kNanosPerMilli));
    };
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms(options_.keepalive));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(options_.keepalive_timeout));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options_.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls_ca_pem;
    creds = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(options_.router, creds, args);
  SessionEnd end;
  std::string why;
  if (!WaitReady(channel.get(), connect_deadline, &why)) {
    if (!stop_requested_) {
      if (why == kConnectionFailed) why = ConnectionFailure(channel);
      end.timed_out = why == kNotInTime;
      end.status = absl::UnavailableError(absl::StrCat("cannot connect: ", why));
    }
    return end;
  }
  auto stub = v1::WorkerLink::NewStub(channel);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_requested_) return end;
    stopping_ = false;
    prepared_ = false;
    acked_ = false;
    batches_.clear();
    loads_.clear();
    unloads_received_ = 0;
    unloads_done_ = 0;
    model_unloads_received_.clear();
    model_unloads_done_.clear();
  }
  // No thread of this session runs yet.
  UnloadRepositoryModels();
  // The executor thread starts before the worker registers and makes its
  // per-thread device state first (Executor::PrepareThread: on a GPU, every
  // loaded model warmed up on it, seconds), so that no batch of the router's
  // pays it. Before the call opens: a call that stays silent that long is
  // cut by the keepalive watchdog (code 14), and registration never succeeds.
  std::thread executor_thread([this] { ExecuteLoop(); });
  auto stop_executor = [this, &executor_thread] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    batch_cv_.notify_all();
    executor_thread.join();
  };
  {
    std::unique_lock<std::mutex> lock(mu_);
    prepared_cv_.wait(lock, [this] { return prepared_ || stopping_; });
  }
  bool stop = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop = stop_requested_;
    if (!stop) {
      context_ = std::make_unique<grpc::ClientContext>();
      if (!options_.fleet_token.empty()) {
        context_->AddMetadata(kFleetTokenMetadata, options_.fleet_token);
      }
      stream_ = stub->Connect(context_.get());
    }
  }
  if (stop) {
    stop_executor();
    return end;
  }
  // Ends this session's call (cancelled first when `cancel`): drains the
  // reads gRPC requires before Finish, and forgets the call.
  auto end_call = [this](bool cancel) {
    if (cancel) {
      std::lock_guard<std::mutex> lock(mu_);
      context_->TryCancel();
    }
    v1::RouterMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    grpc::Status s = stream_->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    stream_.reset();
    context_.reset();
    return s;
  };

  v1::WorkerMessage hello;
  auto* reg = hello.mutable_register_();
  reg->set_worker_id(options_.name);
  for (const auto& m : repository_) reg->add_models(m.name);
  {
    absl::MutexLock lock(&models_mu_);
    for (const auto& [name, entry] : stored_) reg->add_models(name);
  }
  const auto served = Models();
  for (const auto& m : *served) {
    if (!InRepository(m.name)) reg->add_models(m.name);
  }
  reg->set_memory_budget_bytes(std::max<int64_t>(0, options_.memory_budget));
  reg->set_emulated(executor_->kind() == "emulated");
  reg->set_intra_op_threads(options_.intra_op_threads);
  for (const auto& v : options_.versions) *reg->add_versions() = v;
  {
    absl::MutexLock lock(&models_mu_);
    for (const auto& v : hot_versions_) *reg->add_versions() = v;
  }

  // A router that accepts the connection but never acknowledges (hung, or a
  // half-open connection) must not hold the link forever.
  bool ack_timed_out = false;
  std::thread watchdog([this, &ack_timed_out] {
    std::unique_lock<std::mutex> lock(mu_);
    if (!stop_cv_.wait_for(lock, std::chrono::nanoseconds(options_.attempt_timeout),
                           [this] { return acked_ || stopping_; })) {
      ack_timed_out = true;
      context_->TryCancel();
    }
  });
  auto first = std::make_unique<v1::RouterMessage>();
  const bool wrote = Write(hello);
  const bool read = wrote && stream_->Read(first.get());
  const bool ok = read && first->has_ack();
  {
    std::lock_guard<std::mutex> lock(mu_);
    acked_ = true;  // the wait is over, either way
  }
  stop_cv_.notify_all();
  watchdog.join();
  if (!ok) {
    // After a failed write or read the call is over and Finish has the
    // router's status; a first message that is no ack needs a cancel.
    grpc::Status s = end_call(/*cancel=*/read);
    stop_executor();
    if (stop_requested_) return end;
    end.refused = true;
    end.lasting = !ack_timed_out && IsLastingRefusal(s.error_code());
    end.status = absl::UnavailableError(
        ack_timed_out ? absl::StrCat("no registration ack within ",
                                     ToSeconds(options_.attempt_timeout), " s")
                      : absl::StrCat("router refused registration (", DescribeGrpcStatus(s), ")"));
    return end;
  }
  const Nanos interval = Millis(std::max<int64_t>(10, first->ack().heartbeat_interval_ms()));
  end.registered = true;
  registered_ = true;
  on_registered(first->ack().assigned_id());

  std::thread loader_thread([this] { LoadLoop(); });
  std::thread heartbeat_thread([this, interval] { HeartbeatLoop(interval); });
  while (true) {
    auto msg = std::make_unique<v1::RouterMessage>();
    if (!stream_->Read(msg.get())) break;
    if (msg->has_load_model()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        const int64_t model_unloads = model_unloads_received_[msg->load_model().model()];
        loads_.push_back({std::move(msg), unloads_received_, model_unloads});
      }
      load_cv_.notify_one();
    } else if (msg->has_batch() || msg->has_unload_model()) {
      const Nanos received = RealClock::Get()->Now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (msg->has_unload_model()) {
          ++unloads_received_;
          ++model_unloads_received_[msg->unload_model().model()];
        }
        batches_.push_back({std::move(msg), received, nullptr});
      }
      // Outside the lock, so that the woken executor does not block on it.
      batch_cv_.notify_one();
    }
  }
  registered_ = false;
  size_t dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped = batches_.size();
    batches_.clear();
    loads_.clear();
  }
  batch_cv_.notify_all();
  heartbeat_cv_.notify_all();
  load_cv_.notify_all();
  // A batch being executed finishes first; its result goes to this (ended)
  // stream, never to the next session's. A load in progress finishes too;
  // the model it loaded stays on the executor unannounced (the router sends
  // the load again after the next registration: it is then reported ready).
  executor_thread.join();
  loader_thread.join();
  heartbeat_thread.join();
  grpc::Status s = end_call(/*cancel=*/false);
  if (stop_requested_) return end;
  if (dropped > 0) {
    SS_LOG(INFO) << "dropped " << dropped
                 << " batches received before the stream ended (the router re-queues or answers "
                    "their queries)";
  }
  end.status =
      absl::UnavailableError(absl::StrCat("router stream ended (", DescribeGrpcStatus(s), ")"));
  return end;
}

void RouterLink::HeartbeatLoop(Nanos interval) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    heartbeat_cv_.wait_for(lock, std::chrono::nanoseconds(interval), [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    v1::WorkerMessage hb;
    hb.mutable_heartbeat()->set_sent_unix_us(
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    bool ok = Write(hb);
    lock.lock();
    if (!ok) break;
  }
}

void RouterLink::ExecuteLoop() {
  // Before the worker registers (RunSession waits for it).
  executor_->PrepareThread();
  {
    std::lock_guard<std::mutex> lock(mu_);
    prepared_ = true;
  }
  prepared_cv_.notify_all();
  while (true) {
    ReceivedBatch b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      batch_cv_.wait(lock, [this] { return stopping_ || !batches_.empty(); });
      if (stopping_) return;
      b = std::move(batches_.front());
      batches_.pop_front();
    }
    if (options_.start_delay > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      batch_cv_.wait_for(lock, std::chrono::nanoseconds(options_.start_delay),
                        [this] { return stopping_; });
      if (stopping_) return;
    }
    if (b.loaded != nullptr) {
      LoadedModel& l = *b.loaded;
      if (l.from_repository && l.error.empty() && !l.entry.name.empty() &&
          model_unloads_done_[l.model] > l.model_unloads_before) {
        // Unloaded while it loaded (the router removed it): freed, not
        // served, and its memory no longer counted.
        (void)executor_->Unload(l.model);
        {
          absl::MutexLock lock(&models_mu_);
          footprints_.erase(l.model);
        }
        l.error = "unloaded while it was loading";
      }
      Install(b.loaded.get());
      if (l.stored && !l.entry.name.empty() &&
          model_unloads_done_[l.model] > l.model_unloads_before) {
        // Unregistered while it was written (an unload could not evict a
        // model not stored yet): its package goes. One stored before (a
        // resent package) was deleted by that unload itself.
        Unload(l.model);
        l.error = "unregistered while it was stored";
      }
      // A model loaded on the loader thread: warm on this one too (GPU).
      if (b.loaded->error.empty()) executor_->PrepareThread();
      v1::WorkerMessage reply;
      auto* r = reply.mutable_model_loaded();
      r->set_model(b.loaded->model);
      r->set_error(b.loaded->error);
      r->set_load_us(b.loaded->load_time / kNanosPerMicro);
      r->set_memory_bytes(b.loaded->memory_bytes);
      r->set_stored(b.loaded->stored && b.loaded->error.empty());
      for (const auto& [id, latency_us] : b.loaded->measured) {
        auto* m = r->add_measured();
        m->set_subnet_id(id);
        for (double l : latency_us) m->add_latency_us(l);
      }
      if (!Write(reply)) return;
      continue;
    }
    if (b.message->has_unload_model()) {
      // Only a budgeted worker stores packages to load again.
      Unload(b.message->unload_model().model(),
             b.message->unload_model().keep_package() && options_.memory_budget > 0);
      ++model_unloads_done_[b.message->unload_model().model()];
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++unloads_done_;
      }
      load_cv_.notify_all();  // a placement load may wait for it
      continue;
    }
    v1::WorkerMessage reply;
    RunBatch(b.message->batch(), b.received, *Models(), executor_, reply.mutable_result());
    batches_run_.fetch_add(1);
    if (!Write(reply)) return;
  }
}

void RouterLink::LoadLoop() {
  while (true) {
    PendingLoad next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      load_cv_.wait(lock, [this] { return stopping_ || !loads_.empty(); });
      if (stopping_) return;
      next = std::move(loads_.front());
      loads_.pop_front();
      // Placement evicts before it loads: the memory of the models unloaded
      // before this load is free first.
      if (next.message->load_model().from_repository()) {
        load_cv_.wait(lock, [&] { return stopping_ || unloads_done_ >= next.unloads_before; });
        if (stopping_) return;
      }
    }
    const v1::LoadModel& load = next.message->load_model();
    auto loaded = load.from_repository() ? LoadFromRepository(load.model()) : LoadPackage(load);
    loaded->model_unloads_before = next.model_unloads_before;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      batches_.push_back({nullptr, RealClock::Get()->Now(), std::move(loaded)});
    }
    batch_cv_.notify_one();
  }
}

absl::StatusOr<std::string> RouterLink::PackageRoot() {
  absl::MutexLock lock(&models_mu_);
  if (!package_root_.empty()) return package_root_;
  std::error_code ec;
  std::string root = options_.package_dir;
  if (root.empty()) {
    root = (std::filesystem::temp_directory_path(ec) /
            absl::StrCat("superserve-worker-", getpid(), "-", options_.channel_tag))
               .string();
    owns_package_root_ = true;
  }
  std::filesystem::create_directories(root, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", root, ": ", ec.message()));
  package_root_ = root;
  return package_root_;
}

std::unique_ptr<RouterLink::LoadedModel> RouterLink::LoadPackage(const v1::LoadModel& load) {
  RealClock* clock = RealClock::Get();
  const Nanos start = clock->Now();
  // The name batches will use: the package's, or "<model>@<version>" for a
  // second version loaded beside the first.
  const std::string serve_as = load.serve_as().empty() ? load.model() : load.serve_as();
  auto out = std::make_unique<LoadedModel>();
  out->model = serve_as;
  out->version = load.version();
  out->version.set_model(serve_as);
  auto fail = [&](const std::string& why) {
    out->error = why;
    out->load_time = clock->Now() - start;
    SS_LOG(WARNING) << "model " << serve_as << " not loaded: " << why;
    return std::move(out);
  };
  // Names become folders and files: plain names only.
  auto plain = [](const std::string& n) {
    return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
           n.find('\0') == std::string::npos;
  };
  if (!plain(load.model())) return fail(absl::StrCat("bad model name \"", load.model(), "\""));
  if (!plain(serve_as)) return fail(absl::StrCat("bad model name \"", serve_as, "\""));
  std::vector<ModelEntry> known = *Models();
  {
    absl::MutexLock lock(&models_mu_);
    for (const auto& [name, entry] : stored_) known.push_back(entry);
  }
  for (const ModelEntry& m : known) {
    if (m.name == serve_as) {
      // Already served (loaded before a reconnect, or at start-up): ready,
      // if it is the same version.
      auto digest = DigestModelDirectory(m.directory);
      if (digest.ok() && digest->profile == load.version().profile_digest() &&
          digest->checkpoint == load.version().checkpoint_digest()) {
        out->stored = options_.memory_budget > 0;  // placement's to load
        out->load_time = clock->Now() - start;
        return out;
      }
      return fail("another version of this model is loaded on the worker");
    }
  }
  auto root = PackageRoot();
  if (!root.ok()) return fail(std::string(root.status().message()));
  // <root>/<serve_as>/<model>/: the loader wants the package's folder named
  // after its model.
  const std::filesystem::path slot = std::filesystem::path(*root) / serve_as;
  const std::filesystem::path dir = slot / load.model();
  std::error_code ec;
  std::filesystem::remove_all(slot, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  for (const v1::PackageFile& f : load.files()) {
    if (!plain(f.name())) return fail(absl::StrCat("bad package file name \"", f.name(), "\""));
    std::ofstream o(dir / f.name(), std::ios::binary);
    o.write(f.content().data(), static_cast<std::streamsize>(f.content().size()));
    if (!o) return fail(absl::StrCat("cannot write ", (dir / f.name()).string()));
  }
  auto cleanup_and_fail = [&](const std::string& why) {
    std::filesystem::remove_all(slot, ec);
    return fail(why);
  };
  auto digest = DigestModelDirectory(dir.string());
  if (!digest.ok()) return cleanup_and_fail(std::string(digest.status().message()));
  if (digest->profile != load.version().profile_digest() ||
      digest->checkpoint != load.version().checkpoint_digest()) {
    return cleanup_and_fail(absl::StrCat(
        "the package arrived with digests ", digest->profile, " / ", digest->checkpoint,
        ", the router sent ", load.version().profile_digest(), " / ",
        load.version().checkpoint_digest(), " (corrupted in transfer)"));
  }
  auto entry = LoadModelDirectory(dir.string());
  if (!entry.ok()) return cleanup_and_fail(std::string(entry.status().message()));
  for (const std::string& w : entry->profile.warnings) SS_LOG(WARNING) << w;
  entry->name = serve_as;
  entry->profile.model = serve_as;
  if (!entry->profile.latencies_measured && executor_->kind() == "emulated") {
    return cleanup_and_fail(
        "profile.json leaves latency_us out, and the emulated executor cannot measure them (it "
        "sleeps the profile's latencies): measure on a torch worker");
  }
  if (auto s = executor_->Load(*entry); !s.ok()) {
    return cleanup_and_fail(
        absl::StrCat("the ", std::string(executor_->kind()), " executor: ", s.message()));
  }
  if (!entry->profile.latencies_measured) {
    // Measured here, on the loader thread, before the model serves: the
    // router schedules with these figures.
    auto measured = MeasureLatencies(executor_, *entry);
    absl::Status filled = measured.ok() ? entry->profile.FillLatencies(*measured)
                                        : measured.status();
    if (!filled.ok()) {
      (void)executor_->Unload(serve_as);
      return cleanup_and_fail(absl::StrCat("measuring latencies: ", filled.message()));
    }
    out->measured = *std::move(measured);
    SS_LOG(INFO) << "model " << serve_as << ": measured " << entry->profile.subnets.size()
                 << " subnets x " << entry->profile.batch_sizes.size() << " batch sizes";
  }
  out->memory_bytes = executor_->ResidentBytes(serve_as);
  if (options_.memory_budget > 0) {
    // Placement loads it within the budget when demand asks: this load
    // (briefly beside the resident models) only checked and measured it.
    (void)executor_->Unload(serve_as);
    if (out->memory_bytes > options_.memory_budget) {
      return cleanup_and_fail(absl::StrCat("it takes ", out->memory_bytes,
                                           " bytes, more than this worker's ",
                                           options_.memory_budget, "-byte budget"));
    }
    out->stored = true;
  }
  out->entry = *std::move(entry);
  out->load_time = clock->Now() - start;
  return out;
}

std::unique_ptr<RouterLink::LoadedModel> RouterLink::LoadFromRepository(const std::string& model) {
  RealClock* clock = RealClock::Get();
  const Nanos start = clock->Now();
  auto out = std::make_unique<LoadedModel>();
  out->model = model;
  out->from_repository = true;
  auto fail = [&](const std::string& why) {
    out->error = why;
    out->load_time = clock->Now() - start;
    SS_LOG(WARNING) << "model " << model << " not loaded: " << why;
    return std::move(out);
  };
  if (options_.memory_budget <= 0) {
    return fail("this worker has no memory budget (--memory_budget_mb): it loaded its "
                "repository at start-up");
  }
  ModelEntry entry;
  if (auto it = std::find_if(repository_.begin(), repository_.end(),
                             [&](const ModelEntry& m) { return m.name == model; });
      it != repository_.end()) {
    entry = *it;
  } else {
    absl::MutexLock lock(&models_mu_);
    auto s = stored_.find(model);  // a hot-registered package
    if (s == stored_.end()) return fail("not in this worker's repository");
    entry = s->second;
  }
  // Counted from here (not from Install, on the executor thread): a load
  // queued behind this one counts this one's memory.
  int64_t used = 0;
  {
    absl::MutexLock lock(&models_mu_);
    if (auto f = footprints_.find(model); f != footprints_.end()) {
      out->memory_bytes = f->second;  // loaded already: ready
      out->load_time = clock->Now() - start;
      return out;
    }
    for (const auto& [name, bytes] : footprints_) used += bytes;
  }
  if (auto s = executor_->Load(entry); !s.ok()) {
    return fail(absl::StrCat("the ", std::string(executor_->kind()), " executor: ", s.message()));
  }
  out->memory_bytes = executor_->ResidentBytes(model);
  if (used + out->memory_bytes > options_.memory_budget) {
    (void)executor_->Unload(model);
    return fail(absl::StrCat("it takes ", out->memory_bytes, " bytes, and ", used, " of this "
                             "worker's ", options_.memory_budget, "-byte budget are in use"));
  }
  {
    absl::MutexLock lock(&models_mu_);
    footprints_[model] = out->memory_bytes;
  }
  out->entry = std::move(entry);
  out->load_time = clock->Now() - start;
  return out;
}

void RouterLink::Install(LoadedModel* loaded) {
  if (!loaded->error.empty() || loaded->entry.name.empty()) return;  // failed, or already served
  if (loaded->stored) {
    absl::MutexLock lock(&models_mu_);
    stored_[loaded->model] = loaded->entry;
    hot_versions_.push_back(loaded->version);
    SS_LOG(INFO) << "model " << loaded->model << " stored in " << ToMillis(loaded->load_time)
                 << " ms, " << loaded->memory_bytes
                 << " bytes (hot registration; placement loads it)";
    return;
  }
  {
    absl::MutexLock lock(&models_mu_);
    auto models = std::make_shared<std::vector<ModelEntry>>(*models_);
    models->push_back(loaded->entry);
    models_ = std::move(models);
    if (loaded->from_repository) {
      footprints_[loaded->model] = loaded->memory_bytes;
    } else {
      hot_versions_.push_back(loaded->version);
    }
  }
  SS_LOG(INFO) << "model " << loaded->model << " loaded in " << ToMillis(loaded->load_time)
               << " ms, " << loaded->memory_bytes << " bytes ("
               << (loaded->from_repository ? "placement" : "hot registration") << ")";
}

void RouterLink::Unload(const std::string& model, bool keep_package) {
  std::string directory;
  bool loaded = false;
  {
    const auto models = Models();
    auto it = std::find_if(models->begin(), models->end(),
                           [&](const ModelEntry& m) { return m.name == model; });
    if (it != models->end()) {
      directory = it->directory;
      loaded = true;
    }
  }
  bool forget_stored = false;  // a stored package that goes
  {
    absl::MutexLock lock(&models_mu_);
    if (auto s = stored_.find(model); s != stored_.end() && !keep_package) {
      forget_stored = true;
      directory = s->second.directory;
    }
  }
  if (!loaded && !forget_stored) return;
  if (loaded) {
    if (auto s = executor_->Unload(model); !s.ok()) {
      SS_LOG(WARNING) << "unloading model " << model << ": " << s.message();
    }
  }
  std::string package_root;
  {
    absl::MutexLock lock(&models_mu_);
    auto models = std::make_shared<std::vector<ModelEntry>>();
    models->reserve(models_->size());
    for (const ModelEntry& m : *models_) {
      if (m.name != model) models->push_back(m);
    }
    models_ = std::move(models);
    footprints_.erase(model);
    if (!keep_package) {
      stored_.erase(model);
      hot_versions_.erase(
          std::remove_if(hot_versions_.begin(), hot_versions_.end(),
                         [&](const v1::ModelVersion& v) { return v.model() == model; }),
          hot_versions_.end());
    }
    package_root = package_root_;
  }
  // A hot-loaded package's folder (<root>/<name>/<model>/) goes with it
  // (unless placement evicts it: it is loaded again from there); a start-up
  // model's stays.
  const std::filesystem::path slot = std::filesystem::path(directory).parent_path();
  if (!keep_package && !package_root.empty() &&
      slot.parent_path() == std::filesystem::path(package_root)) {
    std::error_code ec;
    std::filesystem::remove_all(slot, ec);
  }
  if (!loaded) {
    SS_LOG(INFO) << "model " << model << "'s stored package deleted";
    return;
  }
  // glibc keeps freed heap pages mapped; hand them back to the system, so an
  // unregistered model's memory shows as freed (docs/packages.md). The
  // entry is freed once no batch's snapshot holds it.
  malloc_trim(0);
  SS_LOG(INFO) << "model " << model << " unloaded";
}

}  // namespace superserve
