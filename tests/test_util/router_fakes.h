#ifndef SUPERSERVE_TESTS_TEST_UTIL_ROUTER_FAKES_H_
#define SUPERSERVE_TESTS_TEST_UTIL_ROUTER_FAKES_H_

// Fakes of the router's gRPC-facing interfaces (a client's call, a worker's
// stream), shared by the tests that drive the Dispatcher and HotModels
// without a network.

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/tensor_codec.h"
#include "router/query_responder.h"
#include "router/worker_connection.h"
#include "superserve/v1/inference.pb.h"
#include "superserve/v1/worker.pb.h"

namespace superserve::testing {

// A client's call: a float32 input of `shape` (shape[0] values of 0.5) for
// `model`, tagged `application` when given; counts the answers and keeps the
// last status.
class FakeQuery : public QueryResponder {
 public:
  explicit FakeQuery(std::string model = "m", std::vector<int64_t> shape = {2},
                     std::string application = "") {
    request_.set_model(model);
    if (!application.empty()) request_.set_application(application);
    std::vector<float> v(shape.empty() ? 1 : shape[0], 0.5f);
    EncodeTensor(MakeFloatTensor(shape, v), request_.mutable_input());
  }
  const v1::InferRequest& request() const override { return request_; }
  v1::InferResponse* response() override { return &response_; }
  void Answer(const absl::Status& s) override {
    ++answers;
    status = s;
  }
  v1::InferRequest request_;
  v1::InferResponse response_;
  int answers = 0;
  absl::Status status;
};

// A worker's stream as the Dispatcher sees it (one thread at a time).
class FakeConnection : public WorkerConnection {
 public:
  void Send(std::unique_ptr<v1::RouterMessage> m) override { sent.push_back(std::move(m)); }
  void Close(const absl::Status& why) override { closed = true; }
  // Pops the next batch sent (skipping acks); nullptr when none.
  std::unique_ptr<v1::RouterMessage> NextBatch() {
    while (!sent.empty()) {
      auto m = std::move(sent.front());
      sent.pop_front();
      if (m->has_batch()) return m;
    }
    return nullptr;
  }
  std::deque<std::unique_ptr<v1::RouterMessage>> sent;
  bool closed = false;
};

// Records what the router would write to one worker's stream; safe to call
// from several threads (copies out under a lock).
class RecordingConnection final : public WorkerConnection {
 public:
  void Send(std::unique_ptr<v1::RouterMessage> m) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.push_back(*m);
  }
  void Close(const absl::Status&) override {}
  std::vector<v1::RouterMessage> sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }

 private:
  std::mutex mu_;
  std::vector<v1::RouterMessage> sent_;
};

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_TEST_UTIL_ROUTER_FAKES_H_
