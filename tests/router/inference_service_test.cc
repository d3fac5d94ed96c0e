// The router's gRPC Infer path in one process (RouterServer on 127.0.0.1,
// port chosen at run time): every call's reactor is deleted once the call
// completes (Infer reactors run OnDone/OnCancel inline on gRPC's threads,
// InferReactor::InternalInlineable), a client that gives up while its query
// is queued gets exactly one answer and its query never reaches a worker,
// and the load generator never sends a query more than its pacing slack
// ahead of its trace time.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/model_repository.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"
#include "router/inference_service.h"
#include "router/router_server.h"
#include "superserve/v1/worker.grpc.pb.h"
#include "tests/router/engine_test_util.h"
#include "worker/emulated_executor.h"
#include "worker/router_link.h"

namespace superserve {
namespace {

using testing::EmulatedRepo;
using testing::PoissonTrace;

std::shared_ptr<v1::InferRequest> Request(float value) {
  auto req = std::make_shared<v1::InferRequest>();
  req->set_model("emu");
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, value)),
               req->mutable_input());
  return req;
}

// Waits up to `timeout` for `pred`.
template <typename P>
bool Eventually(P pred, Nanos timeout = Seconds(5)) {
  const Nanos end = RealClock::Get()->Now() + timeout;
  while (RealClock::Get()->Now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

class InferenceServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RouterServerOptions o;
    o.model_repo = EmulatedRepo();
    o.metrics_listen = "";
    server_ = std::make_unique<RouterServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<RouterServer> server_;
  std::string address_;
};

TEST_F(InferenceServiceTest, EveryCompletedCallDeletesItsReactor) {
  auto models = LoadModelRepository(EmulatedRepo());
  ASSERT_TRUE(models.ok()) << models.status();
  EmulatedExecutor executor;
  for (const auto& m : *models) ASSERT_TRUE(executor.Load(m).ok());
  RouterLinkOptions lo;
  lo.router = address_;
  lo.name = "inproc";
  lo.connect_timeout = Seconds(5);
  RouterLink link(lo, &executor, *models);
  std::thread worker([&] { (void)link.Run(); });
  // Stops and joins the link however the test ends (a failed ASSERT
  // returns early; a joinable std::thread would terminate the process).
  struct StopLink {
    RouterLink* link;
    std::thread* thread;
    ~StopLink() {
      link->Stop();
      if (thread->joinable()) thread->join();
    }
  } stop_link{&link, &worker};
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));

  InferenceClient client(address_);
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  constexpr int kCalls = 300;
  std::atomic<int> ok{0}, done{0};
  for (int i = 0; i < kCalls; ++i) {
    client.InferAsync(Request(i * 0.001f), Seconds(5), [&](InferenceClient::Result r) {
      if (r.status.ok()) ok++;
      done++;
    });
  }
  ASSERT_TRUE(Eventually([&] { return done.load() == kCalls; }, Seconds(20)));
  EXPECT_EQ(ok.load(), kCalls);
  // OnDone runs after the status went out; every reactor goes away.
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }))
      << InferenceService::LiveReactors() << " reactors left";
  DispatcherStats s = server_->dispatcher()->Stats();
  EXPECT_EQ(s.accepted, kCalls);
  EXPECT_EQ(s.answered, kCalls);

  // The load generator paces by sleeping; it may send up to 100 us early
  // (plus scheduling noise), never later than it can help.
  LabelledRequests inputs;
  inputs.requests.push_back(Request(0.5f));
  inputs.labels.push_back(0);
  auto trace = PoissonTrace(400, 2000);
  ReplayOptions ro;
  ro.progress = false;
  ro.default_slo = Seconds(2);
  auto records = ReplayTrace(client, trace, inputs, ro);
  ASSERT_TRUE(records.ok());
  for (size_t i = 0; i < records->size(); ++i) {
    EXPECT_GE((*records)[i].sent, trace[i].arrival - Micros(150)) << "query " << i << " sent early";
    EXPECT_EQ((*records)[i].code, absl::StatusCode::kOk);
  }
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }));
}

// A worker that registers, keeps the first batch it gets, and answers it
// only when told to.
class HoldingWorker {
 public:
  explicit HoldingWorker(const std::string& address)
      : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        stub_(v1::WorkerLink::NewStub(channel_)),
        stream_(stub_->Connect(&context_)) {}

  bool Register() {
    v1::WorkerMessage hello;
    hello.mutable_register_()->set_worker_id("holding");
    hello.mutable_register_()->add_models("emu");
    hello.mutable_register_()->set_emulated(true);
    v1::RouterMessage ack;
    return stream_->Write(hello) && stream_->Read(&ack) && ack.has_ack();
  }
  // Reads messages in the background, counting batches.
  void StartReading() {
    reader_ = std::thread([this] {
      v1::RouterMessage m;
      while (stream_->Read(&m)) {
        if (!m.has_batch()) continue;
        absl::MutexLock lock(&mu_);
        batches_.push_back(m.batch());
      }
    });
  }
  int batches() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(batches_.size());
  }
  int queries_in(int batch) {
    absl::MutexLock lock(&mu_);
    return batches_[batch].queries_size();
  }
  // Answers batch `i` with one 10-class output per query.
  bool Answer(int i) {
    v1::WorkerMessage reply;
    {
      absl::MutexLock lock(&mu_);
      const v1::Batch& b = batches_[i];
      v1::BatchResult* r = reply.mutable_result();
      r->set_batch_id(b.batch_id());
      r->set_exec_us(1000);
      for (const auto& q : b.queries()) {
        auto* out = r->add_results();
        out->set_query_id(q.query_id());
        EncodeTensor(MakeFloatTensor({10}, std::vector<float>(10, 0.f)), out->mutable_output());
      }
    }
    return stream_->Write(reply);
  }
  void Close() {
    context_.TryCancel();
    if (reader_.joinable()) reader_.join();
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerLink::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::RouterMessage>> stream_;
  std::thread reader_;

 public:
  ~HoldingWorker() { Close(); }

 private:
  absl::Mutex mu_;
  std::vector<v1::Batch> batches_;
};

TEST_F(InferenceServiceTest, ClientThatGivesUpWhileQueuedGetsOneAnswerAndNoWorkerTime) {
  HoldingWorker worker(address_);
  ASSERT_TRUE(worker.Register());
  worker.StartReading();
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));

  InferenceClient client(address_);
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  // Query 1 occupies the only worker (lookahead 1) ...
  std::atomic<int> done{0};
  absl::Status first_status = absl::UnknownError("unset"), second_status = absl::UnknownError("unset");
  client.InferAsync(Request(0.1f), Seconds(10), [&](InferenceClient::Result r) {
    first_status = r.status;
    done++;
  });
  ASSERT_TRUE(Eventually([&] { return worker.batches() == 1; }));
  // ... so query 2 waits in the queue until its client gives up (150 ms).
  client.InferAsync(Request(0.2f), Millis(150), [&](InferenceClient::Result r) {
    second_status = r.status;
    done++;
  });
  ASSERT_TRUE(Eventually([&] { return done.load() == 1; }));
  EXPECT_EQ(second_status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(server_->dispatcher()->Stats().pending, 2) << "query 2 is queued, marked cancelled";

  // The worker frees up: query 2 is answered, not dispatched.
  ASSERT_TRUE(worker.Answer(0));
  ASSERT_TRUE(Eventually([&] { return done.load() == 2; }));
  EXPECT_TRUE(first_status.ok()) << first_status;
  EXPECT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().pending == 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(worker.batches(), 1) << "the cancelled query reached the worker";
  DispatcherStats s = server_->dispatcher()->Stats();
  EXPECT_EQ(s.accepted, 2);
  EXPECT_EQ(s.answered, 2);
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }));
  worker.Close();
}

}  // namespace
}  // namespace superserve
