#include "bench/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <queue>
#include <random>

#include "absl/strings/str_cat.h"
#include "policies/edf_queue.h"

namespace superserve {

double SimulationResult::throughput_qps() const {
  Nanos span = last_event - first_arrival;
  return span > 0 ? static_cast<double>(met + late) / ToSeconds(span) : 0;
}

namespace {

struct Completion {
  Nanos time;
  int32_t worker;
  uint32_t epoch;
  bool operator>(const Completion& o) const {
    return time > o.time || (time == o.time && worker > o.worker);
  }
};

struct WorkerState {
  bool alive = true;
  bool busy = false;
  uint32_t epoch = 0;
  int32_t subnet_index = -1;
  int32_t batch_size = 0;
  Nanos exec = 0;
  std::vector<Query> batch;
};

class Simulation {
 public:
  Simulation(const ModelProfile& profile, absl::Span<const Nanos> arrivals, Policy* policy,
             const SimulatorOptions& options)
      : profile_(profile),
        arrivals_(arrivals),
        policy_(policy),
        options_(options),
        workers_(std::max(0, options.workers)),
        rng_(options.seed) {
    double cv = std::max(0.0, options.noise_cv);
    sigma_ = std::sqrt(std::log(1 + cv * cv));
    for (int32_t w = 0; w < options.workers; ++w) free_.push_back(w);
    live_workers_ = options.workers;
    failures_ = options.worker_failures;
    std::sort(failures_.begin(), failures_.end());
    result_.policy = std::string(policy->name());
    result_.queries = static_cast<int64_t>(arrivals.size());
    if (!arrivals.empty()) result_.first_arrival = arrivals.front();
    latencies_.reserve(arrivals.size());
  }

  absl::StatusOr<SimulationResult> Run() {
    size_t next_arrival = 0, next_failure = 0;
    Nanos wake = INT64_MAX;
    while (true) {
      const Nanos t_arrival = next_arrival < arrivals_.size() ? arrivals_[next_arrival] : INT64_MAX;
      const Nanos t_done = completions_.empty() ? INT64_MAX : completions_.top().time;
      const Nanos t_fail = next_failure < failures_.size() ? failures_[next_failure] : INT64_MAX;
      const Nanos t = std::min({t_arrival, t_done, t_fail, wake});
      if (t == INT64_MAX) break;
      now_ = t;
      if (t_done == t) {
        Completion c = completions_.top();
        completions_.pop();
        if (c.epoch == workers_[c.worker].epoch) Complete(c.worker);
      } else if (t_fail == t) {
        ++next_failure;
        FailOneWorker();
      } else if (t_arrival == t) {
        // All arrivals at this instant, then one scheduling round.
        while (next_arrival < arrivals_.size() && arrivals_[next_arrival] == t) {
          Query q{next_arrival, 0, t, t + options_.slo};
          ++next_arrival;
          queue_.Push(q);
          Bin(t).arrivals++;
          policy_->OnArrival(q, t);
        }
      } else {
        wake = INT64_MAX;
      }
      absl::Status s = Schedule(&wake);
      if (!s.ok()) return s;
    }
    // Nobody left to serve these (every worker failed, or the policy idled).
    while (!queue_.empty()) {
      queue_.Pop();
      ++result_.dropped;
      Bin(now_).dropped++;
    }
    result_.last_event = now_;
    if (!latencies_.empty()) {
      size_t k = static_cast<size_t>(0.99 * static_cast<double>(latencies_.size() - 1));
      std::nth_element(latencies_.begin(), latencies_.begin() + k, latencies_.end());
      result_.p99_latency = latencies_[k];
    }
    return std::move(result_);
  }

 private:
  TimelineBin& Bin(Nanos t) {
    size_t i = static_cast<size_t>(std::max<Nanos>(0, t) / options_.timeline_bin);
    while (result_.timeline.size() <= i) {
      TimelineBin b;
      b.start = static_cast<Nanos>(result_.timeline.size()) * options_.timeline_bin;
      b.live_workers = live_workers_;
      result_.timeline.push_back(b);
    }
    return result_.timeline[i];
  }

  Nanos LatencyOf(int32_t subnet, int32_t batch_size) {
    int bi = profile_.BatchIndex(batch_size);
    Nanos base = static_cast<Nanos>(static_cast<double>(profile_.subnets[subnet].latency[bi]) *
                                    options_.exec_scale);
    if (sigma_ == 0) return std::max<Nanos>(1, base);
    std::normal_distribution<double> z(0.0, 1.0);
    double factor = std::exp(sigma_ * z(rng_) - sigma_ * sigma_ / 2);
    return std::max<Nanos>(1, static_cast<Nanos>(static_cast<double>(base) * factor));
  }

  absl::Status Schedule(Nanos* wake) {
    while (!free_.empty() && !queue_.empty()) {
      SchedulingContext ctx{queue_, now_, absl::MakeConstSpan(free_), live_workers_};
      Decision d = policy_->Decide(ctx);
      if (d.drop < 0 || d.drop > static_cast<int32_t>(queue_.size())) {
        return absl::InternalError(absl::StrCat(std::string(policy_->name()), ": bad drop ", d.drop));
      }
      for (int32_t i = 0; i < d.drop; ++i) {
        queue_.Pop();
        ++result_.dropped;
      }
      if (d.drop > 0) Bin(now_).dropped += d.drop;
      if (d.kind == Decision::Kind::kWakeAt) {
        if (d.wake_at > now_) *wake = std::min(*wake, d.wake_at);
        return absl::OkStatus();
      }
      if (d.kind != Decision::Kind::kDispatch) {
        if (d.drop > 0) continue;  // ask again about what is left
        return absl::OkStatus();
      }
      auto it = std::find(free_.begin(), free_.end(), d.worker);
      if (it == free_.end() || d.take < 1 || d.take > d.batch_size ||
          d.take > static_cast<int32_t>(queue_.size()) || d.subnet_index < 0 ||
          d.subnet_index >= static_cast<int32_t>(profile_.subnets.size()) ||
          profile_.BatchIndex(d.batch_size) < 0) {
        return absl::InternalError(absl::StrCat(
            std::string(policy_->name()), ": invalid dispatch (worker ", d.worker, ", take ", d.take,
            ", batch ", d.batch_size, ", subnet ", d.subnet_index, ")"));
      }
      free_.erase(it);
      WorkerState& w = workers_[d.worker];
      w.busy = true;
      w.batch.clear();
      queue_.PopFront(static_cast<size_t>(d.take), &w.batch);
      w.subnet_index = d.subnet_index;
      w.batch_size = d.batch_size;
      w.exec = LatencyOf(d.subnet_index, d.batch_size);
      completions_.push({now_ + options_.dispatch_overhead + w.exec, d.worker, w.epoch});
      ++result_.batches;
      TimelineBin& b = Bin(now_);
      b.batches++;
      b.batched_queries += d.take;
    }
    return absl::OkStatus();
  }

  void Complete(int32_t worker) {
    WorkerState& w = workers_[worker];
    const double accuracy = profile_.subnets[w.subnet_index].accuracy;
    TimelineBin& b = Bin(now_);
    for (const Query& q : w.batch) {
      latencies_.push_back(now_ - q.arrival);
      if (now_ <= q.deadline) {
        ++result_.met;
        result_.accuracy_sum += accuracy;
        b.met++;
        b.accuracy_sum += accuracy;
      } else {
        ++result_.late;
        b.late++;
      }
    }
    w.batch.clear();
    w.busy = false;
    free_.insert(std::lower_bound(free_.begin(), free_.end(), worker), worker);
    CompletionTelemetry t;
    t.worker = worker;
    t.subnet_index = w.subnet_index;
    t.batch_size = w.batch_size;
    t.exec = w.exec;
    t.overhead = options_.dispatch_overhead;
    t.now = now_;
    policy_->OnCompletion(t);
  }

  void FailOneWorker() {
    for (int32_t id = static_cast<int32_t>(workers_.size()) - 1; id >= 0; --id) {
      WorkerState& w = workers_[id];
      if (!w.alive) continue;
      w.alive = false;
      ++w.epoch;  // its pending completion no longer counts
      --live_workers_;
      if (w.busy) {
        for (const Query& q : w.batch) queue_.Push(q);
        w.batch.clear();
        w.busy = false;
      } else {
        free_.erase(std::find(free_.begin(), free_.end(), id));
      }
      Bin(now_).live_workers = live_workers_;
      return;
    }
  }

  const ModelProfile& profile_;
  absl::Span<const Nanos> arrivals_;
  Policy* policy_;
  SimulatorOptions options_;
  std::vector<WorkerState> workers_;
  std::vector<int32_t> free_;  // ascending ids of free live workers
  int32_t live_workers_ = 0;
  std::vector<Nanos> failures_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<Completion>>
      completions_;
  EdfQueue queue_;
  Nanos now_ = 0;
  std::mt19937_64 rng_;
  double sigma_ = 0;
  std::vector<Nanos> latencies_;
  SimulationResult result_;
};

}  // namespace

absl::StatusOr<SimulationResult> Simulate(const ModelProfile& profile,
                                          absl::Span<const Nanos> arrivals, Policy* policy,
                                          const SimulatorOptions& options) {
  if (options.workers < 1) return absl::InvalidArgumentError("--workers must be >= 1");
  if (options.slo <= 0) return absl::InvalidArgumentError("--slo-ms must be > 0");
  if (options.timeline_bin <= 0) return absl::InvalidArgumentError("timeline bin must be > 0");
  if (profile.subnets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile \"", profile.model, "\" has no subnets"));
  }
  Simulation sim(profile, arrivals, policy, options);
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
