#include "router/dispatcher.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/control_tuple.h"
#include "common/logging.h"
#include "common/tensor_codec.h"

namespace superserve {

Dispatcher::Dispatcher(DispatcherOptions options, const Clock* clock, RouterMetrics* metrics)
    : options_(std::move(options)), clock_(clock), metrics_(metrics) {
  if (options_.run_timer_thread) timer_ = std::thread([this] { TimerLoop(); });
}

Dispatcher::~Dispatcher() { Shutdown(); }

void Dispatcher::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    Nanos now = clock_->Now();
    std::vector<QueryId> ids;
    for (const auto& [id, p] : pending_) ids.push_back(id);
    for (QueryId id : ids) {
      AnswerLocked(id, absl::UnavailableError("router shutting down"), QueryOutcome::kUnavailable,
                   now, &a);
    }
    for (auto& m : models_) m->queue.Clear();
    for (auto& w : workers_) {
      w.inflight.clear();
      if (w.alive && w.connection) a.closes.push_back(w.connection);
      w.alive = false;
    }
  }
  Run(&a);
}

// ---------------------------------------------------------------- models

int32_t Dispatcher::FindModelLocked(const std::string& name) const {
  auto it = model_index_.find(name);
  return it == model_index_.end() ? -1 : it->second;
}

absl::Status Dispatcher::AddModel(const ModelProfile& profile) {
  if (profile.subnets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", profile.model, "\": the router serves supernets; no subnets"));
  }
  auto policy = MakePolicy(options_.policy, profile, options_.policy_config);
  if (!policy.ok()) return policy.status();
  auto m = std::make_unique<ModelState>();
  m->name = profile.model;
  m->profile = profile;
  m->fastest = std::numeric_limits<Nanos>::max();
  for (const auto& s : profile.subnets) m->fastest = std::min(m->fastest, s.latency.front());
  m->policy = *std::move(policy);
  absl::MutexLock lock(&mu_);
  if (FindModelLocked(profile.model) >= 0) {
    return absl::AlreadyExistsError(absl::StrCat("model \"", profile.model, "\" already served"));
  }
  int32_t index = static_cast<int32_t>(models_.size());
  models_.push_back(std::move(m));
  model_index_[profile.model] = index;
  for (int32_t w = 0; w < static_cast<int32_t>(workers_.size()); ++w) {
    const auto& decl = workers_[w].declared_models;
    if (workers_[w].alive && std::find(decl.begin(), decl.end(), profile.model) != decl.end()) {
      AttachWorkerLocked(w, index);
    }
  }
  SS_LOG(INFO) << "serving model " << profile.model << " (" << profile.subnets.size()
               << " subnets, policy " << models_[index]->policy->name() << ")";
  return absl::OkStatus();
}

absl::Status Dispatcher::RemoveModel(const std::string& name) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    int32_t index = FindModelLocked(name);
    if (index < 0) return absl::NotFoundError(absl::StrCat("model \"", name, "\" is not served"));
    FailQueuedLocked(index, absl::UnavailableError(absl::StrCat("model ", name, " unregistered")),
                     QueryOutcome::kUnavailable, clock_->Now(), &a);
    models_[index]->removed = true;
    models_[index]->workers.clear();
    model_index_.erase(name);
  }
  Run(&a);
  return absl::OkStatus();
}

std::vector<v1::ModelInfo> Dispatcher::ListModels() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ModelInfo> out;
  for (const auto& m : models_) {
    if (m->removed) continue;
    v1::ModelInfo info;
    info.set_name(m->name);
    info.set_family(m->profile.family);
    info.set_num_subnets(static_cast<int32_t>(m->profile.subnets.size()));
    double lo = 100, hi = 0;
    for (const auto& s : m->profile.subnets) {
      lo = std::min(lo, s.accuracy);
      hi = std::max(hi, s.accuracy);
    }
    info.set_min_accuracy(lo);
    info.set_max_accuracy(hi);
    for (int32_t b : m->profile.batch_sizes) info.add_batch_sizes(b);
    info.set_workers(static_cast<int32_t>(m->workers.size()));
    out.push_back(std::move(info));
  }
  return out;
}

// ---------------------------------------------------------------- queries

void Dispatcher::Submit(QueryResponder* query, Nanos deadline) {
  const v1::InferRequest& req = query->request();
  Actions a;
  absl::Status reject;
  QueryOutcome reject_outcome = QueryOutcome::kInvalidArgument;
  int32_t model = -1;
  {
    absl::MutexLock lock(&mu_);
    Nanos now = clock_->Now();
    model = FindModelLocked(req.model());
    if (shutting_down_) {
      reject = absl::UnavailableError("router shutting down");
      reject_outcome = QueryOutcome::kUnavailable;
    } else if (model < 0) {
      reject = absl::InvalidArgumentError(absl::StrCat("unknown model \"", req.model(), "\""));
    } else {
      ModelState& m = *models_[model];
      if (auto st = CheckWireTensor(req.input(), DType::kFloat32, m.profile.input_shape);
          !st.ok()) {
        reject = absl::InvalidArgumentError(absl::StrCat("model ", m.name, " input: ", st.message()));
      } else if (m.workers.empty()) {
        reject = absl::UnavailableError(absl::StrCat("no live worker serves model ", m.name));
        reject_outcome = QueryOutcome::kUnavailable;
      } else if (m.queue.size() >= options_.max_queue) {
        reject = absl::ResourceExhaustedError(
            absl::StrCat("model ", m.name, " queue is full (", options_.max_queue, ")"));
        reject_outcome = QueryOutcome::kResourceExhausted;
      } else if (deadline <= now) {
        reject = absl::DeadlineExceededError("deadline already passed on arrival");
        reject_outcome = QueryOutcome::kDeadlineExceeded;
      } else {
        Pending p;
        p.query.id = ++next_query_id_;
        auto app = applications_.try_emplace(req.application(),
                                             static_cast<int32_t>(applications_.size()));
        p.query.application = app.first->second;
        p.query.arrival = now;
        p.query.deadline = deadline;
        p.responder = query;
        p.model = model;
        query->query_id = p.query.id;
        m.queue.Push(p.query);
        m.policy->OnArrival(p.query, now);
        pending_.emplace(p.query.id, p);
        ++stats_.accepted;
        ScheduleLocked(model, now, &a);
      }
    }
  }
  if (!reject.ok()) {
    // Read the request before answering: once answered, the responder (and
    // the request it owns) may be gone — gRPC runs InferReactor::OnDone
    // inline on the thread that completes the call.
    if (metrics_ != nullptr) metrics_->OnQueryDone(model >= 0 ? req.model() : "_unknown",
                                                   reject_outcome, 0, 0, -1);
    query->Answer(reject);
    return;
  }
  Run(&a);
}

void Dispatcher::OnCancelled(QueryResponder* query) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(query->query_id);
  if (it != pending_.end() && it->second.responder == query && !it->second.on_worker &&
      !it->second.cancelled) {
    it->second.cancelled = true;
    ++stats_.cancelled;
  }
}

void Dispatcher::AnswerLocked(QueryId id, const absl::Status& status, QueryOutcome outcome,
                              Nanos now, Actions* a) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  const Pending& p = it->second;
  if (outcome == QueryOutcome::kOk && now > p.query.deadline) outcome = QueryOutcome::kLate;
  double accuracy = 0;
  int32_t subnet_id = -1;
  if (status.ok()) {
    accuracy = p.responder->response()->served_by().accuracy();
    subnet_id = p.responder->response()->served_by().subnet_id();
  }
  a->done.push_back({&models_[p.model]->name, outcome, now - p.query.arrival, accuracy, subnet_id});
  a->answers.emplace_back(p.responder, status);
  pending_.erase(it);
  ++stats_.answered;
}

void Dispatcher::FailQueuedLocked(int32_t model, const absl::Status& status, QueryOutcome outcome,
                                  Nanos now, Actions* a) {
  ModelState& m = *models_[model];
  while (!m.queue.empty()) AnswerLocked(m.queue.Pop().id, status, outcome, now, a);
}

void Dispatcher::RequeueOrDropLocked(QueryId id, Nanos now, Actions* a) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending& p = it->second;
  ModelState& m = *models_[p.model];
  if (!m.removed && !m.workers.empty() && p.query.deadline - now >= m.fastest) {
    p.on_worker = false;
    m.queue.Push(p.query);
    ++stats_.requeued;
    return;
  }
  if (!m.removed && m.workers.empty() && p.query.deadline - now >= m.fastest) {
    AnswerLocked(id, absl::UnavailableError(absl::StrCat("no live worker serves model ", m.name)),
                 QueryOutcome::kUnavailable, now, a);
    return;
  }
  AnswerLocked(id, absl::DeadlineExceededError("worker lost; too little time left to retry"),
               QueryOutcome::kDeadlineExceeded, now, a);
}

// ---------------------------------------------------------------- scheduling

void Dispatcher::ScheduleLocked(int32_t model, Nanos now, Actions* a) {
  ModelState& m = *models_[model];
  // Each round either drops, dispatches or stops, so this ends; the bound is a
  // guard against a policy that keeps returning zero-progress decisions.
  for (int round = 0; round < 4096 && !m.queue.empty(); ++round) {
    free_scratch_.clear();
    for (int32_t w : m.workers) {
      if (static_cast<int32_t>(workers_[w].inflight.size()) < options_.lookahead) {
        free_scratch_.push_back(w);
      }
    }
    if (free_scratch_.empty()) return;
    Decision d = m.policy->Decide(
        SchedulingContext{m.queue, now, free_scratch_, static_cast<int32_t>(m.workers.size())});
    if (d.drop > 0) {
      SS_LOG(DEBUG) << "policy drops " << d.drop << " of " << m.queue.size() << "; head slack "
                    << ToMicros(m.queue.Head().deadline - now) << " us";
    }
    for (int32_t i = 0; i < d.drop && !m.queue.empty(); ++i) {
      AnswerLocked(m.queue.Pop().id,
                   absl::DeadlineExceededError("dropped: deadline cannot be met"),
                   QueryOutcome::kDeadlineExceeded, now, a);
    }
    if (d.kind == Decision::Kind::kDispatch) {
      DispatchLocked(model, d, now, a);
      continue;
    }
    if (d.kind == Decision::Kind::kWakeAt) {
      m.wake_at = d.wake_at;
      if (d.wake_at < earliest_wake_) {
        std::lock_guard<std::mutex> lock(timer_mu_);  // order: mu_ then timer_mu_
        timer_kick_ = true;
        timer_cv_.notify_all();
      }
      return;
    }
    if (d.drop == 0) return;  // idle
  }
}

void Dispatcher::ScheduleWorkerModelsLocked(int32_t worker, Nanos now, Actions* a) {
  // The most urgent model first: its head has the earliest deadline.
  std::vector<std::pair<Nanos, int32_t>> order;
  for (size_t i = 0; i < models_.size(); ++i) {
    const ModelState& m = *models_[i];
    if (m.removed || m.queue.empty()) continue;
    if (std::find(m.workers.begin(), m.workers.end(), worker) == m.workers.end()) continue;
    order.emplace_back(m.queue.Head().deadline, static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end());
  for (const auto& [deadline, model] : order) ScheduleLocked(model, now, a);
}

void Dispatcher::DispatchLocked(int32_t model, const Decision& d, Nanos now, Actions* a) {
  ModelState& m = *models_[model];
  const bool valid_worker =
      std::find(free_scratch_.begin(), free_scratch_.end(), d.worker) != free_scratch_.end();
  if (!valid_worker || d.take < 1 || d.subnet_index < 0 ||
      d.subnet_index >= static_cast<int32_t>(m.profile.subnets.size())) {
    // A policy bug. Answer the queue instead of guessing a batch, so that
    // every query still gets exactly one answer and the loop ends.
    absl::Status st = absl::InternalError(absl::StrCat(
        "policy ", std::string(m.policy->name()), " returned an invalid dispatch (worker ", d.worker,
        ", take ", d.take, ", subnet index ", d.subnet_index, ")"));
    SS_LOG(ERROR) << st.message();
    FailQueuedLocked(model, st, QueryOutcome::kError, now, a);
    return;
  }
  const SubnetProfile& subnet = m.profile.subnets[d.subnet_index];
  auto message = std::make_unique<v1::RouterMessage>();
  v1::Batch* batch = message->mutable_batch();
  batch->set_batch_id(++next_batch_id_);
  batch->set_model(m.name);
  ControlTupleToProto(subnet.control, batch->mutable_control());
  batch->mutable_control()->set_subnet_id(subnet.id);
  if (d.earliest > now) batch->set_earliest_us((d.earliest - now) / kNanosPerMicro);
  if (d.latest > 0) batch->set_latest_us(std::max<Nanos>(1, (d.latest - now) / kNanosPerMicro));
  InflightBatch inflight;
  inflight.model = model;
  inflight.subnet_index = d.subnet_index;
  inflight.batch_size = d.batch_size;
  inflight.sent_at = now;
  inflight.queries.reserve(d.take);
  for (int32_t i = 0; i < d.take && !m.queue.empty(); ++i) {
    Query q = m.queue.Pop();
    auto it = pending_.find(q.id);
    if (it == pending_.end()) continue;
    if (it->second.cancelled) {
      AnswerLocked(q.id, absl::DeadlineExceededError("cancelled by the client"),
                   QueryOutcome::kDeadlineExceeded, now, a);
      continue;
    }
    it->second.dispatched_at = now;
    it->second.on_worker = true;
    v1::BatchQuery* bq = batch->add_queries();
    bq->set_query_id(q.id);
    *bq->mutable_input() = it->second.responder->request().input();
    inflight.queries.push_back(q.id);
  }
  if (inflight.queries.empty()) return;
  ++stats_.batches;
  WorkerState& w = workers_[d.worker];
  if (metrics_ != nullptr) metrics_->OnBatch(m.name, static_cast<int32_t>(inflight.queries.size()));
  w.inflight.emplace(batch->batch_id(), std::move(inflight));
  a->sends.emplace_back(w.connection, std::move(message));
}

// ---------------------------------------------------------------- workers

void Dispatcher::AttachWorkerLocked(int32_t worker, int32_t model) {
  auto& ws = models_[model]->workers;
  if (std::find(ws.begin(), ws.end(), worker) == ws.end()) {
    ws.insert(std::upper_bound(ws.begin(), ws.end(), worker), worker);
  }
}

absl::StatusOr<int32_t> Dispatcher::RegisterWorker(const v1::RegisterWorker& hello,
                                                   std::shared_ptr<WorkerConnection> connection) {
  Actions a;
  int32_t index;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("router shutting down");
    Nanos now = clock_->Now();
    index = static_cast<int32_t>(workers_.size());
    WorkerState w;
    w.name = hello.worker_id().empty() ? absl::StrCat("worker-", index)
                                       : absl::StrCat(hello.worker_id(), "#", index);
    w.emulated = hello.emulated();
    w.declared_models.assign(hello.models().begin(), hello.models().end());
    w.connection = connection;
    w.last_heard = now;
    w.busy_window_start = now;
    workers_.push_back(std::move(w));
    std::vector<std::string> served;
    for (const auto& name : hello.models()) {
      int32_t model = FindModelLocked(name);
      if (model >= 0) {
        AttachWorkerLocked(index, model);
        served.push_back(name);
      }
    }
    auto ack = std::make_unique<v1::RouterMessage>();
    ack->mutable_ack()->set_assigned_id(workers_[index].name);
    ack->mutable_ack()->set_heartbeat_interval_ms(options_.heartbeat_interval / kNanosPerMilli);
    a.sends.emplace_back(connection, std::move(ack));
    SS_LOG(INFO) << "worker " << workers_[index].name << " registered"
                 << (hello.emulated() ? " (emulated)" : "") << ", serving "
                 << served.size() << " of " << hello.models_size() << " declared models";
    stats_.workers_alive++;
    if (metrics_ != nullptr) metrics_->SetWorkersAlive(stats_.workers_alive);
    ScheduleWorkerModelsLocked(index, now, &a);
  }
  Run(&a);
  return index;
}

void Dispatcher::OnHeartbeat(int32_t worker) {
  absl::MutexLock lock(&mu_);
  if (worker >= 0 && worker < static_cast<int32_t>(workers_.size())) {
    workers_[worker].last_heard = clock_->Now();
  }
}

void Dispatcher::OnBatchResult(int32_t worker, const v1::BatchResult& result) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (worker < 0 || worker >= static_cast<int32_t>(workers_.size())) return;
    WorkerState& w = workers_[worker];
    Nanos now = clock_->Now();
    w.last_heard = now;
    auto it = w.inflight.find(result.batch_id());
    if (it == w.inflight.end()) return;  // already re-queued (worker declared dead)
    InflightBatch batch = std::move(it->second);
    w.inflight.erase(it);
    ModelState& m = *models_[batch.model];
    const Nanos exec = result.exec_us() * kNanosPerMicro;
    w.busy += exec;
    if (!m.removed) {
      CompletionTelemetry t;
      t.worker = worker;
      t.subnet_index = batch.subnet_index;
      t.batch_size = batch.batch_size;
      t.exec = exec;
      t.overhead =
          std::max<Nanos>(0, now - batch.sent_at - exec - result.worker_queue_us() * kNanosPerMicro);
      t.now = now;
      m.policy->OnCompletion(t);
      SS_LOG(DEBUG) << "batch " << result.batch_id() << " on " << w.name << ": "
                    << batch.queries.size() << " queries, subnet index " << batch.subnet_index
                    << ", round trip " << ToMicros(now - batch.sent_at) << " us, exec "
                    << result.exec_us() << " us, overhead " << ToMicros(t.overhead) << " us";
    }
    const SubnetProfile& subnet = m.profile.subnets[batch.subnet_index];
    if (result.error().empty()) {
      if (result.results_size() != static_cast<int>(batch.queries.size())) {
        for (QueryId id : batch.queries) {
          AnswerLocked(id, absl::InternalError(absl::StrCat(
                               "worker ", w.name, " returned ", result.results_size(),
                               " results for ", batch.queries.size(), " queries")),
                       QueryOutcome::kError, now, &a);
        }
      }
      for (int i = 0; i < result.results_size(); ++i) {
        const v1::QueryResult& r = result.results(i);
        auto pit = pending_.find(r.query_id());
        if (pit == pending_.end()) continue;
        v1::InferResponse* resp = pit->second.responder->response();
        *resp->mutable_output() = r.output();
        resp->mutable_served_by()->set_subnet_id(subnet.id);
        resp->mutable_served_by()->set_accuracy(subnet.accuracy);
        resp->mutable_served_by()->set_worker(w.name);
        resp->set_batch_size(static_cast<int32_t>(batch.queries.size()));
        resp->set_queue_us((pit->second.dispatched_at - pit->second.query.arrival) /
                           kNanosPerMicro);
        resp->set_exec_us(result.exec_us());
        AnswerLocked(r.query_id(), absl::OkStatus(), QueryOutcome::kOk, now, &a);
      }
    } else if (result.error_code() == static_cast<int>(absl::StatusCode::kDeadlineExceeded)) {
      // The worker could not start within the window: try again elsewhere.
      for (QueryId id : batch.queries) RequeueOrDropLocked(id, now, &a);
      if (!m.removed) ScheduleLocked(batch.model, now, &a);
    } else {
      absl::StatusCode code = result.error_code() == 0
                                  ? absl::StatusCode::kInternal
                                  : static_cast<absl::StatusCode>(result.error_code());
      absl::Status st(code, absl::StrCat("worker ", w.name, ": ", result.error()));
      for (QueryId id : batch.queries) AnswerLocked(id, st, QueryOutcome::kError, now, &a);
    }
    if (w.alive) ScheduleWorkerModelsLocked(worker, now, &a);
  }
  Run(&a);
}

void Dispatcher::OnWorkerGone(int32_t worker, const absl::Status& why) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    WorkerGoneLocked(worker, why, clock_->Now(), &a);
  }
  Run(&a);
}

void Dispatcher::WorkerGoneLocked(int32_t worker, const absl::Status& why, Nanos now,
                                  Actions* a) {
  if (worker < 0 || worker >= static_cast<int32_t>(workers_.size())) return;
  WorkerState& w = workers_[worker];
  if (!w.alive) return;
  w.alive = false;
  stats_.workers_alive--;
  if (metrics_ != nullptr) metrics_->SetWorkersAlive(stats_.workers_alive);
  SS_LOG(WARNING) << "worker " << w.name << " gone (" << why.message() << "); "
                  << w.inflight.size() << " batches in flight";
  a->closes.push_back(w.connection);
  std::vector<int32_t> affected;
  for (size_t i = 0; i < models_.size(); ++i) {
    auto& ws = models_[i]->workers;
    auto it = std::find(ws.begin(), ws.end(), worker);
    if (it != ws.end()) {
      ws.erase(it);
      affected.push_back(static_cast<int32_t>(i));
    }
  }
  auto inflight = std::move(w.inflight);
  w.inflight.clear();
  for (auto& [id, batch] : inflight) {
    for (QueryId q : batch.queries) RequeueOrDropLocked(q, now, a);
  }
  for (int32_t model : affected) {
    if (models_[model]->workers.empty()) {
      FailQueuedLocked(model,
                       absl::UnavailableError(absl::StrCat("no live worker serves model ",
                                                           models_[model]->name)),
                       QueryOutcome::kUnavailable, now, a);
    } else {
      ScheduleLocked(model, now, a);
    }
  }
}

// ---------------------------------------------------------------- timer

Nanos Dispatcher::Tick() {
  Actions a;
  Nanos next;
  {
    absl::MutexLock lock(&mu_);
    Nanos now = clock_->Now();
    next = now + options_.heartbeat_interval / 2;
    const Nanos silent_limit = options_.heartbeat_interval * options_.missed_heartbeats;
    for (int32_t i = 0; i < static_cast<int32_t>(workers_.size()); ++i) {
      WorkerState& w = workers_[i];
      if (!w.alive) continue;
      if (now - w.last_heard > silent_limit) {
        WorkerGoneLocked(i, absl::UnavailableError("missed heartbeats"), now, &a);
        continue;
      }
      Nanos window = now - w.busy_window_start;
      if (window >= options_.heartbeat_interval && metrics_ != nullptr) {
        metrics_->SetWorkerBusyFraction(w.name, std::min(1.0, static_cast<double>(w.busy) /
                                                                  static_cast<double>(window)));
        w.busy = 0;
        w.busy_window_start = now;
      }
    }
    for (size_t i = 0; i < models_.size(); ++i) {
      ModelState& m = *models_[i];
      if (m.removed) continue;
      if (m.wake_at != 0 && m.wake_at <= now) {
        m.wake_at = 0;
        ScheduleLocked(static_cast<int32_t>(i), now, &a);
      }
      if (m.wake_at != 0) next = std::min(next, m.wake_at);
      if (metrics_ != nullptr) metrics_->SetQueueDepth(m.name, static_cast<int64_t>(m.queue.size()));
    }
    earliest_wake_ = next;
  }
  Run(&a);
  return next;
}

void Dispatcher::TimerLoop() {
  std::unique_lock<std::mutex> lock(timer_mu_);
  while (!timer_stop_) {
    lock.unlock();
    Nanos next = Tick();
    lock.lock();
    Nanos wait = next - clock_->Now();
    if (wait > 0) {
      timer_cv_.wait_for(lock, std::chrono::nanoseconds(wait),
                         [this] { return timer_stop_ || timer_kick_; });
    }
    timer_kick_ = false;
  }
}

// ---------------------------------------------------------------- actions

void Dispatcher::Run(Actions* a) {
  for (auto& [conn, msg] : a->sends) {
    if (conn) conn->Send(std::move(msg));
  }
  for (auto& [responder, status] : a->answers) responder->Answer(status);
  for (auto& conn : a->closes) {
    if (conn) conn->Close(absl::UnavailableError("worker declared dead"));
  }
  if (metrics_ != nullptr) {
    for (const auto& d : a->done) {
      metrics_->OnQueryDone(*d.model_name, d.outcome, d.latency, d.accuracy, d.subnet_id);
    }
  }
}

DispatcherStats Dispatcher::Stats() const {
  absl::MutexLock lock(&mu_);
  DispatcherStats s = stats_;
  s.pending = static_cast<int64_t>(pending_.size());
  return s;
}

}  // namespace superserve
