#include "router/router_metrics.h"

#include <atomic>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/workers_needed.h"
#include "policies/arrival_rate.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "serving/serving_core.h"

namespace superserve {

constexpr int kNumOutcomes = 7;

struct RouterMetrics::ApplicationMetrics {
  prometheus::Counter* by_outcome[kNumOutcomes];
  prometheus::Gauge* attainment;
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> terminal{0};
};

struct RouterMetrics::ModelMetrics {
  prometheus::Counter* by_outcome[kNumOutcomes];
  // Created with the model's first answer (SetAttainment): before any, the
  // fraction is undefined, and a series at 0 read as "every query missed".
  std::atomic<prometheus::Gauge*> attainment{nullptr};
  prometheus::Histogram* latency;
  prometheus::Histogram* accuracy;
  prometheus::Histogram* batch;
  prometheus::Gauge* queue_depth;
  prometheus::Counter* refused;
  std::mutex subnet_mu;
  std::unordered_map<int32_t, prometheus::Counter*> subnet;
  // Load-adaptive exits: queries dispatched per exit threshold (under
  // subnet_mu).
  std::map<float, prometheus::Counter*> exit_threshold;
  std::atomic<int64_t> ok{0}, terminal{0};
  // Autoscaling advice; guarded by advice_mu.
  std::mutex advice_mu;
  std::unique_ptr<ModelProfile> profile;
  std::unique_ptr<ArrivalRateEstimator> answers;
  Nanos last_refresh = 0;
  prometheus::Gauge* workers_needed = nullptr;
};

// The serving core's accepted / answered / pending, read at scrape time from
// one Stats() snapshot (taken under the core's lock), so the three agree.
class RouterMetrics::ServingTotals final : public prometheus::Collectable {
 public:
  void Set(std::function<ServingStats()> stats) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = std::move(stats);
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stats_) return {};
    const ServingStats s = stats_();
    auto family = [](const char* name, const char* help, prometheus::MetricType type,
                     int64_t value) {
      prometheus::MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = type;
      prometheus::ClientMetric m;
      if (type == prometheus::MetricType::Counter) {
        m.counter.value = static_cast<double>(value);
      } else {
        m.gauge.value = static_cast<double>(value);
      }
      f.metric.push_back(m);
      return f;
    };
    return {family("superserve_queries_accepted_total", "Queries that entered a queue",
                   prometheus::MetricType::Counter, s.accepted),
            family("superserve_queries_answered_total",
                   "Terminal answers of accepted queries (one per accepted query)",
                   prometheus::MetricType::Counter, s.answered),
            family("superserve_queries_pending", "Accepted queries not answered yet",
                   prometheus::MetricType::Gauge, s.pending)};
  }

 private:
  mutable std::mutex mu_;
  std::function<ServingStats()> stats_;
};

RouterMetrics::RouterMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      totals_(std::make_shared<ServingTotals>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  queries_ = &BuildCounter()
                  .Name("superserve_queries_total")
                  .Help("Queries by final status (ok = answered within the deadline)")
                  .Register(*registry_);
  attainment_ = &BuildGauge()
                     .Name("superserve_slo_attainment")
                     .Help("Fraction of answered queries that met their deadline")
                     .Register(*registry_);
  latency_ = &BuildHistogram()
                  .Name("superserve_query_latency_seconds")
                  .Help("End-to-end latency inside the router of answered queries")
                  .Register(*registry_);
  accuracy_ = &BuildHistogram()
                   .Name("superserve_served_accuracy_percent")
                   .Help("Profiled accuracy of the subnet that served each in-time query")
                   .Register(*registry_);
  subnet_ = &BuildCounter()
                 .Name("superserve_subnet_queries_total")
                 .Help("Queries served per chosen subnet id")
                 .Register(*registry_);
  exit_threshold_ = &BuildCounter()
                        .Name("superserve_exit_threshold_queries_total")
                        .Help("Queries of early-exit models dispatched per exit threshold the "
                              "scheduler chose (load-adaptive exits)")
                        .Register(*registry_);
  batch_ = &BuildHistogram()
                .Name("superserve_batch_size")
                .Help("Queries per dispatched batch")
                .Register(*registry_);
  refused_ = &BuildCounter()
                  .Name("superserve_batches_refused_total")
                  .Help("Batches a worker refused because their action window had closed "
                        "(their queries were re-queued or answered DEADLINE_EXCEEDED)")
                  .Register(*registry_);
  app_queries_ = &BuildCounter()
                      .Name("superserve_application_queries_total")
                      .Help("Queries by final status per application tag (dynamic models)")
                      .Register(*registry_);
  app_attainment_ = &BuildGauge()
                         .Name("superserve_application_slo_attainment")
                         .Help("Fraction of the application's answered queries that met their "
                               "deadline")
                         .Register(*registry_);
  queue_depth_ = &BuildGauge()
                      .Name("superserve_queue_depth")
                      .Help("Pending queries in the model's EDF queue")
                      .Register(*registry_);
  busy_ = &BuildGauge()
               .Name("superserve_worker_busy_fraction")
               .Help("Share of the last interval the worker spent executing batches")
               .Register(*registry_);
  slowdown_ = &BuildGauge()
                   .Name("superserve_worker_slowdown")
                   .Help("The worker's batch times over the fleet median worker's, as the "
                         "per-worker estimates see them (1 = as the fleet; 3 = three times "
                         "slower)")
                   .Register(*registry_);
  workers_alive_ = &BuildGauge()
                        .Name("superserve_workers_alive")
                        .Help("Registered live workers")
                        .Register(*registry_)
                        .Add({});
  workers_needed_ = &BuildGauge()
                         .Name("superserve_workers_needed")
                         .Help(
                             "Workers the measured arrival rate needs at the objective "
                             "(Harpagon's planner; autoscaling advice)")
                         .Register(*registry_);
}

RouterMetrics::~RouterMetrics() = default;

absl::StatusOr<int> RouterMetrics::Serve(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("metrics endpoint ", address, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(totals_);
  auto ports = exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError("metrics endpoint: no listening port");
  return ports.front();
}

template <typename F>
void RouterMetrics::WithModel(const std::string& model, F&& f) {
  for (;;) {
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (auto it = models_.find(model); it != models_.end()) {
        f(*it->second);
        return;
      }
    }
    // Created alone, then used shared like any other (RemoveModel may come
    // in between: then it is created again).
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto& slot = models_[model];
    if (slot) continue;
    slot = std::make_unique<ModelMetrics>();
    for (int i = 0; i < kNumOutcomes; ++i) {
      slot->by_outcome[i] =
          &queries_->Add({{"model", model}, {"status", QueryOutcomeName(QueryOutcome(i))}});
    }
    slot->latency = &latency_->Add(
        {{"model", model}},
        prometheus::Histogram::BucketBoundaries{0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05,
                                                0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5});
    slot->accuracy = &accuracy_->Add(
        {{"model", model}}, prometheus::Histogram::BucketBoundaries{50, 60, 70, 75, 80, 82, 84,
                                                                    86, 88, 90, 92, 94, 96, 98,
                                                                    100});
    slot->batch = &batch_->Add({{"model", model}},
                               prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64,
                                                                       128, 256});
    slot->queue_depth = &queue_depth_->Add({{"model", model}});
    slot->refused = &refused_->Add({{"model", model}});
  }
}

RouterMetrics::ApplicationMetrics& RouterMetrics::ApplicationLocked(
    const std::string& model, const std::string& application) {
  const std::string key = absl::StrCat(model, "\n", application);
  {
    std::shared_lock<std::shared_mutex> lock(apps_mu_);
    if (auto it = applications_.find(key); it != applications_.end()) return *it->second;
  }
  std::unique_lock<std::shared_mutex> lock(apps_mu_);
  auto& slot = applications_[key];
  if (!slot) {
    slot = std::make_unique<ApplicationMetrics>();
    for (int i = 0; i < kNumOutcomes; ++i) {
      slot->by_outcome[i] = &app_queries_->Add({{"model", model},
                                                {"application", application},
                                                {"status", QueryOutcomeName(QueryOutcome(i))}});
    }
    slot->attainment = &app_attainment_->Add({{"model", model}, {"application", application}});
  }
  // Stays valid after the lock: only RemoveModel erases, holding mu_ alone.
  return *slot;
}

void RouterMetrics::RemoveModel(const std::string& model) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (auto it = models_.find(model); it != models_.end()) {
    ModelMetrics& m = *it->second;
    for (auto* c : m.by_outcome) queries_->Remove(c);
    if (auto* g = m.attainment.load()) attainment_->Remove(g);
    latency_->Remove(m.latency);
    accuracy_->Remove(m.accuracy);
    batch_->Remove(m.batch);
    queue_depth_->Remove(m.queue_depth);
    refused_->Remove(m.refused);
    for (auto& [id, c] : m.subnet) subnet_->Remove(c);
    for (auto& [t, c] : m.exit_threshold) exit_threshold_->Remove(c);
    if (m.workers_needed != nullptr) workers_needed_->Remove(m.workers_needed);
    models_.erase(it);
  }
  const std::string prefix = absl::StrCat(model, "\n");
  std::unique_lock<std::shared_mutex> apps_lock(apps_mu_);
  for (auto it = applications_.begin(); it != applications_.end();) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) {
      ++it;
      continue;
    }
    for (auto* c : it->second->by_outcome) app_queries_->Remove(c);
    app_attainment_->Remove(it->second->attainment);
    it = applications_.erase(it);
  }
}

void RouterMetrics::OnBatchRefused(const std::string& model, const std::string& worker) {
  WithModel(model, [](ModelMetrics& m) { m.refused->Increment(); });
}

void RouterMetrics::OnQueryDone(const std::string& model, QueryOutcome outcome, Nanos latency,
                                double accuracy, int32_t subnet_id) {
  WithModel(model,
            [&](ModelMetrics& m) { Record(m, model, outcome, latency, accuracy, subnet_id); });
}

void RouterMetrics::Record(ModelMetrics& m, const std::string& model, QueryOutcome outcome,
                           Nanos latency, double accuracy, int32_t subnet_id) {
  m.by_outcome[static_cast<int>(outcome)]->Increment();
  int64_t ok = outcome == QueryOutcome::kOk ? m.ok.fetch_add(1) + 1 : m.ok.load();
  int64_t all = m.terminal.fetch_add(1) + 1;
  const double attainment = static_cast<double>(ok) / static_cast<double>(all);
  prometheus::Gauge* gauge = m.attainment.load(std::memory_order_acquire);
  if (gauge == nullptr) {
    // Family::Add is thread-safe and returns the existing gauge for the same
    // labels; created holding the value, so no scrape sees a 0 before Set.
    gauge = &attainment_->Add({{"model", model}}, attainment);
    m.attainment.store(gauge, std::memory_order_release);
  }
  gauge->Set(attainment);
  if (outcome == QueryOutcome::kOk || outcome == QueryOutcome::kLate) {
    m.latency->Observe(ToSeconds(latency));
  }
  if (outcome == QueryOutcome::kOk) {
    m.accuracy->Observe(accuracy);
    prometheus::Counter* c;
    {
      std::lock_guard<std::mutex> lock(m.subnet_mu);
      auto& slot = m.subnet[subnet_id];
      if (slot == nullptr) {
        slot = &subnet_->Add({{"model", model}, {"subnet", absl::StrCat(subnet_id)}});
      }
      c = slot;
    }
    c->Increment();
  }
}

void RouterMetrics::OnQueryDone(const QueryDone& d) {
  WithModel(*d.model, [&](ModelMetrics& m) {
    Record(m, *d.model, d.outcome, d.latency, d.accuracy, d.subnet_id);
    if (d.application != nullptr) {
      // The core caps distinct tags (--max_applications), so this map is bounded.
      ApplicationMetrics& a = ApplicationLocked(*d.model, *d.application);
      a.by_outcome[static_cast<int>(d.outcome)]->Increment();
      const int64_t ok = d.outcome == QueryOutcome::kOk ? a.ok.fetch_add(1) + 1 : a.ok.load();
      const int64_t all = a.terminal.fetch_add(1) + 1;
      a.attainment->Set(static_cast<double>(ok) / static_cast<double>(all));
    }
    if (advice_clock_.load(std::memory_order_acquire) != nullptr) OnAnswerForAdvice(m, d.now);
  });
}

void RouterMetrics::EnableWorkersNeeded(const WorkersNeededOptions& options, const Clock* clock) {
  advice_ = options;
  advice_clock_.store(clock, std::memory_order_release);
}

void RouterMetrics::SetModelProfile(const ModelProfile& profile) {
  WithModel(profile.model, [&](ModelMetrics& m) {
    std::lock_guard<std::mutex> lock(m.advice_mu);
    m.profile = std::make_unique<ModelProfile>(profile);
    if (!m.answers) m.answers = std::make_unique<ArrivalRateEstimator>(advice_.window);
    if (!m.workers_needed) m.workers_needed = &workers_needed_->Add({{"model", profile.model}});
  });
}

void RouterMetrics::OnAnswerForAdvice(ModelMetrics& m, Nanos now) {
  {
    std::lock_guard<std::mutex> lock(m.advice_mu);
    if (!m.answers) return;  // no profile: no advice
    m.answers->Add(now);
  }
  RefreshWorkersNeeded(m, now, false);
}

int32_t RouterMetrics::RefreshWorkersNeeded(const std::string& model) {
  const Clock* clock = advice_clock_.load(std::memory_order_acquire);
  if (clock == nullptr) return -1;
  int32_t n = -1;
  WithModel(model, [&](ModelMetrics& m) { n = RefreshWorkersNeeded(m, clock->Now(), true); });
  return n;
}

int32_t RouterMetrics::RefreshWorkersNeeded(ModelMetrics& m, Nanos now, bool force) {
  std::lock_guard<std::mutex> lock(m.advice_mu);
  if (!m.profile || !m.answers) return -1;
  if (!force && m.last_refresh > 0 && now - m.last_refresh < advice_.refresh) return -1;
  m.last_refresh = now;
  auto n = WorkersNeeded(*m.profile, m.answers->Rate(now), advice_.objective, -1,
                         advice_.batch_overhead);
  if (!n.ok()) return -1;  // keeps the last advice
  m.workers_needed->Set(*n);
  return *n;
}

void RouterMetrics::OnBatchSent(const BatchPlan& batch) {
  OnBatch(batch.model, static_cast<int32_t>(batch.queries.size()));
  if (batch.exit_threshold <= 0) return;  // no threshold chosen
  WithModel(batch.model, [&](ModelMetrics& m) {
    const float t = static_cast<float>(batch.exit_threshold);
    prometheus::Counter* c;
    {
      std::lock_guard<std::mutex> lock(m.subnet_mu);
      auto& slot = m.exit_threshold[t];
      if (slot == nullptr) {
        slot = &exit_threshold_->Add({{"model", batch.model}, {"threshold", absl::StrCat(t)}});
      }
      c = slot;
    }
    c->Increment(static_cast<double>(batch.queries.size()));
  });
}

void RouterMetrics::OnBatch(const std::string& model, int32_t queries) {
  WithModel(model, [&](ModelMetrics& m) { m.batch->Observe(queries); });
}

void RouterMetrics::SetQueueDepth(const std::string& model, int64_t depth) {
  WithModel(model, [&](ModelMetrics& m) {
    m.queue_depth->Set(static_cast<double>(depth));
    // Every serving tick: the advice follows a rate that falls to nothing too.
    if (const Clock* clock = advice_clock_.load(std::memory_order_acquire)) {
      RefreshWorkersNeeded(m, clock->Now(), false);
    }
  });
}

void RouterMetrics::SetWorkerBusyFraction(const std::string& worker, double fraction) {
  busy_->Add({{"worker", worker}}).Set(fraction);
}

void RouterMetrics::OnWorkerSlowdown(const std::string& worker, double slowdown) {
  slowdown_->Add({{"worker", worker}}).Set(slowdown);
}

void RouterMetrics::SetWorkersAlive(int64_t n) { workers_alive_->Set(static_cast<double>(n)); }

void RouterMetrics::ExportServingTotals(std::function<ServingStats()> stats) {
  totals_->Set(std::move(stats));
}

std::string RouterMetrics::Scrape() const {
  prometheus::TextSerializer s;
  auto families = registry_->Collect();
  for (auto& f : totals_->Collect()) families.push_back(std::move(f));
  return s.Serialize(families);
}

}  // namespace superserve
