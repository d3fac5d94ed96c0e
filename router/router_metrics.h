#ifndef SUPERSERVE_ROUTER_ROUTER_METRICS_H_
#define SUPERSERVE_ROUTER_ROUTER_METRICS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "serving/serving_observer.h"

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace superserve {

struct ServingStats;

// The router's Prometheus metrics (prometheus-cpp), served as text on
// http://ADDR/metrics. Metric handles are cached per model / worker so the
// query path never builds label maps. Thread-safe. Queries naming a model
// the router does not serve are counted under model="_unknown" (the serving
// core's label), so a client's arbitrary names cannot grow the series
// without bound.
//
//   superserve_queries_total{model,status}         queries by final status
//   superserve_slo_attainment{model}               ok / all terminal answers (from
//                                                  the model's first answer on: absent
//                                                  before, not 0)
//   superserve_query_latency_seconds{model}        end-to-end latency, ok+late
//   superserve_served_accuracy_percent{model}      profiled accuracy of each query served in time
//   superserve_subnet_queries_total{model,subnet}  queries served per subnet id
//   superserve_batch_size{model}                   queries per dispatched batch
//   superserve_queue_depth{model}                  pending queries
//   superserve_batches_refused_total{model}        batches refused: action window closed
//   superserve_worker_busy_fraction{worker}        executing share of the last interval
//   superserve_worker_slowdown{worker}             batch time over the fleet median's (1 = normal)
//   superserve_workers_alive                       registered live workers
//   superserve_application_queries_total{model,application,status}
//                                                  queries by final status per application tag
//   superserve_application_slo_attainment{model,application}
//                                                  ok / all terminal answers per application
//   superserve_workers_needed{model}               workers the measured arrival rate
//                                                  needs (autoscaling advice, below)
//   superserve_queries_accepted_total              queries that entered a queue
//   superserve_queries_answered_total              terminal answers of accepted queries
//   superserve_queries_pending                     accepted, not answered yet
//     (the last three from one snapshot of the serving core per scrape, so
//     accepted == answered + pending in every scrape: the router's side of
//     the exactly-once count, docs/faults.md)
class RouterMetrics final : public ServingObserver {
 public:
  // Autoscaling advice (docs/planning.md): per model with a profile, the
  // workers Harpagon's planner (planner/workers_needed.h) needs for the
  // arrival rate measured over `window` (every query ends in exactly one
  // answer, so answers are counted) at `objective`, on the most accurate
  // subnet, each batch `batch_overhead` slower than profiled. Recomputed at
  // most every `refresh`, on answers and on every serving tick.
  struct WorkersNeededOptions {
    Nanos objective = Millis(100);
    Nanos window = Seconds(10);
    Nanos batch_overhead = 0;
    Nanos refresh = Millis(100);
  };

  RouterMetrics();
  ~RouterMetrics() override;

  // ServingObserver: the serving core's events become the metrics below.
  void OnQueryDone(const QueryDone& done) override;
  void OnBatchSent(const BatchPlan& batch) override;
  void OnWorkersAlive(int32_t alive) override { SetWorkersAlive(alive); }
  void OnQueueDepth(const std::string& model, int64_t depth) override {
    SetQueueDepth(model, depth);
  }
  void OnWorkerBusyFraction(const std::string& worker, double fraction) override {
    SetWorkerBusyFraction(worker, fraction);
  }
  void OnWorkerSlowdown(const std::string& worker, double slowdown) override;
  void OnBatchRefused(const std::string& model, const std::string& worker) override;

  // Starts the HTTP endpoint on `address` ("127.0.0.1:0" picks a port).
  // Returns the bound port.
  absl::StatusOr<int> Serve(const std::string& address);

  void OnQueryDone(const std::string& model, QueryOutcome outcome, Nanos latency,
                   double accuracy, int32_t subnet_id);
  void OnBatch(const std::string& model, int32_t queries);
  void SetQueueDepth(const std::string& model, int64_t depth);
  void SetWorkerBusyFraction(const std::string& worker, double fraction);
  void SetWorkersAlive(int64_t n);

  // Turns the superserve_workers_needed gauge on; `clock` (not owned) is the
  // serving core's. Call before queries flow.
  void EnableWorkersNeeded(const WorkersNeededOptions& options, const Clock* clock);
  // The profile the advice plans a model with (startup and re-registration).
  void SetModelProfile(const ModelProfile& profile);
  // Recomputes the model's gauge now; returns its value, or -1 when the gauge
  // is off, the model has no profile, or the objective cannot be met.
  int32_t RefreshWorkersNeeded(const std::string& model);

  // Removes every series of `model` (an unregistered model, or one version
  // of it): a gone model's gauges froze at their last value (a queue depth, a
  // workers-needed advice an autoscaler acts on) and its counters stayed in
  // every scrape until the router restarted. Prometheus reads a series that
  // comes back (the name registered again) as a counter reset.
  void RemoveModel(const std::string& model);

  // Exports the serving core's totals (the three families above) from
  // `stats` on every scrape; nullptr stops (before the core goes away).
  void ExportServingTotals(std::function<ServingStats()> stats);

  // Text exposition of everything (what /metrics serves); for tests.
  std::string Scrape() const;

 private:
  struct ModelMetrics;
  struct ApplicationMetrics;
  // Runs `f` on the model's metrics, created on first use, with mu_ held
  // shared: RemoveModel, which holds it alone, cannot free them meanwhile.
  template <typename F>
  void WithModel(const std::string& model, F&& f);
  // The application's metrics, created on first use; mu_ must be held.
  ApplicationMetrics& ApplicationLocked(const std::string& model, const std::string& application);
  void Record(ModelMetrics& m, const std::string& model, QueryOutcome outcome, Nanos latency,
              double accuracy, int32_t subnet_id);
  void OnAnswerForAdvice(ModelMetrics& m, Nanos now);
  int32_t RefreshWorkersNeeded(ModelMetrics& m, Nanos now, bool force);

  class ServingTotals;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ServingTotals> totals_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* queries_;
  prometheus::Family<prometheus::Gauge>* attainment_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Histogram>* accuracy_;
  prometheus::Family<prometheus::Counter>* subnet_;
  prometheus::Family<prometheus::Counter>* exit_threshold_;
  prometheus::Family<prometheus::Histogram>* batch_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Counter>* refused_;
  prometheus::Family<prometheus::Gauge>* busy_;
  prometheus::Family<prometheus::Gauge>* slowdown_;
  prometheus::Gauge* workers_alive_;
  prometheus::Family<prometheus::Gauge>* workers_needed_;
  prometheus::Family<prometheus::Counter>* app_queries_;
  prometheus::Family<prometheus::Gauge>* app_attainment_;
  WorkersNeededOptions advice_;
  std::atomic<const Clock*> advice_clock_{nullptr};

  // Guards the caches below (not the metric values): held shared while a
  // cached metric is updated, alone to add or remove a model's.
  std::shared_mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<ModelMetrics>> models_;
  // Keyed by model + '\n' + application. apps_mu_ is taken with mu_ held
  // shared, to add one (RemoveModel holds mu_ alone instead).
  std::shared_mutex apps_mu_;
  std::unordered_map<std::string, std::unique_ptr<ApplicationMetrics>> applications_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_ROUTER_METRICS_H_
