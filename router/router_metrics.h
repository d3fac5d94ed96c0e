#ifndef SUPERSERVE_ROUTER_ROUTER_METRICS_H_
#define SUPERSERVE_ROUTER_ROUTER_METRICS_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
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


// The router's Prometheus metrics (prometheus-cpp), served as text on
// http://ADDR/metrics. Metric handles are cached per model / worker so the
// query path never builds label maps. Thread-safe.
//
//   superserve_queries_total{model,status}         queries by final status
//   superserve_slo_attainment{model}               ok / all terminal answers
//   superserve_query_latency_seconds{model}        end-to-end latency, ok+late
//   superserve_served_accuracy_percent{model}      profiled accuracy of each query served in time
//   superserve_subnet_queries_total{model,subnet}  queries served per subnet id
//   superserve_batch_size{model}                   queries per dispatched batch
//   superserve_queue_depth{model}                  pending queries
//   superserve_batches_refused_total{model}        batches refused: action window closed
//   superserve_worker_busy_fraction{worker}        executing share of the last interval
//   superserve_workers_alive                       registered live workers
class RouterMetrics final : public ServingObserver {
 public:
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

  // Text exposition of everything (what /metrics serves); for tests.
  std::string Scrape() const;

 private:
  struct ModelMetrics;
  ModelMetrics& Model(const std::string& model);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* queries_;
  prometheus::Family<prometheus::Gauge>* attainment_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Histogram>* accuracy_;
  prometheus::Family<prometheus::Counter>* subnet_;
  prometheus::Family<prometheus::Histogram>* batch_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Counter>* refused_;
  prometheus::Family<prometheus::Gauge>* busy_;
  prometheus::Gauge* workers_alive_;

  std::mutex mu_;  // guards the caches below (not the metric values)
  std::unordered_map<std::string, std::unique_ptr<ModelMetrics>> models_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_ROUTER_METRICS_H_
