#include "bench/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/empirical_distribution.h"
#include "serving/serving_core.h"

namespace superserve {

double SimulationResult::throughput_qps() const {
  Nanos span = last_event - first_arrival;
  return span > 0 ? static_cast<double>(met + late) / ToSeconds(span) : 0;
}

double SimulationResult::idle_fraction() const {
  const Nanos span = last_event - first_arrival;
  if (span <= 0 || worker_busy.empty()) return 0;
  Nanos busy = 0;
  for (Nanos b : worker_busy) busy += b;
  return std::max(0.0, 1.0 - static_cast<double>(busy) /
                                 (static_cast<double>(span) * static_cast<double>(worker_busy.size())));
}

int32_t SimulationResult::workers_used() const {
  return static_cast<int32_t>(
      std::count_if(worker_busy.begin(), worker_busy.end(), [](Nanos b) { return b > 0; }));
}

namespace {

constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// Earliest first.
using WakeHeap = std::priority_queue<Nanos, std::vector<Nanos>, std::greater<Nanos>>;

// The caller keeps its policy (tests inspect it afterwards); the serving core
// owns what it schedules with, so it gets this forwarding shell. It also
// notes every wake-up the policy asks for, so that the simulation knows
// which of the core's periodic ticks can matter (Simulation::NextTick).
class BorrowedPolicy final : public Policy {
 public:
  BorrowedPolicy(Policy* policy, WakeHeap* wakes) : policy_(policy), wakes_(wakes) {}
  std::string_view name() const override { return policy_->name(); }
  Decision Decide(const SchedulingContext& ctx) override {
    Decision d = policy_->Decide(ctx);
    // A wake-up at or before now is due at the core's next tick.
    if (d.kind == Decision::Kind::kWakeAt) wakes_->push(std::max(d.wake_at, ctx.now + 1));
    return d;
  }
  Nanos Urgency(const EdfQueue& queue, Nanos now) const override {
    return policy_->Urgency(queue, now);
  }
  void OnArrival(const Query& q, Nanos now) override { policy_->OnArrival(q, now); }
  void OnCompletion(const CompletionTelemetry& t) override { policy_->OnCompletion(t); }
  void OnRequeue(const Query& q, Nanos now) override { policy_->OnRequeue(q, now); }
  void OnApplicationNamed(int32_t id, std::string_view name) override {
    policy_->OnApplicationNamed(id, name);
  }
  Nanos EstimatedLatency(int32_t subnet_index, int32_t batch_size) const override {
    return policy_->EstimatedLatency(subnet_index, batch_size);
  }
  bool MayRun(int32_t subnet_index) const override { return policy_->MayRun(subnet_index); }

 private:
  Policy* const policy_;
  WakeHeap* const wakes_;
};

// Simulated queries need no answer beyond what the observer counts.
class DiscardingHandle final : public QueryHandle {
 public:
  void Deliver(QueryAnswer) override {}
};

// A dynamic model's query carries its own execution time to the emulated
// worker (the simulator's only payload).
struct DynamicQueryInput final : QueryPayload {
  explicit DynamicQueryInput(double l, std::vector<double> at = {})
      : exec_us(l), at_threshold(std::move(at)) {}
  double exec_us;  // at the model's default threshold
  // Load-adaptive exits: the time at each of the profile's thresholds (empty:
  // exec_us at every one).
  std::vector<double> at_threshold;
};

struct Completion {
  Nanos time;
  int32_t worker_id;  // the core's id
  uint64_t batch_id;
  Nanos exec;
  std::vector<QueryId> queries;
  std::vector<QueryTelemetry> query_times;
  bool refused = false;  // its action window closed before it could start
  bool operator>(const Completion& o) const {
    return time > o.time || (time == o.time && batch_id > o.batch_id);
  }
};

class Simulation;

// An emulated worker: runs each batch for its (scaled, noisy) profiled
// latency plus the dispatch overhead, on the simulated clock.
class EmulatedWorker final : public WorkerChannel {
 public:
  EmulatedWorker(Simulation* sim, int32_t id) : sim_(sim), id_(id) {}
  void OnRegistered(const std::string&, Nanos) override {}
  void Send(BatchPlan batch) override;
  void Close(const absl::Status&) override {}
  void Load(const std::string& model, Nanos expected) override;
  void Unload(const std::string&) override;  // memory is the core's to count

 private:
  Simulation* const sim_;
  const int32_t id_;
};

// Trace replay around the serving core: arrivals, emulated workers, worker
// failures and the core's ticks are events on one simulated clock; the core
// makes every scheduling decision, exactly as in the router. The simulation
// observes the core to count met, late and dropped queries.
class Simulation final : public ServingObserver {
 public:
  Simulation(absl::Span<const SimulatedModel> models, absl::Span<const Nanos> arrivals,
             absl::Span<const int32_t> model_of, const SimulatorOptions& options)
      : models_(models),
        arrivals_(arrivals),
        model_of_(model_of),
        options_(options),
        rng_(options.seed) {
    double cv = std::max(0.0, options.noise_cv);
    sigma_ = std::sqrt(std::log(1 + cv * cv));
    failures_ = options.worker_failures;
    std::sort(failures_.begin(), failures_.end());
    result_.policy = std::string(models.front().policy->name());
    result_.model_queries.assign(models.size(), 0);
    result_.model_met.assign(models.size(), 0);
    for (size_t i = 0; i < models.size(); ++i) model_index_[models[i].profile->model] = i;
    for (size_t i = 0; i < arrivals.size(); ++i) {
      if (arrivals[i] >= options.measure_from) ++result_.model_queries[model_of.empty() ? 0 : model_of[i]];
    }
    result_.queries = static_cast<int64_t>(arrivals.size());
    if (!arrivals.empty()) result_.first_arrival = arrivals.front();
    latencies_.reserve(arrivals.size());
  }

  absl::StatusOr<SimulationResult> Run() {
    if (auto s = PrepareDynamic(); !s.ok()) return s;
    ServingOptions serving = options_.serving;
    serving.missed_heartbeats = 0;  // emulated workers do not heartbeat
    serving.max_queue = std::numeric_limits<size_t>::max();
    serving.log_lifecycle = false;  // thousands of runs in a reproduction
    ServingCore core(serving, &clock_, this, [this](Nanos t) {
      tick_at_ = std::min(tick_at_, t);
      wakes_.push(t);
    });
    core_ = &core;
    WorkerRegistration reg;
    reg.name = "sim";
    reg.emulated = true;
    reg.memory_bytes = options_.worker_memory_bytes;
    for (const SimulatedModel& m : models_) {
      if (auto s = core.AddModel(*m.profile, std::make_unique<BorrowedPolicy>(m.policy, &wakes_));
          !s.ok()) {
        return s;
      }
      reg.models.push_back(m.profile->model);
    }
    result_.worker_busy.assign(options_.workers, 0);
    for (int32_t w = 0; w < options_.workers; ++w) {
      auto id = core.RegisterWorker(reg, std::make_shared<EmulatedWorker>(this, w));
      if (!id.ok()) return id.status();
      live_.push_back(*id);
      live_core_ids_.push_back(*id);
    }
    size_t next_arrival = 0, next_failure = 0;
    tick_at_ = clock_.Now() + serving.tick_interval;  // the core's first tick
    while (true) {
      const Nanos t_arrival = next_arrival < arrivals_.size() ? arrivals_[next_arrival] : kNever;
      const Nanos t_done = completions_.empty() ? kNever : completions_.top().time;
      const Nanos t_fail = next_failure < failures_.size() ? failures_[next_failure] : kNever;
      const Nanos t_load = loads_.empty() ? kNever : loads_.top().time;
      // Ticks matter only while queries are outstanding (sweeps, wake-ups),
      // and idle ones are skipped (NextTick).
      const Nanos t_tick = outstanding_ > 0 ? NextTick(serving.tick_interval) : kNever;
      const Nanos t = std::min({t_arrival, t_done, t_fail, t_tick, t_load});
      if (t == kNever) break;
      // The ticks NextTick skipped before t did nothing, but the last of them
      // sets the core's next tick and housekeeping times (which the wake-ups
      // asked for at t are compared with): it runs, as it would have.
      if (skipping_ && tick_at_ < t) {
        const Nanos last =
            tick_at_ + (t - 1 - tick_at_) / serving.tick_interval * serving.tick_interval;
        if (auto s = clock_.AdvanceTo(last); !s.ok()) return s;
        RunTick(core);
      }
      if (auto s = clock_.AdvanceTo(std::max(t, clock_.Now())); !s.ok()) return s;
      if (t_load == t) {
        const LoadDone l = loads_.top();
        loads_.pop();
        core.OnModelLoaded(l.worker_id, models_[l.model].profile->model, absl::OkStatus());
      } else if (t_done == t) {
        // Moved out, not copied (with its vectors): pop() orders by time and
        // batch id only, which a move leaves as they were.
        Completion c = std::move(const_cast<Completion&>(completions_.top()));
        completions_.pop();
        BatchOutcome out;
        out.batch_id = c.batch_id;
        out.exec = c.exec;
        out.query_times = std::move(c.query_times);
        if (c.refused) {
          out.status = absl::DeadlineExceededError("action window closed");
          core.OnBatchResult(c.worker_id, std::move(out));
          continue;
        }
        out.outputs.reserve(c.queries.size());
        for (QueryId id : c.queries) out.outputs.emplace_back(id, nullptr);
        core.OnBatchResult(c.worker_id, std::move(out));
      } else if (t_fail == t) {
        ++next_failure;
        // One more worker fails: the highest live id.
        if (!live_.empty()) {
          const int32_t id = live_.back();
          live_.pop_back();
          core.OnWorkerGone(id, absl::UnavailableError("simulated failure"));
        }
      } else if (t_arrival == t) {
        const SimulatedModel& m = models_[model_of_.empty() ? 0 : model_of_[next_arrival]];
        QueryRequest req;
        req.model = m.profile->model;
        req.deadline = t + (m.slo > 0 ? m.slo : options_.slo);
        if (m.profile->is_dynamic) {
          req.application = m.profile->dynamic.applications[AppOf(next_arrival)].application;
          std::vector<double> at;
          for (const auto& t : exec_at_) at.push_back(t[next_arrival]);
          req.payload = std::make_shared<DynamicQueryInput>(exec_us_[next_arrival], std::move(at));
        }
        ++outstanding_;
        ++next_arrival;
        Bin(t).arrivals++;
        const Nanos deadline = req.deadline;
        handle_.query_id = 0;  // the core sets it when it accepts the query
        core.Submit(&handle_, req);
        if (handle_.query_id != 0) deadlines_.push({deadline, handle_.query_id});
      } else {
        RunTick(core);
      }
    }
    draining_ = true;  // the workers' shutdown is not a failure to report
    result_.load_too_late = core.Stats().load_too_late;
    core.Shutdown();   // answers anything left (counted as dropped)
    core_ = nullptr;
    result_.last_event = clock_.Now();
    if (timeline_overflow_) {
      return absl::InvalidArgumentError(
          absl::StrCat("timeline: events at ", ToSeconds(timeline_overflow_at_),
                       " s need more than ", kMaxTimelineBins, " bins of ",
                       ToSeconds(options_.timeline_bin), " s; use wider bins (--timeline_bin_s)"));
    }
    if (!latencies_.empty()) {
      size_t k = static_cast<size_t>(0.99 * static_cast<double>(latencies_.size() - 1));
      std::nth_element(latencies_.begin(), latencies_.begin() + k, latencies_.end());
      result_.p99_latency = latencies_[k];
    }
    return std::move(result_);
  }

  // Per-query execution times of a dynamic model: replayed or drawn.
  absl::Status PrepareDynamic() {
    // A dynamic model is simulated on its own (the per-query times and
    // application indices are per arrival of that one model).
    const ModelProfile& profile_ = *models_[0].profile;
    if (!profile_.is_dynamic) return absl::OkStatus();
    if (models_.size() != 1) {
      return absl::InvalidArgumentError("simulator: a dynamic model is simulated alone");
    }
    const size_t n = arrivals_.size();
    const int32_t apps = static_cast<int32_t>(profile_.dynamic.applications.size());
    if (!options_.applications.empty() && options_.applications.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "simulator: ", options_.applications.size(), " applications for ", n, " arrivals"));
    }
    for (int32_t a : options_.applications) {
      if (a < 0 || a >= apps) {
        return absl::InvalidArgumentError(
            absl::StrCat("simulator: application index ", a, " outside the profile's ", apps));
      }
    }
    if (!options_.exec_us.empty()) {
      if (options_.exec_us.size() != n) {
        return absl::InvalidArgumentError(absl::StrCat(
            "simulator: ", options_.exec_us.size(), " execution times for ", n, " arrivals"));
      }
      for (double l : options_.exec_us) {
        if (!(l >= 0) || !std::isfinite(l)) {
          return absl::InvalidArgumentError("simulator: execution times must be finite, >= 0");
        }
      }
      exec_us_ = options_.exec_us;
      return absl::OkStatus();
    }
    std::vector<EmpiricalDistribution> dists;
    for (const auto& h : profile_.dynamic.applications) {
      auto d = EmpiricalDistribution::FromProfile(h);
      if (!d.ok()) return d.status();
      dists.push_back(*std::move(d));
    }
    std::mt19937_64 rng(options_.seed);
    exec_us_.resize(n);
    const auto& thresholds = profile_.dynamic.thresholds;
    if (thresholds.empty()) {
      for (size_t i = 0; i < n; ++i) exec_us_[i] = dists[AppOf(i)].Sample(rng);
      return absl::OkStatus();
    }
    // Load-adaptive exits: a query's time at every threshold is the same
    // quantile u of that threshold's histogram (a sample that leaves late at
    // one threshold leaves late at the others).
    std::vector<std::vector<EmpiricalDistribution>> at(thresholds.size());
    for (size_t t = 0; t < thresholds.size(); ++t) {
      for (const auto& h : thresholds[t].applications) {
        auto d = EmpiricalDistribution::FromProfile(h);
        if (!d.ok()) return d.status();
        at[t].push_back(*std::move(d));
      }
    }
    exec_at_.assign(thresholds.size(), std::vector<double>(n));
    const int32_t def = profile_.dynamic.default_threshold_index();
    std::uniform_real_distribution<double> unit(0, 1);
    for (size_t i = 0; i < n; ++i) {
      const double u = unit(rng);
      for (size_t t = 0; t < thresholds.size(); ++t) {
        exec_at_[t][i] = at[t][AppOf(i)].Quantile(u);
      }
      exec_us_[i] = def >= 0 ? exec_at_[def][i] : dists[AppOf(i)].Quantile(u);
    }
    return absl::OkStatus();
  }

  // An emulated worker took a batch.
  // Takes the plan (its query ids move into the completion, not copied).
  void Start(int32_t worker, BatchPlan&& b) {
    const ModelProfile& profile = *models_[model_index_.at(b.model)].profile;
    const Nanos start = std::max(clock_.Now() + options_.start_delay, b.earliest);
    const Nanos overhead = DrawOverhead();
    if (b.latest > 0 && start > b.latest) {  // the worker refuses it
      ++result_.refused;
      completions_.push({start + overhead, b.worker, b.batch_id, 0, std::move(b.queries),
                         {}, /*refused=*/true});
      return;
    }
    std::vector<QueryTelemetry> query_times;
    Nanos exec = 0;
    if (options_.exec_time) {
      exec = options_.exec_time(b.subnet_id, static_cast<int32_t>(b.queries.size()));
    } else if (profile.is_dynamic) {
      double max_l = 0;
      query_times.reserve(b.queries.size());
      for (size_t i = 0; i < b.queries.size(); ++i) {
        double l = 0;
        if (i < b.inputs.size() && b.inputs[i] != nullptr) {
          const auto& in = static_cast<const DynamicQueryInput&>(*b.inputs[i]);
          const size_t ti = static_cast<size_t>(b.exit_threshold_index);
          l = b.exit_threshold_index >= 0 && ti < in.at_threshold.size() ? in.at_threshold[ti]
                                                                          : in.exec_us;
        }
        max_l = std::max(max_l, l);
        QueryTelemetry q;
        q.id = b.queries[i];
        q.exec = Micros(l);
        query_times.push_back(q);
      }
      const double k = static_cast<double>(b.queries.size());
      const double us =
          (profile.dynamic.batch_overhead_us + profile.dynamic.per_request_factor * k * max_l) *
          options_.exec_scale;
      exec = std::max<Nanos>(1, Clamped(us * kNanosPerMicro));
    } else {
      exec = LatencyOf(profile, b.subnet_index, b.batch_size);
    }
    result_.worker_busy[worker] += exec;
    completions_.push({start + overhead + exec, b.worker, b.batch_id, exec,
                       std::move(b.queries), std::move(query_times)});
  }

  // An emulated worker was asked to load a model: it takes the profile's
  // load time, after the loads it was already asked for.
  void StartLoad(int32_t worker, const std::string& model) {
    const size_t index = model_index_.at(model);
    if (load_free_.size() <= static_cast<size_t>(worker)) load_free_.resize(worker + 1, 0);
    const Nanos done =
        std::max(clock_.Now(), load_free_[worker]) + models_[index].profile->load_time;
    load_free_[worker] = done;
    if (clock_.Now() >= options_.measure_from) ++result_.loads;
    loads_.push({done, ++load_seq_, live_core_ids_.at(worker), index});
  }

  void NoteUnload() {
    if (clock_.Now() >= options_.measure_from) ++result_.unloads;
  }

  // ServingObserver
  void OnModelLoaded(const std::string& model, const std::string& worker,
                     Nanos cold_start) override {
    if (cold_start > 0 && clock_.Now() - cold_start >= options_.measure_from) {
      result_.cold_starts.push_back(cold_start);
    }
  }
  void OnQueryDone(const QueryDone& d) override {
    if (options_.trace != nullptr) options_.trace->OnQueryDone(d);
    --outstanding_;
    if (d.id != 0) answered_.insert(d.id);  // leaves deadlines_ lazily
    TimelineBin& bin = Bin(d.now);
    if (d.outcome == QueryOutcome::kOk || d.outcome == QueryOutcome::kLate) {
      latencies_.push_back(d.latency);
      if (d.outcome == QueryOutcome::kOk) {
        if (const int64_t i = ModelIndexOf(d.model);
            i >= 0 && d.now - d.latency >= options_.measure_from) {
          ++result_.model_met[i];
        }
        ++result_.met;
        result_.accuracy_sum += d.accuracy;
        bin.met++;
        bin.accuracy_sum += d.accuracy;
      } else {
        ++result_.late;
        bin.late++;
      }
    } else {
      ++result_.dropped;
      bin.dropped++;
    }
  }
  void OnBatchSent(const BatchPlan& b) override {
    if (options_.trace != nullptr) options_.trace->OnBatchSent(b);
    ++result_.batches;
    if (models_[model_index_.at(b.model)].profile->is_dynamic) {
      result_.threshold_queries[b.exit_threshold] += static_cast<int64_t>(b.queries.size());
    }
    TimelineBin& bin = Bin(b.sent_at);
    bin.batches++;
    bin.batched_queries += static_cast<int64_t>(b.queries.size());
  }
  void OnWorkersAlive(int32_t alive) override {
    if (draining_) return;
    if (options_.trace != nullptr) options_.trace->OnWorkersAlive(alive);
    live_workers_ = alive;
    Bin(clock_.Now()).live_workers = alive;
  }

 private:
  int32_t AppOf(size_t i) const {
    return options_.applications.empty() ? 0 : options_.applications[i];
  }

  void RunTick(ServingCore& core) {
    tick_at_ = core.Tick();
    ++result_.ticks;
    while (!wakes_.empty() && wakes_.top() <= clock_.Now()) wakes_.pop();  // handled
  }

  // When the core's next tick is due. Its periodic tick (every `interval`)
  // sweeps queued queries whose deadline passed and checks in-flight batches
  // overdue past their latest deadline plus a grace; anything else it does is
  // due to a wake-up a policy asked for. So before both the earliest
  // outstanding deadline and the earliest wake-up, its ticks have nothing to
  // do, and stepping through them made idle time cost (a lone query with a
  // day's SLO waiting under symphony: 8.6 million ticks). Such ticks are
  // skipped: the next is the first of the same grid of ticks at or after the
  // deadline, or the last at or before the wake-up (whose own tick the core
  // then asks for, as without the jump), so that every sweep, wake-up and
  // decision happens at the time it would have.
  Nanos NextTick(Nanos interval) {
    const Nanos now = clock_.Now();
    skipping_ = false;
    // A tick asked for before now (at a wake-up that came due while idle,
    // or before an idle spell) is run now, as it always was.
    if (tick_at_ < now) return now;
    while (!deadlines_.empty() && answered_.erase(deadlines_.top().second) > 0) deadlines_.pop();
    const Nanos deadline = deadlines_.empty() ? kNever : deadlines_.top().first;
    const Nanos wake = wakes_.empty() ? kNever : wakes_.top();
    const Nanos t = tick_at_;  // on the core's housekeeping grid (wakes_ holds any other)
    if (interval <= 0 || t >= deadline || t >= wake || (deadline == kNever && wake == kNever)) {
      return t;
    }
    Nanos next = kNever;
    if (deadline != kNever) next = t + (deadline - t + interval - 1) / interval * interval;
    if (wake != kNever) next = std::min(next, t + (wake - t) / interval * interval);
    skipping_ = next > t;
    return next;
  }

  TimelineBin& Bin(Nanos t) {
    if (!options_.timeline) return scratch_bin_;
    size_t i = static_cast<size_t>(std::max<Nanos>(0, t) / options_.timeline_bin);
    // Bounded: a bin per timeline_bin of simulated time, empty or not.
    if (i >= static_cast<size_t>(kMaxTimelineBins)) {
      if (!timeline_overflow_) timeline_overflow_at_ = t;
      timeline_overflow_ = true;
      return scratch_bin_;
    }
    while (result_.timeline.size() <= i) {
      TimelineBin b;
      b.start = static_cast<Nanos>(result_.timeline.size()) * options_.timeline_bin;
      b.live_workers = live_workers_;
      result_.timeline.push_back(b);
    }
    return result_.timeline[i];
  }

  // The simulated model a report names, -1 for none. Keyed by the address of
  // the core's name string, which stays put while the model is served (a
  // simulation never removes one): each answer hashes a pointer, not a name.
  // A batch's answers come one after another: the last one's is remembered.
  int64_t ModelIndexOf(const std::string* name) {
    if (name == nullptr) return -1;
    if (name == last_name_) return last_index_;
    auto [it, added] = index_by_name_.try_emplace(name, -1);
    if (added) {
      if (auto m = model_index_.find(*name); m != model_index_.end()) {
        it->second = static_cast<int64_t>(m->second);
      }
    }
    last_name_ = name;
    return last_index_ = it->second;
  }

  Nanos DrawOverhead() {
    const auto& samples = options_.dispatch_overhead_samples;
    if (samples.empty()) return options_.dispatch_overhead;
    std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
    return std::max<Nanos>(0, samples[pick(overhead_rng_)]);
  }

  Nanos LatencyOf(const ModelProfile& profile, int32_t subnet, int32_t batch_size) {
    int bi = profile.BatchIndex(batch_size);
    Nanos base =
        Clamped(static_cast<double>(profile.subnets[subnet].latency[bi]) * options_.exec_scale);
    if (sigma_ == 0) return std::max<Nanos>(1, base);
    std::normal_distribution<double> z(0.0, 1.0);
    double factor = std::exp(sigma_ * z(rng_) - sigma_ * sigma_ / 2);
    return std::max<Nanos>(1, Clamped(static_cast<double>(base) * factor));
  }

  // An execution time in ns, at most 100 days: far past any deadline (at
  // most a day after arrival), so such a batch is late whatever its exact
  // length, while a longer one overflowed the nanoseconds (a scaled 1e17-us
  // time wrapped to 1 ns, and an impossible run met every deadline).
  static Nanos Clamped(double ns) {
    constexpr double kMaxExecNs = 100.0 * kMaxQueryTimeout;
    return static_cast<Nanos>(std::min(ns, kMaxExecNs));
  }

  absl::Span<const SimulatedModel> models_;
  absl::Span<const Nanos> arrivals_;
  absl::Span<const int32_t> model_of_;
  absl::flat_hash_map<std::string, size_t> model_index_;
  absl::flat_hash_map<const std::string*, int64_t> index_by_name_;  // see ModelIndexOf
  const std::string* last_name_ = nullptr;
  int64_t last_index_ = -1;
  SimulatorOptions options_;
  SimulatedClock clock_;
  ServingCore* core_ = nullptr;
  DiscardingHandle handle_;
  std::vector<int32_t> live_;  // live worker ids, ascending
  std::vector<int32_t> live_core_ids_;  // the core's id of emulated worker i
  // Placement: loads in progress, earliest first, and when each worker's
  // loading is free.
  struct LoadDone {
    Nanos time;
    uint64_t seq;
    int32_t worker_id;  // the core's id
    size_t model;
    bool operator>(const LoadDone& o) const {
      return time > o.time || (time == o.time && seq > o.seq);
    }
  };
  std::priority_queue<LoadDone, std::vector<LoadDone>, std::greater<LoadDone>> loads_;
  std::vector<Nanos> load_free_;
  uint64_t load_seq_ = 0;
  int32_t live_workers_ = 0;
  int64_t outstanding_ = 0;    // submitted, not yet answered
  bool draining_ = false;
  Nanos tick_at_ = 0;
  std::vector<Nanos> failures_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<Completion>>
      completions_;
  std::mt19937_64 rng_;
  // Its own stream (options_ is initialized before it), so that drawing
  // overheads leaves the noise draws of a seed as they were.
  std::mt19937_64 overhead_rng_{options_.seed * 0x9e3779b97f4a7c15ULL + 1};
  double sigma_ = 0;
  std::vector<Nanos> latencies_;
  std::vector<double> exec_us_;  // dynamic models: each query's own time
  std::vector<std::vector<double>> exec_at_;  // [threshold][query], see PrepareDynamic
  // NextTick's view: the deadlines of the accepted queries, earliest first,
  // each leaving once at the top after its query was answered (answered_);
  // and the wake-ups asked for (policies' and the core's), dropped once a
  // tick at or after them ran.
  std::priority_queue<std::pair<Nanos, QueryId>, std::vector<std::pair<Nanos, QueryId>>,
                      std::greater<std::pair<Nanos, QueryId>>>
      deadlines_;
  absl::flat_hash_set<QueryId> answered_;
  WakeHeap wakes_;
  bool skipping_ = false;    // NextTick's last answer skipped ticks
  TimelineBin scratch_bin_;  // what Bin counts into when the timeline is not kept
  bool timeline_overflow_ = false;
  Nanos timeline_overflow_at_ = 0;
  SimulationResult result_;
};

void EmulatedWorker::Send(BatchPlan batch) { sim_->Start(id_, std::move(batch)); }
void EmulatedWorker::Load(const std::string& model, Nanos) { sim_->StartLoad(id_, model); }
void EmulatedWorker::Unload(const std::string&) { sim_->NoteUnload(); }

}  // namespace

absl::StatusOr<SimulationResult> Simulate(const ModelProfile& profile,
                                          absl::Span<const Nanos> arrivals, Policy* policy,
                                          const SimulatorOptions& options) {
  const SimulatedModel one{&profile, policy, 0};
  return SimulateModels(absl::MakeConstSpan(&one, 1), arrivals, {}, options);
}

absl::StatusOr<SimulationResult> SimulateModels(absl::Span<const SimulatedModel> models,
                                                absl::Span<const Nanos> arrivals,
                                                absl::Span<const int32_t> model_of,
                                                const SimulatorOptions& options) {
  if (options.workers < 1) return absl::InvalidArgumentError("--workers must be >= 1");
  // Deadlines are arrival + SLO: the router clamps a query's timeout to a
  // day (kMaxQueryTimeout), which also keeps that sum from overflowing.
  if (options.slo <= 0 || options.slo > kMaxQueryTimeout) {
    return absl::InvalidArgumentError(absl::StrCat("--slo-ms must be in (0, ",
                                                   ToMillis(kMaxQueryTimeout), "] ms (a day); got ",
                                                   ToMillis(options.slo), " ms"));
  }
  if (!(options.exec_scale > 0) || !std::isfinite(options.exec_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--exec_scale must be finite and > 0; got ", options.exec_scale));
  }
  if (!(options.noise_cv >= 0) || !std::isfinite(options.noise_cv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--noise_cv must be finite and >= 0; got ", options.noise_cv));
  }
  if (options.dispatch_overhead < 0 || options.dispatch_overhead > kMaxQueryTimeout) {
    return absl::InvalidArgumentError(absl::StrCat("--dispatch_overhead_us must be in [0, ",
                                                   ToMicros(kMaxQueryTimeout), "] us (a day); got ",
                                                   ToMicros(options.dispatch_overhead), " us"));
  }
  if (options.timeline_bin <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("timeline bin must be > 0 ns; got ",
                                                   options.timeline_bin, " ns (--timeline_bin_s)"));
  }
  // The bins reach at least the last arrival (more if answers come later:
  // Simulation::Bin checks those).
  if (options.timeline && !arrivals.empty() &&
      arrivals.back() / options.timeline_bin >= kMaxTimelineBins) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeline: the trace's ", ToSeconds(arrivals.back()), " s need more than ",
                     kMaxTimelineBins, " bins of ", ToSeconds(options.timeline_bin),
                     " s; use wider bins (--timeline_bin_s)"));
  }
  if (models.empty()) return absl::InvalidArgumentError("no model to simulate");
  absl::flat_hash_set<std::string> names;
  for (const SimulatedModel& m : models) {
    if (m.profile == nullptr || m.policy == nullptr) {
      return absl::InvalidArgumentError("a simulated model needs a profile and a policy");
    }
    if (m.profile->subnets.empty() && !m.profile->is_dynamic) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile \"", m.profile->model, "\" has no subnets"));
    }
    if (m.slo < 0 || m.slo > kMaxQueryTimeout) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", m.profile->model, "\": SLO must be in [0, ", ToMillis(kMaxQueryTimeout),
          "] ms (0: the default; at most a day); got ", ToMillis(m.slo), " ms"));
    }
    if (!names.insert(m.profile->model).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("model \"", m.profile->model, "\" is given twice"));
    }
  }
  if (!model_of.empty() && model_of.size() != arrivals.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model_of has ", model_of.size(),
                                                   " entries for ", arrivals.size(), " arrivals"));
  }
  for (int32_t m : model_of) {
    if (m < 0 || m >= static_cast<int32_t>(models.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("arrival for model index ", m, " of ", models.size()));
    }
  }
  Simulation sim(models, arrivals, model_of, options);
  return sim.Run();
}

absl::Status WriteTimelineCsv(const SimulationResult& r, Nanos bin, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrCat("timeline ", path, ": cannot write"));
  std::fprintf(f,
               "time_s,arrival_qps,met,late,dropped,slo_attainment,mean_accuracy,mean_batch,"
               "live_workers\n");
  for (const TimelineBin& b : r.timeline) {
    int64_t done = b.met + b.late + b.dropped;
    std::fprintf(f, "%.3f,%.1f,%lld,%lld,%lld,%.6f,%.4f,%.3f,%d\n", ToSeconds(b.start),
                 b.arrivals / ToSeconds(bin), static_cast<long long>(b.met),
                 static_cast<long long>(b.late), static_cast<long long>(b.dropped),
                 done ? static_cast<double>(b.met) / done : 1.0,
                 b.met ? b.accuracy_sum / b.met : 0.0,
                 b.batches ? static_cast<double>(b.batched_queries) / b.batches : 0.0,
                 b.live_workers);
  }
  if (std::fclose(f) != 0) return absl::InternalError(absl::StrCat("timeline ", path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace superserve
