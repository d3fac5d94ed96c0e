// ServingCore: queries, workers, scheduling passes and the timer, under one
// lock; effects applied after it (serving_core.h). Placement is in
// serving_core_placement.cc.
#include "serving/serving_core.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "serving/admission.h"
#include "serving/batch_builder.h"
#include "serving/completion_telemetry.h"
#include "serving/served_by.h"

namespace superserve {
namespace {

// Busy fractions are reported over windows of at least this length.
constexpr Nanos kBusyWindow = Millis(500);

}  // namespace

ServingCore::ServingCore(ServingOptions options, const Clock* clock, ServingObserver* observer,
                         std::function<void(Nanos)> request_tick)
    : options_(std::move(options)),
      clock_(clock),
      observer_(observer),
      request_tick_(std::move(request_tick)),
      admission_(options_.max_queue),
      workers_(options_.lookahead),
      applications_(ApplicationRegistry::Options{options_.max_applications,
                                                 options_.max_application_bytes}),
      residency_(options_.demand_half_life) {
  absl::MutexLock lock(&mu_);
  next_tick_ = clock_->Now() + options_.tick_interval;
}

ServingCore::~ServingCore() { Shutdown(); }

// ---------------------------------------------------------------- effects

void ServingCore::Apply(Effects* e) {
  if (e->rare != nullptr && e->rare->drain_check) CollectDrained(e);
  e->Carry(observer_);
  if (observer_ != nullptr && e->workers_alive >= 0) {
    absl::MutexLock lock(&alive_report_mu_);
    if (e->workers_alive_version > alive_reported_version_) {
      alive_reported_version_ = e->workers_alive_version;
      observer_->OnWorkersAlive(e->workers_alive);
    }
  }
  if (e->wake > 0 && request_tick_) request_tick_(e->wake);
}

void ServingCore::HousekeepByLocked(Nanos t, Effects* e) {
  if (t >= next_housekeeping_) return;
  next_housekeeping_ = t;
  if (t < next_tick_) {
    next_tick_ = t;
    e->wake = e->wake > 0 ? std::min(e->wake, t) : t;
  }
}

void ServingCore::NoteWorkersAliveLocked(Effects* e) {
  e->workers_alive = workers_.alive();
  e->workers_alive_version = ++workers_alive_version_;
}

// ---------------------------------------------------------------- models

absl::Status ServingCore::AddModel(const ModelProfile& profile, std::unique_ptr<Policy> policy) {
  if (profile.subnets.empty() && !profile.is_dynamic) {
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", profile.model, "\": no subnets to schedule"));
  }
  if (policy == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("model \"", profile.model, "\": no policy"));
  }
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("shutting down");
    auto added = models_.Add(profile, std::move(policy));
    if (!added.ok()) return added.status();
    ServedModel* m = *added;
    applications_.ForEach(
        [&](int32_t id, const std::string& tag) { m->scheduler.NameApplication(id, tag); });
    m->scheduler.set_overload(options_.overload);
    residency_.AddModel(m->id, profile.memory_bytes, profile.load_time);
    int32_t attached = 0;
    for (const WorkerRecord& w : workers_.records()) {
      if (!w.alive) continue;
      const auto& d = w.declared_models;
      if (std::find(d.begin(), d.end(), profile.model) != d.end()) {
        if (residency_.Tracks(w.id)) {
          m->loadable_on.push_back(w.id);  // loaded when demand asks
          continue;
        }
        m->scheduler.AddWorker(w.id);
        ++attached;
      }
    }
    if (options_.log_lifecycle) {
      e.Log(LogLevel::kInfo, __FILE__, __LINE__,
            absl::StrCat("serving model ", profile.model, " v", m->version, " (",
                         profile.subnets.size(), " subnets, policy ",
                         std::string(m->scheduler.policy().name()), ", ", attached, " workers)"));
    }
  }
  Apply(&e);
  return absl::OkStatus();
}

absl::Status ServingCore::RemoveModel(const std::string& name) {
  Effects e;
  std::unique_ptr<ServedModel> removed;  // freed after the lock is released
  {
    absl::MutexLock lock(&mu_);
    ServedModel* m = models_.Find(name);
    if (m == nullptr) return absl::NotFoundError(absl::StrCat("model \"", name, "\" is not served"));
    const Nanos now = clock_->Now();
    const absl::Status gone = absl::UnavailableError(absl::StrCat("model ", name, " unregistered"));
    for (QueryId id : m->scheduler.TakeAll()) FailLocked(id, gone, QueryOutcome::kUnavailable, now, &e);
    // Batches on workers keep their slot until the worker answers (it is
    // busy with them), but their queries are answered now.
    for (QueryId id : workers_.TakeQueriesOf(m->id)) {
      FailLocked(id, gone, QueryOutcome::kUnavailable, now, &e);
    }
    // Its workers are told to free it (ModelLifecycle): added again, it
    // serves on those that report it loaded anew (AttachWorker).
    for (WorkerRecord& w : workers_.records()) {
      auto& d = w.declared_models;
      d.erase(std::remove(d.begin(), d.end(), name), d.end());
    }
    active_.Remove(m);
    wakes_.Erase(m);
    for (int32_t held : residency_.RemoveModel(m->id)) {
      if (const WorkerRecord* w = workers_.GetAlive(held)) {
        e.rare_effects().unloads.emplace_back(w->channel, name);
        ++stats_.unloads;
      }
    }
    cold_since_.erase(m->id);
    if (auto d = on_drained_.find(name); d != on_drained_.end()) {  // nothing left to drain
      e.rare_effects().drained.push_back(std::move(d->second));
      on_drained_.erase(d);
    }
    removed = models_.Remove(name);
    if (options_.log_lifecycle) {
      e.Log(LogLevel::kInfo, __FILE__, __LINE__, absl::StrCat("model ", name, " removed"));
    }
  }
  Apply(&e);
  return absl::OkStatus();
}

absl::Status ServingCore::CloseModel(const std::string& name, std::function<void()> on_drained) {
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    ServedModel* m = models_.Find(name);
    if (m == nullptr) {
      return absl::NotFoundError(absl::StrCat("model \"", name, "\" is not served"));
    }
    m->closed = true;
    if (on_drained == nullptr) return absl::OkStatus();
    on_drained_[name] = std::move(on_drained);
    e.rare_effects().drain_check = true;  // drained already?
  }
  Apply(&e);
  return absl::OkStatus();
}

void ServingCore::CollectDrained(Effects* e) {
  absl::MutexLock lock(&mu_);
  if (!on_idle_.empty() && (shut_down_ || pending_.empty())) {
    for (auto& on_idle : on_idle_) e->rare_effects().drained.push_back(std::move(on_idle));
    on_idle_.clear();
  }
  for (auto it = on_drained_.begin(); it != on_drained_.end();) {
    if (shut_down_ || ModelDrainedLocked(it->first)) {
      e->rare_effects().drained.push_back(std::move(it->second));
      on_drained_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::Status ServingCore::AttachWorker(int32_t worker, const std::string& model) {
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    WorkerRecord* w = workers_.GetAlive(worker);
    if (w == nullptr) return absl::NotFoundError(absl::StrCat("worker ", worker, " is not alive"));
    auto& d = w->declared_models;
    if (std::find(d.begin(), d.end(), model) != d.end()) return absl::OkStatus();
    d.push_back(model);
    ServedModel* m = models_.Find(model);
    if (m == nullptr) return absl::OkStatus();
    if (residency_.Tracks(worker)) {
      m->loadable_on.insert(std::upper_bound(m->loadable_on.begin(), m->loadable_on.end(), worker),
                            worker);
      return absl::OkStatus();
    }
    m->scheduler.AddWorker(worker);
    if (options_.log_lifecycle) {
      e.Log(LogLevel::kInfo, __FILE__, __LINE__,
            absl::StrCat("worker ", *w->name, " loaded model ", model));
    }
    ScheduleLocked(m, clock_->Now(), &e);
  }
  Apply(&e);
  return absl::OkStatus();
}

bool ServingCore::ModelDrainedLocked(const std::string& name) const {
  const ServedModel* m = models_.Find(name);
  if (m == nullptr) return true;
  return m->scheduler.queued() == 0 && workers_.AnsweringBatches(m->id) == 0;
}

std::vector<ModelSummary> ServingCore::ListModels() const {
  absl::MutexLock lock(&mu_);
  std::vector<ModelSummary> out;
  for (const ServedModel* m : models_.All()) {
    out.push_back(SummarizeModel(*m, workers_.AnsweringBatches(m->id)));
  }
  return out;
}

// ---------------------------------------------------------------- queries

void ServingCore::Submit(QueryHandle* handle, QueryRequest request) {
  Submit(handle, std::move(request), [](const ModelProfile&) { return absl::OkStatus(); });
}

void ServingCore::Submit(QueryHandle* handle, QueryRequest request, InputCheck check) {
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    const Nanos now = clock_->Now();
    ServedModel* m = shut_down_ ? nullptr : models_.Find(request.model);
    const auto sweep = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { SweepLocked(m, now, &e); };
    const auto place = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return PlaceForArrivalLocked(m, request.deadline, now, &e);
    };
    if (std::optional<Refusal> r =
            admission_.Check(Arrival{request.model, request.application, request.deadline, now},
                             shut_down_, draining_, m, applications_, {check, sweep, place})) {
      if (r->check == Refusal::Check::kOverloaded) ++stats_.shed;
      if (r->check == Refusal::Check::kTooLittleSlack) ++stats_.late_on_arrival;
      if (r->check == Refusal::Check::kLoadTooLate) ++stats_.load_too_late;
      RejectLocked(handle, request.model, r->status, r->outcome, now, &e);
    } else {
      PendingQuery& p = pending_.Add();
      const QueryId id = p.query.id;
      p.query.application = ApplicationIdLocked(request.application);
      p.query.arrival = now;
      p.query.deadline = request.deadline;
      p.handle = handle;
      p.input = std::move(request.payload);
      p.model = m->id;
      handle->query_id = id;
      m->scheduler.Push(p.query, now);
      active_.Add(m);
      ++stats_.accepted;
      MaybeReplicateLocked(m, request.deadline, now, &e);
      // Queued: swept once per tick interval again, on the grid the last
      // housekeeping set (an idle core had let it lapse).
      if (next_housekeeping_ > now + options_.tick_interval) {
        const Nanos since = now - last_housekeeping_;
        const Nanos periods =
            std::max<Nanos>(1, (since + options_.tick_interval - 1) / options_.tick_interval);
        HousekeepByLocked(last_housekeeping_ + periods * options_.tick_interval, &e);
      }
      ScheduleLocked(m, now, &e);
    }
  }
  Apply(&e);
}

void ServingCore::OnCancelled(QueryHandle* handle) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(handle->query_id);
  if (it == pending_.end() || it->second.handle != handle || it->second.on_worker) return;
  ServedModel* m = models_.Find(it->second.model);
  if (m == nullptr) return;
  m->scheduler.MarkCancelled(it->first);
  ++stats_.cancelled;
}

int32_t ServingCore::ApplicationIdLocked(absl::string_view application) {
  const ApplicationRegistry::Interned tag = applications_.Intern(application);
  if (tag.added) {
    const std::string_view name = applications_.NameView(tag.id);
    models_.ForEach([&](ServedModel* m) { m->scheduler.NameApplication(tag.id, name); });
  }
  return tag.id;
}

void ServingCore::RejectLocked(QueryHandle* handle, absl::string_view model,
                               const absl::Status& status, QueryOutcome outcome, Nanos now,
                               Effects* e) {
  ServedModel* m = models_.Find(model);
  QueryDone done;
  done.outcome = outcome;
  done.now = now;
  e->done.emplace_back(m != nullptr ? m->name : unknown_model_, done);
  QueryAnswer a;
  a.status = status;
  e->answers.emplace_back(handle, std::move(a));
}

void ServingCore::AnswerLocked(QueryId id, QueryAnswer answer, QueryOutcome outcome, Nanos now,
                               Effects* e) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  const QueryAnswer& a = e->answers.emplace_back(it->second.handle, std::move(answer)).second;
  ReportAnsweredLocked(it, models_.Find(it->second.model), a, outcome, now, e);
}

void ServingCore::ReportAnsweredLocked(PendingQueries::iterator it, const ServedModel* m,
                                       const QueryAnswer& answer, QueryOutcome outcome, Nanos now,
                                       Effects* e) {
  const PendingQuery& p = it->second;
  if (outcome == QueryOutcome::kOk && now > p.query.deadline) outcome = QueryOutcome::kLate;
  // The report is filled where Apply reads it, not copied there.
  QueryDone& done =
      e->done.emplace_back(m != nullptr ? m->name : unknown_model_, QueryDone()).second;
  done.id = it->first;
  done.outcome = outcome;
  done.now = now;
  done.latency = now - p.query.arrival;
  if (answer.status.ok()) {
    done.accuracy = answer.accuracy;
    done.subnet_id = answer.subnet_id;
  }
  if (const auto& tag = applications_.Name(p.query.application); tag != nullptr && !tag->empty()) {
    done.application = tag;
  }
  pending_.erase(it);
  ++stats_.answered;
  // Whether the model is drained is seen once this locked section is over
  // (Apply): a dispatch may be between taking a batch and sending it.
  if ((m != nullptr && m->closed) || (pending_.empty() && !on_idle_.empty())) {
    e->rare_effects().drain_check = true;
  }
}

void ServingCore::FailLocked(QueryId id, const absl::Status& status, QueryOutcome outcome,
                             Nanos now, Effects* e) {
  QueryAnswer a;
  a.status = status;
  AnswerLocked(id, std::move(a), outcome, now, e);
}

void ServingCore::SweepLocked(ServedModel* m, Nanos now, Effects* e) {
  sweep_expired_.clear();
  sweep_cancelled_.clear();
  m->scheduler.Sweep(now, &sweep_expired_, &sweep_cancelled_);
  for (QueryId id : sweep_expired_) {
    FailLocked(id, absl::DeadlineExceededError("deadline passed while queued"),
               QueryOutcome::kDeadlineExceeded, now, e);
  }
  for (QueryId id : sweep_cancelled_) {
    FailLocked(id, absl::DeadlineExceededError("cancelled by the client"),
               QueryOutcome::kDeadlineExceeded, now, e);
  }
  stats_.swept += static_cast<int64_t>(sweep_expired_.size() + sweep_cancelled_.size());
}

// ---------------------------------------------------------------- scheduling

void ServingCore::ScheduleLocked(ServedModel* m, Nanos now, Effects* e, int32_t except) {
  ModelScheduler& s = m->scheduler;
  // Free workers that serve the model, lowest ids first: one, then kOffer at
  // a time (most passes end in a wait or a single batch); a pass that fills
  // every offered slot with the queue still non-empty is offered the next.
  constexpr size_t kOffer = 8;
  size_t offer = 1;
  const std::vector<int32_t>& ws = s.workers();
  const bool serves_all = static_cast<int32_t>(ws.size()) == workers_.alive();
  FreeSlotIndex::Walk free = workers_.free_slots().Free();
  // Workers of one speed are offered together (the policy sees one
  // SchedulingContext::worker_speed); one of another speed waits in `carry`
  // for the next offer.
  int32_t carry = -1;
  while (!s.empty()) {
    slots_.clear();
    double speed = 1.0;
    while (slots_.size() < offer) {
      int32_t w = carry;
      carry = -1;
      if (w < 0) {
        w = free.Next();
        if (w < 0) break;
        if (w == except) continue;
        if (!serves_all && !std::binary_search(ws.begin(), ws.end(), w)) continue;
      }
      const int32_t n = workers_.FreeSlots(w);
      if (n <= 0) continue;
      const double ws_speed = SpeedLocked(w);
      if (slots_.empty()) {
        speed = ws_speed;
      } else if (ws_speed != speed) {
        carry = w;
        break;
      }
      slots_.push_back({w, n});
    }
    if (slots_.empty()) break;
    const size_t offered = slots_.size();
    ScheduleOfferLocked(m, now, e, speed);
    if (speed != 1.0) {
      // A straggler does not make the model wait: a wake-up it asked for
      // (planned on its slower clock) would keep fleet-speed workers that
      // free up meanwhile from being asked until then.
      s.clear_wake();
      // One that declined (nothing it can serve in time) does not end the
      // pass: the next workers may.
      if (!slots_.empty()) continue;
    }
    // A slot left: the policy is done (unless a worker of another speed waits).
    if (!slots_.empty() || (offered < offer && carry < 0)) break;
    offer = kOffer;
  }
  wakes_.List(m, s.wake_at());
  if (s.wake_at() > 0 && s.wake_at() < next_tick_) {
    next_tick_ = s.wake_at();
    e->wake = e->wake > 0 ? std::min(e->wake, next_tick_) : next_tick_;
  }
}

double ServingCore::SpeedLocked(int32_t worker) const {
  if (!options_.per_worker_speed) return 1.0;
  const WorkerRecord* w = workers_.Get(worker);
  return w != nullptr ? w->relative_speed : 1.0;
}

void ServingCore::ScheduleOfferLocked(ServedModel* m, Nanos now, Effects* e, double worker_speed) {
  ModelScheduler& s = m->scheduler;
  // Nothing below schedules again (answers and dispatches only), so the
  // scratch is not overwritten while it is read.
  ScheduleResult& r = schedule_scratch_;
  s.Schedule(now, &slots_, static_cast<int32_t>(s.workers().size()), worker_speed, &r);
  for (QueryId id : r.dropped) {
    FailLocked(id, absl::DeadlineExceededError("dropped: deadline cannot be met"),
               QueryOutcome::kDeadlineExceeded, now, e);
  }
  for (QueryId id : r.shed) {
    FailLocked(id,
               absl::DeadlineExceededError(
                   "shed: overloaded, and too little time left for an efficient batch"),
               QueryOutcome::kDeadlineExceeded, now, e);
  }
  stats_.shed += static_cast<int64_t>(r.shed.size());
  for (QueryId id : r.cancelled) {
    FailLocked(id, absl::DeadlineExceededError("cancelled by the client"),
               QueryOutcome::kDeadlineExceeded, now, e);
  }
  for (TakenBatch& b : r.batches) DispatchLocked(m, std::move(b), now, e);
  if (!r.invalid.empty()) {
    // A policy bug. Answer the queue instead of guessing a batch, so that
    // every query still gets exactly one answer.
    e->Log(LogLevel::kError, __FILE__, __LINE__, absl::StrCat("model ", *m->name, ": ", r.invalid));
    for (QueryId id : s.TakeAll()) {
      FailLocked(id, absl::InternalError(r.invalid), QueryOutcome::kError, now, e);
    }
  }
}

void ServingCore::ScheduleWorkerLocked(int32_t worker, Nanos now, Effects* e) {
  // The most urgent model first, by its policy's Urgency (EDF policies: the
  // head's deadline; Symphony: its candidate's latest start). Only models
  // with queued queries are visited: O(active log active), not O(models).
  std::vector<std::pair<Nanos, ServedModel*>>& order = order_scratch_;
  order.clear();
  for (size_t i = 0; i < active_.size();) {
    ServedModel* m = active_[i];
    if (m->scheduler.empty()) {
      active_.Remove(m);  // moves the last one into slot i
      continue;
    }
    ++i;
    // A model waiting until its wake-up (a deferred batch) is asked then,
    // or on its next arrival; a free worker does not ask it sooner.
    const Nanos wake = m->scheduler.wake_at();
    if (wake > now) continue;
    const auto& ws = m->scheduler.workers();
    if (!std::binary_search(ws.begin(), ws.end(), worker)) continue;
    order.emplace_back(m->scheduler.urgency(now), m);
  }
  if (order.size() > 1) {
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second->id < b.second->id);
    });
  }
  // ScheduleLocked never re-enters here, so the scratch stays ours. The pass
  // is this worker's: it ends once the worker is taken.
  for (const auto& [deadline, m] : order) {
    if (workers_.FreeSlots(worker) <= 0) break;
    ScheduleLocked(m, now, e);
  }
}

void ServingCore::DispatchLocked(ServedModel* m, TakenBatch taken, Nanos now, Effects* e) {
  WorkerRecord* w = workers_.GetAlive(taken.worker);
  if (w == nullptr) {  // cannot happen: slots hold live workers only
    for (const Query& q : taken.queries) RequeueLocked(q.id, now, e);
    return;
  }
  BuiltBatch built = BuildBatch(*m, taken, ++next_batch_id_, now, options_.batch_grace, &pending_);
  BatchPlan& plan = built.plan;
  if (plan.queries.empty()) return;
  if (!residency_.empty() && residency_.Tracks(taken.worker) &&
      residency_.StateOf(taken.worker, m->id) != Residency::State::kResident) {
    // Cannot happen: a model's scheduler offers only the workers holding it.
    e->Log(LogLevel::kError, __FILE__, __LINE__,
           absl::StrCat("model ", *m->name, " not resident on worker ", *w->name));
    for (QueryId id : plan.queries) {
      pending_.find(id)->second.on_worker = false;
      RequeueLocked(id, now, e);
    }
    return;
  }
  workers_.AddInflight(taken.worker, std::move(built.inflight));
  ++stats_.batches;
  e->sends.emplace_back(w->channel, std::move(plan));
}

void ServingCore::RequeueLocked(QueryId id, Nanos now, Effects* e) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  PendingQuery& p = it->second;
  ServedModel* m = models_.Find(p.model);
  if (m == nullptr) {
    FailLocked(id, absl::UnavailableError("model unregistered"), QueryOutcome::kUnavailable, now, e);
    return;
  }
  const Nanos load_ready =
      m->scheduler.workers().empty() ? residency_.PendingReady(m->id) : Nanos{-1};
  switch (m->scheduler.TryRequeue(p.query, now, load_ready)) {
    case ModelScheduler::Requeue::kQueued:
      active_.Add(m);
      p.on_worker = false;
      ++stats_.requeued;
      return;
    case ModelScheduler::Requeue::kNoWorker:
      FailLocked(id, absl::UnavailableError(absl::StrCat("no live worker serves model ", *m->name)),
                 QueryOutcome::kUnavailable, now, e);
      return;
    case ModelScheduler::Requeue::kTooLate:
      FailLocked(id,
                 absl::DeadlineExceededError("its batch did not complete and too little time is "
                                             "left to retry"),
                 QueryOutcome::kDeadlineExceeded, now, e);
      return;
  }
}

// ---------------------------------------------------------------- workers

absl::StatusOr<int32_t> ServingCore::RegisterWorker(const WorkerRegistration& worker,
                                                    std::shared_ptr<WorkerChannel> channel) {
  Effects e;
  int32_t id;
  std::shared_ptr<const std::string> name;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("shutting down");
    const Nanos now = clock_->Now();
    id = workers_.Add(worker.name, worker.emulated, worker.models, channel, now);
    WorkerRecord& w = *workers_.Get(id);
    const bool placed = worker.memory_bytes > 0;
    if (placed) residency_.AddWorker(id, worker.memory_bytes);
    // No batch until the worker was told, below: none overtakes the
    // registration. Queries for its models are accepted meanwhile.
    workers_.SetRegistering(id, true);
    int32_t served = 0;
    for (const std::string& model : worker.models) {
      if (ServedModel* m = models_.Find(model)) {
        if (placed) {  // loaded when demand asks (ids grow: appended in order, unless recycled)
          auto& on = m->loadable_on;
          on.insert(std::upper_bound(on.begin(), on.end(), id), id);
          continue;
        }
        m->scheduler.AddWorker(id);
        ++served;
      }
    }
    name = w.name;
    if (options_.log_lifecycle) {
      e.Log(LogLevel::kInfo, __FILE__, __LINE__,
            absl::StrCat("worker ", *w.name, " registered", worker.emulated ? " (emulated)" : "",
                         ", serving ", served, " of ", worker.models.size(), " declared models"));
    }
    NoteWorkersAliveLocked(&e);
    // Its silence is checked on time however idle the core is.
    if (SilentLimit() > 0) HousekeepByLocked(now + SilentLimit() + 1, &e);
  }
  // Outside the lock: in the router, a write on the worker's stream.
  channel->OnRegistered(*name, options_.missed_heartbeats > 0 ? options_.heartbeat_interval : 0);
  {
    absl::MutexLock lock(&mu_);
    // Unless declared dead meanwhile (Shutdown, say): the owner does not
    // know the id yet, so it cannot have been released and reused.
    if (workers_.GetAlive(id) != nullptr) {
      workers_.SetRegistering(id, false);
      RetryAwaitingRoomLocked(clock_->Now(), &e);  // room on a new worker
      ScheduleWorkerLocked(id, clock_->Now(), &e);
    }
  }
  Apply(&e);
  return id;
}

void ServingCore::OnHeartbeat(int32_t worker) {
  absl::MutexLock lock(&mu_);
  workers_.Heard(worker, clock_->Now());
}

void ServingCore::OnBatchResult(int32_t worker, BatchOutcome outcome) {
  Effects e;
  {
    absl::ReleasableMutexLock lock(&mu_);
    const Nanos now = clock_->Now();
    WorkerRecord* w = workers_.GetAlive(worker);
    if (w == nullptr) return;  // a dead worker's late result: its queries were handled
    workers_.Heard(worker, now);
    std::optional<InflightBatch> b = workers_.TakeInflight(worker, outcome.batch_id);
    if (!b) {  // a misbehaving worker's, at will: logged after the lock
      e.Log(LogLevel::kWarning, __FILE__, __LINE__,
            absl::StrCat("worker ", *w->name, " answered unknown batch ", outcome.batch_id));
      lock.Release();
      Apply(&e);
      return;
    }
    workers_.AddBusy(worker, outcome.exec);
    ServedModel* m = models_.Find(b->model);
    const bool refused = outcome.status.code() == absl::StatusCode::kDeadlineExceeded;
    // A refused batch did not run: its round trip measured the worker's
    // delay, not the dispatch overhead, so the policy is not told.
    // Kept past the policy's telemetry: the answers carry each query's exit.
    CompletionTelemetry t;
    if (m != nullptr && !refused) {
      // Per-worker speed (docs/faults.md): the policy's shared estimates get
      // the exec time this batch would have taken on a fleet-speed worker.
      double speed = 1.0;
      if (options_.per_worker_speed && outcome.status.ok()) {
        workers_.RecordSpeed(worker, outcome.exec,
                            ProfiledLatency(m->profile, b->subnet_index, b->batch_size));
        speed = w->relative_speed;
      }
      t = MakeCompletionTelemetry(worker, *b, &outcome, speed, now, pending_);
      m->scheduler.OnCompletion(t);
    }
    if (m != nullptr && !b->queries.empty()) {
      if (outcome.status.ok()) {
        const size_t n = b->queries.size();
        // One answer and one report per query: grow the effects once.
        e.answers.reserve(e.answers.size() + n);
        e.done.reserve(e.done.size() + n);
        ResultMatcher& match = result_matcher_;
        match.Start(b->queries);
        TelemetryLookup telemetry(t.queries);  // dynamic models: each query's exit
        for (size_t i = 0; i < outcome.outputs.size(); ++i) {
          const QueryId id = outcome.outputs[i].first;
          if (match.Match(i, id) < 0) continue;
          auto pit = pending_.find(id);
          if (pit == pending_.end()) continue;
          // Filled where Apply delivers it from, not moved there.
          QueryAnswer& a = e.answers
                               .emplace_back(std::piecewise_construct,
                                             std::forward_as_tuple(pit->second.handle),
                                             std::forward_as_tuple())
                               .second;
          a.output = std::move(outcome.outputs[i].second);
          const bool dynamic = m->profile.is_dynamic;
          const QueryTelemetry* q = dynamic ? telemetry.Find(id) : nullptr;
          DescribeServed(m->profile, b->subnet_index, b->exit_threshold_index,
                         dynamic ? applications_.NameView(pit->second.query.application)
                                 : std::string_view(),
                         q != nullptr ? q->exit : -1, &a);
          a.worker = w->name;
          a.batch_size = static_cast<int32_t>(n);
          a.queued = pit->second.dispatched_at - pit->second.query.arrival;
          a.exec = outcome.exec;
          ReportAnsweredLocked(pit, m, a, QueryOutcome::kOk, now, &e);
        }
        if (match.foreign() > 0 || match.duplicate() > 0 || outcome.outputs.size() != n) {
          e.Log(LogLevel::kWarning, __FILE__, __LINE__,
                absl::StrCat("worker ", *w->name, " batch ", b->id, ": ", outcome.outputs.size(),
                             " results for ", n, " queries (", match.foreign(), " foreign, ",
                             match.duplicate(), " duplicate ids ignored)"));
        }
        for (size_t k = 0; k < n; ++k) {
          if (match.answered(k)) continue;
          FailLocked(b->queries[k],
                     absl::InternalError(absl::StrCat("worker ", *w->name,
                                                      " returned no result for this query (",
                                                      outcome.outputs.size(), " results for ", n,
                                                      " queries)")),
                     QueryOutcome::kError, now, &e);
        }
      } else if (refused) {
        // The worker could not start within the window: try again elsewhere
        // first (this worker may take them below if no other one did).
        ++stats_.refused;
        e.rare_effects().refused.emplace_back(m->name, w->name);
        for (QueryId id : b->queries) RequeueLocked(id, now, &e);
        ScheduleLocked(m, now, &e, /*except=*/worker);
      } else {
        const absl::Status st(outcome.status.code(),
                              absl::StrCat("worker ", *w->name, ": ", outcome.status.message()));
        for (QueryId id : b->queries) FailLocked(id, st, QueryOutcome::kError, now, &e);
      }
    }
    RetryAwaitingRoomLocked(now, &e);  // the batch's model may be evicted now
    ScheduleWorkerLocked(worker, now, &e);
  }
  Apply(&e);
}

void ServingCore::OnWorkerGone(int32_t worker, const absl::Status& why) {
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    WorkerGoneLocked(worker, why, clock_->Now(), &e);
    workers_.Release(worker);
  }
  Apply(&e);
}

void ServingCore::WorkerGoneLocked(int32_t worker, const absl::Status& why, Nanos now,
                                   Effects* e) {
  WorkerRecord* w = workers_.GetAlive(worker);
  if (w == nullptr) return;
  const std::shared_ptr<WorkerChannel> channel = w->channel;
  if (options_.log_lifecycle) {
    e->Log(LogLevel::kWarning, __FILE__, __LINE__,
           absl::StrCat("worker ", *w->name, " gone (", why.message(), "); ", w->inflight.size(),
                        " batches in flight"));
  }
  std::vector<InflightBatch> lost = workers_.MarkDead(worker);
  e->rare_effects().closes.emplace_back(
      channel, absl::UnavailableError(absl::StrCat("worker declared dead: ", why.message())));
  NoteWorkersAliveLocked(e);
  std::vector<ServedModel*> affected;
  // Placement: what it held or was loading is gone with it.
  const std::vector<ModelId> held = residency_.RemoveWorker(worker);
  for (ServedModel* m : models_.All()) {
    auto& on = m->loadable_on;
    if (auto it = std::lower_bound(on.begin(), on.end(), worker); it != on.end() && *it == worker) {
      on.erase(it);
    }
    const auto& ws = m->scheduler.workers();
    const bool serves = std::binary_search(ws.begin(), ws.end(), worker);
    if (serves) m->scheduler.RemoveWorker(worker);
    if (serves || std::binary_search(held.begin(), held.end(), m->id)) affected.push_back(m);
  }
  if (!residency_.empty()) {
    // A model left on no worker, with queries waiting or lost with the
    // worker, is loaded elsewhere before they are re-queued (they wait for
    // that load if their deadlines allow).
    for (ServedModel* m : affected) {
      if (!m->scheduler.workers().empty() || m->loadable_on.empty()) continue;
      bool wanted = !m->scheduler.empty();
      for (const InflightBatch& b : lost) wanted = wanted || (b.model == m->id && !b.queries.empty());
      if (wanted) EnsureLoadLocked(m, now, e);
    }
  }
  for (const InflightBatch& b : lost) {
    for (QueryId id : b.queries) RequeueLocked(id, now, e);
  }
  for (ServedModel* m : affected) {
    if (m->scheduler.workers().empty() && residency_.PendingReady(m->id) >= 0) continue;
    if (m->scheduler.workers().empty()) {
      cold_since_.erase(m->id);
      const absl::Status none =
          absl::UnavailableError(absl::StrCat("no live worker serves model ", *m->name));
      for (QueryId id : m->scheduler.TakeAll()) {
        FailLocked(id, none, QueryOutcome::kUnavailable, now, e);
      }
    } else {
      ScheduleLocked(m, now, e);
    }
  }
}

// ---------------------------------------------------------------- timer


Nanos ServingCore::Tick() {
  Effects e;
  Nanos next;
  {
    absl::MutexLock lock(&mu_);
    const Nanos now = clock_->Now();
    next = now + options_.tick_interval;
    if (shut_down_) return next;
    const bool housekeeping = now >= next_housekeeping_;
    if (housekeeping) {
      last_housekeeping_ = now;
      next_housekeeping_ = now + options_.tick_interval;  // refined below
    }
    if (housekeeping && SilentLimit() > 0) {
      for (int32_t w : workers_.Silent(now, SilentLimit())) {
        WorkerGoneLocked(w, absl::UnavailableError("missed heartbeats"), now, &e);
      }
    }
    for (int32_t w : housekeeping ? workers_.Overdue(now) : std::vector<int32_t>()) {
      WorkerGoneLocked(w,
                       absl::UnavailableError("a batch is overdue (no result by its latest query "
                                              "deadline plus the grace): worker hung"),
                       now, &e);
    }
    if (housekeeping && observer_ != nullptr) {
      for (const WorkerPool::WorkerGauges& g : workers_.TakeGauges(now, kBusyWindow)) {
        e.rare_effects().busy.emplace_back(g.name, g.busy_fraction);
        e.rare_effects().slowdown.emplace_back(g.name, g.relative_speed);
      }
    }
    // Sweeps (once per interval) concern queued models only.
    if (housekeeping) {
      for (size_t i = 0; i < active_.size();) {
        ServedModel* m = active_[i];
        SweepLocked(m, now, &e);
        if (m->scheduler.empty()) {
          active_.Remove(m);  // moves the last one into slot i
          continue;
        }
        ++i;
      }
    }
    // Due wake-ups, from the heap: O(due log listed), not O(models). They
    // are scheduled most urgent first, as for a free worker.
    const auto current = [](const ServedModel* m) {
      return m->scheduler.wake_at() == m->wake_listed;
    };
    std::vector<std::pair<Nanos, ServedModel*>>& due = order_scratch_;
    due.clear();
    std::vector<ServedModel*>& woken = active_scratch_;  // refilled below
    woken.clear();
    wakes_.PopDue(now, current, &woken);
    for (ServedModel* m : woken) {
      if (m->scheduler.empty()) {
        m->scheduler.clear_wake();
        continue;
      }
      due.emplace_back(m->scheduler.urgency(now), m);
    }
    if (due.size() > 1) {
      std::sort(due.begin(), due.end(), [](const auto& a, const auto& b) {
        return a.first < b.first || (a.first == b.first && a.second->id < b.second->id);
      });
    }
    next_tick_ = next;  // lets ScheduleLocked ask for an earlier tick
    active_scratch_.clear();
    for (const auto& [urgency, m] : due) active_scratch_.push_back(m);
    for (ServedModel* m : active_scratch_) {
      m->scheduler.clear_wake();
      ScheduleLocked(m, now, &e);
    }
    // Before naming the next tick.
    wakes_.DropStale(current);
    if (housekeeping && pending_.empty()) {
      // Idle: nothing to sweep, nothing to answer. The next check is due
      // when a worker's silence or a batch's deadline could run out, or
      // after the idle interval (gauges); a query brings the interval back.
      next_housekeeping_ =
          std::max(now + options_.tick_interval,
                   std::min(now + std::max(options_.idle_tick_interval, options_.tick_interval),
                            workers_.NextDeadline(SilentLimit())));
    }
    next = next_housekeeping_;
    if (!wakes_.empty()) next = std::min(next, std::max(wakes_.top()->wake_listed, now + 1));
    next = std::max(next, now + 1);
    if (housekeeping && observer_ != nullptr) {
      models_.ForEach([&](ServedModel* m) {
        e.rare_effects().depths.emplace_back(m->name, static_cast<int64_t>(m->scheduler.queued()));
      });
    }
    next_tick_ = next;
    e.wake = 0;  // the owner learns `next` from the return value
  }
  Apply(&e);
  return next;
}

// ---------------------------------------------------------------- shutdown

void ServingCore::Drain(std::function<void()> on_idle) {
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    if (on_idle == nullptr) return;
    on_idle_.push_back(std::move(on_idle));
    e.rare_effects().drain_check = true;  // idle already?
  }
  Apply(&e);
}

void ServingCore::Shutdown() {
  Effects e;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    const Nanos now = clock_->Now();
    for (QueryId id : pending_.Ids()) {
      FailLocked(id, absl::UnavailableError("shutting down"), QueryOutcome::kUnavailable, now, &e);
    }
    for (ServedModel* m : models_.All()) m->scheduler.TakeAll();
    while (!active_.empty()) active_.Remove(active_.back());
    for (WorkerRecord& w : workers_.records()) {
      if (!w.alive) continue;
      const std::shared_ptr<WorkerChannel> channel = w.channel;
      workers_.MarkDead(w.id);
      e.rare_effects().closes.emplace_back(channel, absl::UnavailableError("shutting down"));
    }
    NoteWorkersAliveLocked(&e);
    if (!on_drained_.empty() || !on_idle_.empty()) {
      e.rare_effects().drain_check = true;  // nothing will be served
    }
  }
  Apply(&e);
}

ServingStats ServingCore::Stats() const {
  absl::MutexLock lock(&mu_);
  ServingStats s = stats_;
  s.pending = static_cast<int64_t>(pending_.size());
  s.workers_alive = workers_.alive();
  s.worker_records = static_cast<int32_t>(workers_.records().size());
  s.models = static_cast<int32_t>(models_.size());
  return s;  // loads, unloads, load_too_late: counted in stats_
}

}  // namespace superserve
