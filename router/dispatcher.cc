#include "router/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/logging.h"
#include "common/tensor_codec.h"
#include "common/worker_link_limits.h"
#include "google/protobuf/unknown_field_set.h"
#include "router/grpc_worker_channel.h"
#include "router/tensor_payload.h"

namespace superserve {

void DropUnknownFields(google::protobuf::Message* message) {
  const google::protobuf::Reflection* r = message->GetReflection();
  if (!r->GetUnknownFields(*message).empty()) r->MutableUnknownFields(message)->Clear();
}

void QueryResponder::Deliver(QueryAnswer answer) {
  if (answer.status.ok()) {
    v1::InferResponse* resp = response();
    if (auto* out = static_cast<TensorPayload*>(answer.output.get())) {
      resp->mutable_output()->Swap(&out->tensor);
    }
    resp->mutable_served_by()->set_subnet_id(answer.subnet_id);
    resp->mutable_served_by()->set_accuracy(answer.accuracy);
    if (answer.exit >= 0) resp->mutable_served_by()->set_exit(answer.exit + 1);
    if (answer.exit_threshold > 0) {
      resp->mutable_served_by()->set_exit_threshold(static_cast<float>(answer.exit_threshold));
    }
    if (answer.worker) resp->mutable_served_by()->set_worker(*answer.worker);
    resp->set_batch_size(answer.batch_size);
    resp->set_queue_us(answer.queued / kNanosPerMicro);
    resp->set_exec_us(answer.exec / kNanosPerMicro);
  }
  Answer(answer.status);
}

Dispatcher::Dispatcher(DispatcherOptions options, const Clock* clock, RouterMetrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      core_(options_.serving, clock, metrics, [this](Nanos t) { RequestTick(t); }),
      lifecycle_(ModelLifecycle::Serving{
          [this](const ModelProfile& p, const ModelDigest* d) { return ServeInCore(p, d); },
          [this](const std::string& model, std::function<void()> on_drained) {
            return core_.CloseModel(model, std::move(on_drained));
          },
          [this](const std::string& model) { return RemoveModel(model); },
          [this](int32_t worker, const std::string& model) {
            return core_.AttachWorker(worker, model);
          }}),
      timer_next_(clock->Now() + options_.serving.tick_interval) {
  if (options_.run_timer_thread) timer_ = std::thread([this] { TimerLoop(); });
}

Dispatcher::~Dispatcher() { Shutdown(); }

void Dispatcher::Shutdown() {
  lifecycle_.Shutdown();
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  core_.Shutdown();
}

bool Dispatcher::Drain(Nanos timeout) {
  // Shared: the event may come after a timed-out wait has returned.
  auto idle = std::make_shared<absl::Notification>();
  core_.Drain([idle] { idle->Notify(); });
  return idle->WaitForNotificationWithTimeout(absl::Nanoseconds(std::max<Nanos>(0, timeout)));
}

absl::Status Dispatcher::ServeInCore(const ModelProfile& profile, const ModelDigest* digest) {
  if (profile.subnets.empty() && !profile.is_dynamic) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", profile.model, "\": neither a supernet (no subnets) nor dynamic"));
  }
  if (auto s = CheckBatchesFitWorkerLink(profile); !s.ok()) return s;
  auto policy = MakePolicy(PolicyNameFor(profile), profile, options_.policy_config);
  if (!policy.ok()) return policy.status();
  if (auto s = core_.AddModel(profile, *std::move(policy)); !s.ok()) return s;
  // The profile the workers-needed advice plans with, whatever the source.
  if (metrics_ != nullptr) metrics_->SetModelProfile(profile);
  std::lock_guard<std::mutex> lock(digests_mu_);
  if (digest != nullptr) {
    digests_[profile.model] = *digest;
  } else {
    digests_.erase(profile.model);
  }
  return absl::OkStatus();
}

std::string Dispatcher::PolicyNameFor(const ModelProfile& profile) const {
  if (auto it = options_.model_policies.find(profile.model); it != options_.model_policies.end()) {
    return it->second;
  }
  return profile.is_dynamic ? options_.dynamic_policy : options_.policy;
}

absl::Status Dispatcher::RemoveModel(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(digests_mu_);
    digests_.erase(name);
  }
  if (auto s = core_.RemoveModel(name); !s.ok()) return s;
  // After the core answered what it held (those answers are counted): the
  // model's series leave /metrics with it.
  if (metrics_ != nullptr) metrics_->RemoveModel(name);
  return absl::OkStatus();
}

void Dispatcher::OnWorkerGone(int32_t worker, const absl::Status& why) {
  core_.OnWorkerGone(worker, why);
  lifecycle_.OnWorkerGone(worker);
}

absl::Status Dispatcher::CheckModelVersions(const v1::RegisterWorker& hello) {
  std::lock_guard<std::mutex> lock(digests_mu_);
  for (const std::string& model : hello.models()) {
    auto ours = digests_.find(model);
    if (ours == digests_.end()) continue;
    const v1::ModelVersion* theirs = nullptr;
    for (const auto& v : hello.versions()) {
      if (v.model() == model) theirs = &v;
    }
    if (theirs == nullptr) {
      SS_LOG(WARNING) << "worker " << hello.worker_id() << " registers model " << model
                      << " without a version digest; its version is not checked";
      continue;
    }
    auto differs = [](const std::string& a, const std::string& b) {
      return !a.empty() && !b.empty() && a != b;
    };
    if (differs(theirs->profile_digest(), ours->second.profile)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", model, ": the worker's profile.json has digest ", theirs->profile_digest(),
          ", the router's ", ours->second.profile, " (different model versions)"));
    }
    if (differs(theirs->checkpoint_digest(), ours->second.checkpoint)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", model, ": the worker's checkpoint has digest ", theirs->checkpoint_digest(),
          ", the router's ", ours->second.checkpoint, " (different model versions)"));
    }
  }
  return absl::OkStatus();
}

std::vector<ModelSummary> Dispatcher::ModelSummaries() const {
  std::vector<ModelSummary> models = core_.ListModels();
  models.erase(std::remove_if(models.begin(), models.end(),
                              [this](const ModelSummary& m) {
                                auto state = lifecycle_.StateOf(m.name);
                                return state.has_value() &&
                                       *state != ModelLifecycle::State::kServing;
                              }),
               models.end());
  return models;
}

absl::StatusOr<ModelSummary> Dispatcher::FindModel(const std::string& name,
                                                   uint32_t version) const {
  std::vector<ModelSummary> models = ModelSummaries();
  const bool versioned = lifecycle_.versions().Current(name) > 0;
  std::string internal = name;
  if (versioned) {
    auto resolved = lifecycle_.versions().Resolve(name, version);
    internal = resolved.ok() ? *resolved : std::string();
  }
  for (ModelSummary& m : models) {
    if (internal.empty() || m.name != internal) continue;
    if (auto owner = lifecycle_.versions().OwnerOf(m.name)) m.version = owner->version;
    if (!versioned && version != 0 && m.version != version) break;
    return m;
  }
  std::vector<std::string> served;
  for (const ModelSummary& m : models) {
    auto owner = lifecycle_.versions().OwnerOf(m.name);
    served.push_back(owner ? absl::StrCat(owner->name, " v", owner->version)
                           : absl::StrCat(m.name, " v", m.version));
  }
  return absl::NotFoundError(absl::StrCat("no model \"", name, "\"",
                                          version > 0 ? absl::StrCat(" version ", version) : "",
                                          "; serving: ", absl::StrJoin(served, ", ")));
}

std::vector<v1::ModelInfo> Dispatcher::ListModels() const {
  std::vector<v1::ModelInfo> out;
  for (const ModelSummary& m : ModelSummaries()) {
    v1::ModelInfo info;
    info.set_name(m.name);
    info.set_family(m.family);
    info.set_num_subnets(m.num_subnets);
    info.set_min_accuracy(m.min_accuracy);
    info.set_max_accuracy(m.max_accuracy);
    info.set_min_latency_us(m.min_latency_us);
    info.set_max_latency_us(m.max_latency_us);
    for (int32_t b : m.batch_sizes) info.add_batch_sizes(b);
    info.set_workers(m.workers);
    if (m.dynamic) {
      info.set_dynamic(true);
      for (const std::string& a : m.applications) info.add_applications(a);
      info.set_num_exits(m.num_exits);
      info.set_min_exit_accuracy(m.min_exit_accuracy);
      info.set_max_exit_accuracy(m.max_exit_accuracy);
      info.set_min_exec_us(m.min_exec_us);
      info.set_max_exec_us(m.max_exec_us);
    }
    if (auto owner = lifecycle_.versions().OwnerOf(m.name)) {
      info.set_version(owner->version);
      info.set_current(owner->current);
    }
    out.push_back(std::move(info));
  }
  return out;
}

void Dispatcher::Submit(QueryResponder* query, Nanos deadline) {
  const v1::InferRequest& req = query->request();
  auto input = std::make_shared<TensorPayload>();
  if (!query->TakeInput(&input->tensor)) input->tensor = req.input();
  // Fields this router does not know are not validated, and the tensor goes
  // to the worker whole: a client could pad a valid input with 40 MiB of
  // them, and two such queries in one batch overflowed the worker link's
  // 64 MiB message limit, so the worker was dropped with every other
  // client's query in that batch.
  DropUnknownFields(&input->tensor);
  const v1::Tensor& tensor = input->tensor;
  // The version: pinned, or the current one (router/model_versions.h).
  auto internal = lifecycle_.versions().Resolve(req.model(), req.model_version());
  if (!internal.ok()) {
    query->Answer(internal.status());
    return;
  }
  QueryRequest r;
  r.model = *internal;
  r.application = req.application();
  input->application = req.application();
  r.deadline = deadline;
  r.payload = std::move(input);
  // `req` and `tensor` stay valid through the call: the core answers only
  // after it has read the request.
  core_.Submit(query, std::move(r), [&tensor](const ModelProfile& profile) {
    return CheckWireTensor(tensor, DType::kFloat32, profile.input_shape);
  });
}

absl::StatusOr<int32_t> Dispatcher::RegisterWorker(const v1::RegisterWorker& hello,
                                                   std::shared_ptr<WorkerConnection> connection) {
  if (auto s = CheckModelVersions(hello); !s.ok()) return s;
  WorkerRegistration reg;
  reg.name = hello.worker_id();
  reg.emulated = hello.emulated();
  reg.models.assign(hello.models().begin(), hello.models().end());
  if (hello.memory_budget_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory_budget_bytes is ", hello.memory_budget_bytes(), "; it must be >= 0"));
  }
  reg.memory_bytes = hello.memory_budget_bytes();
  auto id = core_.RegisterWorker(reg, std::make_shared<GrpcWorkerChannel>(connection));
  if (id.ok()) {
    // After the core sent the RegisterAck: the worker reads it first.
    lifecycle_.OnWorkerRegistered(
        *id, hello.worker_id().empty() ? absl::StrCat("worker-", *id)
                                       : absl::StrCat(hello.worker_id(), "#", *id),
        reg.models, std::move(connection), /*stores_packages=*/reg.memory_bytes > 0);
  }
  return id;
}

void Dispatcher::OnModelLoaded(int32_t worker, const v1::ModelLoaded& loaded) {
  lifecycle_.OnModelLoaded(worker, loaded);
  // A footprint outside [0, kMaxFootprintBytes] is the worker's error: the
  // profile's figure stands.
  int64_t bytes = loaded.memory_bytes();
  if (bytes < 0 || bytes > kMaxFootprintBytes) {
    SS_LOG(WARNING) << "worker " << worker << " reports model " << loaded.model()
                    << " taking " << bytes << " bytes; ignored (the profile's figure stands)";
    bytes = 0;
  }
  // A package stored, not loaded: its trial load's footprint counts from
  // now on (the model was added above, if this made it visible), but were
  // a placement load of the model pending on this worker (a query that came
  // as it turned visible), this must not complete it.
  if (loaded.stored()) {
    if (loaded.error().empty()) core_.OnFootprintMeasured(worker, loaded.model(), bytes);
    return;
  }
  // Placement's loads (ServingCore::OnModelLoaded ignores a report of a load
  // it did not ask for).
  core_.OnModelLoaded(worker, loaded.model(),
                      loaded.error().empty() ? absl::OkStatus()
                                             : absl::UnavailableError(loaded.error()),
                      bytes);
}

void Dispatcher::OnBatchResult(int32_t worker, v1::BatchResult* result) {
  core_.OnBatchResult(worker, DecodeBatchResult(result));
}

void Dispatcher::RequestTick(Nanos t) {
  std::lock_guard<std::mutex> lock(timer_mu_);
  requested_during_tick_ = std::min(requested_during_tick_, t);
  if (t < timer_next_) {
    timer_next_ = t;
    timer_cv_.notify_all();
  }
}

Nanos Dispatcher::Tick() {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    requested_during_tick_ = std::numeric_limits<Nanos>::max();
  }
  const Nanos next = core_.Tick();
  // A request that came after the core decided `next` (from another thread,
  // or from this tick's own effects) compared itself with the stale
  // timer_next_ and may have been dropped there: the earlier one wins.
  std::lock_guard<std::mutex> lock(timer_mu_);
  timer_next_ = std::min(next, requested_during_tick_);
  return timer_next_;
}

void Dispatcher::TimerLoop() {
  std::unique_lock<std::mutex> lock(timer_mu_);
  while (!timer_stop_) {
    lock.unlock();
    Tick();
    lock.lock();
    while (!timer_stop_) {
      const Nanos wait = timer_next_ - core_.clock()->Now();
      if (wait <= 0) break;
      timer_cv_.wait_for(lock, std::chrono::nanoseconds(wait));
    }
  }
}

}  // namespace superserve
