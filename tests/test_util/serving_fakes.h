#ifndef SUPERSERVE_TESTS_TEST_UTIL_SERVING_FAKES_H_
#define SUPERSERVE_TESTS_TEST_UTIL_SERVING_FAKES_H_

// Fakes of the serving core's two interfaces, shared by the tests that drive
// ServingCore directly (and the serving-core fuzzer). No gRPC, no torch.

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/time.h"
#include "serving/batch.h"
#include "serving/query_handle.h"
#include "serving/worker_channel.h"

namespace superserve::testing {

// A worker as the core sees it: records what the core tells it; the test
// takes the batches from `sent` and answers them with OnBatchResult.
class FakeChannel final : public WorkerChannel {
 public:
  void OnRegistered(const std::string& assigned_name, Nanos heartbeat_interval) override {
    name = assigned_name;
    heartbeat = heartbeat_interval;
  }
  void Send(BatchPlan b) override { sent.push_back(std::move(b)); }
  void Close(const absl::Status&) override { closed = true; }

  std::string name;       // the name the core registered it under
  Nanos heartbeat = 0;    // the heartbeat interval it was told
  std::deque<BatchPlan> sent;
  bool closed = false;
  int32_t id = -1;        // the worker id RegisterWorker returned, if the test keeps it
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
