#ifndef SUPERSERVE_TESTS_TEST_UTIL_SERVING_FAKES_H_
#define SUPERSERVE_TESTS_TEST_UTIL_SERVING_FAKES_H_

// Fakes of the serving core's two interfaces, shared by the tests that drive
// ServingCore directly (and the serving-core fuzzer). No gRPC, no torch.

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <vector>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/time.h"
#include "policies/policy.h"
#include "serving/batch.h"
#include "serving/query_handle.h"
#include "serving/worker_channel.h"

namespace superserve::testing {

// A worker's answer to `b`: every query served (no output bytes), executed
// in 1 ms.
inline BatchOutcome OkOutcome(const BatchPlan& b) {
  BatchOutcome o;
  o.batch_id = b.batch_id;
  o.exec = Millis(1);
  for (QueryId id : b.queries) o.outputs.emplace_back(id, nullptr);
  return o;
}

// A policy that never dispatches: the model of a test that takes its
// queue's decisions by hand.
class IdlePolicy final : public Policy {
 public:
  std::string_view name() const override { return "idle"; }
  Decision Decide(const SchedulingContext&) override { return Decision::Idle(); }
};

// A worker as the core sees it: records what the core tells it; the test
// takes the batches from `sent` and answers them with OnBatchResult.
class FakeChannel final : public WorkerChannel {
 public:
  void OnRegistered(const std::string& assigned_name, Nanos heartbeat_interval) override {
    name = assigned_name;
    heartbeat = heartbeat_interval;
  }
  void Send(BatchPlan b) override {
    if (budgeted && resident.count(b.model) == 0) ++sent_not_resident;
    sent.push_back(std::move(b));
  }
  void Close(const absl::Status&) override { closed = true; }
  // Placement: the loads asked for (model, expected time) in order; what is
  // loading and resident (the test moves a model with FinishLoad before it
  // reports OnModelLoaded). Counts the core's mistakes: a batch for a model
  // not resident here, an unload of a model with a batch still unanswered
  // here (in `sent`), or of one not held.
  void Load(const std::string& model, Nanos expected) override {
    budgeted = true;
    loads.emplace_back(model, expected);
    loading.insert(model);
  }
  void Unload(const std::string& model) override {
    unloads.push_back(model);
    for (const BatchPlan& b : sent) {
      if (b.model == model) ++unloaded_in_flight, ++unloaded_in_flight_of[model];
    }
    if (loading.erase(model) + resident.erase(model) == 0) ++unloaded_not_held;
  }
  // The worker finished loading `model` (false: it was not loading it).
  bool FinishLoad(const std::string& model) {
    if (loading.erase(model) == 0) return false;
    resident.insert(model);
    return true;
  }

  std::string name;       // the name the core registered it under
  Nanos heartbeat = 0;    // the heartbeat interval it was told
  std::deque<BatchPlan> sent;
  bool closed = false;
  int32_t id = -1;        // the worker id RegisterWorker returned, if the test keeps it
  bool budgeted = false;  // set by the test (or the first Load): check residency on Send
  std::deque<std::pair<std::string, Nanos>> loads;
  std::vector<std::string> unloads;
  std::set<std::string> loading, resident;
  int sent_not_resident = 0;
  int unloaded_in_flight = 0;
  std::map<std::string, int> unloaded_in_flight_of;  // by model
  int unloaded_not_held = 0;
};

// A query's answer slot: counts the answers and keeps the last status.
// Given a clock and the query's deadline it also says whether the (last)
// answer was OK in time.
class FakeHandle final : public QueryHandle {
 public:
  FakeHandle() = default;
  FakeHandle(const Clock* clock, Nanos deadline) : clock_(clock), deadline_(deadline) {}
  void Deliver(QueryAnswer a) override {
    ++answers;
    status = a.status;
    if (clock_ != nullptr) answered_at = clock_->Now();
  }
  bool in_slo() const { return answers > 0 && status.ok() && answered_at <= deadline_; }

  int answers = 0;
  absl::Status status;
  Nanos answered_at = 0;

 private:
  const Clock* clock_ = nullptr;
  Nanos deadline_ = 0;
};

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_TEST_UTIL_SERVING_FAKES_H_
