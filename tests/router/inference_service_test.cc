// The router's gRPC Infer path in one process (RouterServer on 127.0.0.1,
// port chosen at run time): every call's reactor is deleted once the call
// completes, whether gRPC runs OnDone/OnCancel inline on its threads or on
// its executor (InferReactor::InternalInlineable), a client that gives up while its query
// is queued gets exactly one answer and its query never reaches a worker,
// and the load generator never sends a query more than its pacing slack
// ahead of its trace time. Over an InferStream every query gets exactly one
// answer, its own (matched by tag), bad ones an error naming the problem, and
// a cancelled stream's queued queries are answered without worker time. A
// huge timeout (timeout_us INT64_MAX, a gRPC deadline centuries ahead) is
// clamped, not overflowed into "deadline already passed".
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/model_repository.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"
#include "router/inference_service.h"
#include "router/open_inference_service.h"
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
  // RouterServerOptions::inline_call_completion (router/inference_service.h).
  virtual bool InlineCompletion() const { return true; }
  virtual void Configure(RouterServerOptions* o) const {}
  void SetUp() override {
    RouterServerOptions o;
    o.model_repo = EmulatedRepo();
    o.metrics_listen = "";
    o.inline_call_completion = InlineCompletion();
    Configure(&o);
    server_ = std::make_unique<RouterServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    address_ = "127.0.0.1:" + std::to_string(server_->port());
    worker_address_ = "127.0.0.1:" + std::to_string(server_->worker_port());
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<RouterServer> server_;
  std::string address_;
  std::string worker_address_;  // WorkerLink's own port
};

// An emulated worker inside the test process (RouterLink + EmulatedExecutor
// on a thread), stopped and joined however the test ends.
class InprocWorker {
 public:
  explicit InprocWorker(const std::string& address) {
    auto models = LoadModelRepository(EmulatedRepo());
    ok_ = models.ok();
    if (!ok_) return;
    for (const auto& m : *models) ok_ = ok_ && executor_.Load(m).ok();
    RouterLinkOptions lo;
    lo.router = address;
    lo.name = "inproc";
    lo.connect_timeout = Seconds(5);
    link_ = std::make_unique<RouterLink>(lo, &executor_, *models);
    thread_ = std::thread([this] { (void)link_->Run(); });
  }
  ~InprocWorker() {
    if (link_) link_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
  EmulatedExecutor executor_;
  std::unique_ptr<RouterLink> link_;
  std::thread thread_;
};

// The answer-once tests run with gRPC finishing calls inline and on its
// executor thread: exactly-once must not rest on the not-API hook that picks
// between them (a gRPC upgrade that changed its meaning fails here).
// The holding worker sends no heartbeats: liveness is off, so that however
// slow the host (TSan), the worker that holds the batch is never declared
// dead mid-test.
class AnswerOnceTest : public InferenceServiceTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool InlineCompletion() const override { return GetParam(); }
  void Configure(RouterServerOptions* o) const override {
    o->dispatcher.serving.missed_heartbeats = 0;
  }
};
// Under ThreadSanitizer only the inline mode runs: gRPC 1.51 hands OnDone to
// its executor thread through libgrpc's own queue, which is not instrumented,
// so TSan cannot see that OnCancel happened before OnDone and reports the
// reactor's deletion as a race. The ASan and Release stages run both modes.
#if defined(__SANITIZE_THREAD__)
#define SUPERSERVE_COMPLETION_MODES ::testing::Values(true)
#else
#define SUPERSERVE_COMPLETION_MODES ::testing::Bool()
#endif
INSTANTIATE_TEST_SUITE_P(CallCompletion, AnswerOnceTest, SUPERSERVE_COMPLETION_MODES,
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Inline" : "OnGrpcExecutor";
                         });

TEST_P(AnswerOnceTest, EveryCompletedCallDeletesItsReactor) {
  InprocWorker worker(worker_address_);
  ASSERT_TRUE(worker.ok());
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

// After the held batch returned: every one of `accepted` queries was
// answered, only that one batch ever reached the worker (the cancelled
// queries got no worker time), and every reactor is gone.
void ExpectAnsweredWithOneBatch(HoldingWorker& worker, int64_t accepted, RouterServer* server) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(worker.batches(), 1) << "a cancelled query reached the worker";
  DispatcherStats s = server->dispatcher()->Stats();
  EXPECT_EQ(s.accepted, accepted);
  EXPECT_EQ(s.answered, accepted);
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }))
      << InferenceService::LiveReactors() << " reactors left";
}

TEST_P(AnswerOnceTest, ClientThatGivesUpWhileQueuedGetsOneAnswerAndNoWorkerTime) {
  HoldingWorker worker(worker_address_);
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
  // Query 2 was cancelled while queued: the router's sweep answers it without
  // waiting for the busy worker.
  EXPECT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().pending == 1; }))
      << "query 2 should be swept while the worker still holds query 1";
  EXPECT_EQ(server_->dispatcher()->Stats().swept, 1);
  EXPECT_EQ(worker.batches(), 1);

  // The worker frees up: query 1 is answered; query 2 never reached it.
  ASSERT_TRUE(worker.Answer(0));
  ASSERT_TRUE(Eventually([&] { return done.load() == 2; }));
  EXPECT_TRUE(first_status.ok()) << first_status;
  EXPECT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().pending == 0; }));
  ExpectAnsweredWithOneBatch(worker, 2, server_.get());
  worker.Close();
}

// Cancellations while answers go out: gRPC runs OnCancel (clients whose
// deadline passed) on its threads while the dispatcher finishes other calls
// on its own. Phase 1 is deterministic: the worker holds its one batch, so
// every 50-ms call is cancelled while queued. In phase 2 the worker answers
// as batches come while 2-ms and 10-s calls arrive together; a 2-ms call may
// go either way, a 10-s one is served. Every call gets exactly one answer.
TEST_P(AnswerOnceTest, ACancellationStormAnswersEveryCallOnce) {
  HoldingWorker worker(worker_address_);
  ASSERT_TRUE(worker.Register());
  worker.StartReading();
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));
  InferenceClient client(address_);
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));

  constexpr int kPhase1 = 200, kPhase2 = 400, kCalls = 1 + kPhase1 + kPhase2;
  std::vector<std::atomic<int>> answers(kCalls);
  std::vector<absl::StatusCode> codes(kCalls, absl::StatusCode::kUnknown);
  std::atomic<int> done{0};
  auto send = [&](int i, Nanos timeout) {
    client.InferAsync(Request(0.001f * (i % 100)), timeout, [&, i](InferenceClient::Result r) {
      codes[i] = r.status.code();
      answers[i]++;
      done++;
    });
  };
  auto long_call = [](int i) { return i % 2 == 0; };

  send(0, Seconds(10));  // the batch the worker holds
  ASSERT_TRUE(Eventually([&] { return worker.batches() == 1; }));
  for (int i = 1; i <= kPhase1; ++i) send(i, long_call(i) ? Seconds(10) : Millis(50));
  ASSERT_TRUE(Eventually([&] { return done.load() == kPhase1 / 2; }, Seconds(20)));
  for (int i = 1; i <= kPhase1; ++i) {
    if (!long_call(i)) {
      EXPECT_EQ(codes[i], absl::StatusCode::kDeadlineExceeded) << "call " << i;
    }
  }
  EXPECT_EQ(worker.batches(), 1) << "a cancelled call reached the worker";

  std::atomic<bool> stop{false};
  std::thread answerer([&] {
    int next = 0;
    while (!stop.load()) {
      if (next < worker.batches()) {
        if (!worker.Answer(next++)) return;
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  });
  for (int i = kPhase1 + 1; i < kCalls; ++i) send(i, long_call(i) ? Seconds(10) : Millis(2));
  const bool all_done = Eventually([&] { return done.load() == kCalls; }, Seconds(30));
  stop = true;
  answerer.join();
  ASSERT_TRUE(all_done) << done.load() << " of " << kCalls << " calls answered";

  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(answers[i].load(), 1) << "call " << i;
    if (long_call(i)) {
      EXPECT_EQ(codes[i], absl::StatusCode::kOk) << "call " << i;
    } else {
      EXPECT_TRUE(codes[i] == absl::StatusCode::kOk ||
                  codes[i] == absl::StatusCode::kDeadlineExceeded)
          << "call " << i << ": " << absl::StatusCodeToString(codes[i]);
    }
  }
  int late = 0;
  for (int i = kPhase1 + 1; i < kCalls; ++i) late += codes[i] == absl::StatusCode::kDeadlineExceeded;
  RecordProperty("phase2_deadline_exceeded", late);
  EXPECT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().pending == 0; }));
  DispatcherStats s = server_->dispatcher()->Stats();
  EXPECT_EQ(s.accepted, s.answered);
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }))
      << InferenceService::LiveReactors() << " reactors left";
  worker.Close();
}

TEST_F(InferenceServiceTest, StreamAnswersEveryQueryOnceWithItsOwnOutput) {
  InprocWorker worker(worker_address_);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));
  // Reference outputs over unary calls: the emulated worker's output is a
  // hash of the input, so each input has its own.
  constexpr int kInputs = 40, kQueries = 400;
  std::vector<std::shared_ptr<v1::InferRequest>> requests;
  std::vector<std::vector<float>> expected;
  {
    InferenceClient unary(address_);
    ASSERT_TRUE(unary.WaitForConnected(Seconds(5)));
    for (int i = 0; i < kInputs; ++i) {
      requests.push_back(Request(0.01f * i));
      auto r = unary.Infer(*requests.back(), Seconds(5));
      ASSERT_TRUE(r.ok()) << r.status();
      auto out = TensorToFloats(DecodeTensor(r->output()).value());
      ASSERT_TRUE(out.ok());
      expected.push_back(*out);
    }
  }
  ASSERT_NE(expected[0], expected[1]) << "the check below needs distinct outputs";
  auto unknown = std::make_shared<v1::InferRequest>(*requests[0]);
  unknown->set_model("no-such-model");
  auto truncated = std::make_shared<v1::InferRequest>(*requests[0]);
  truncated->mutable_input()->mutable_data()->resize(100);

  std::vector<absl::Status> status(kQueries, absl::UnknownError("unanswered"));
  std::vector<std::vector<float>> got(kQueries);
  std::vector<int> answers(kQueries, 0);
  {
    InferenceClient stream(address_, Transport::kStream);
    ASSERT_TRUE(stream.WaitForConnected(Seconds(5)));
    absl::Mutex mu;
    for (int i = 0; i < kQueries; ++i) {
      std::shared_ptr<const v1::InferRequest> req = requests[i % kInputs];
      if (i == 100) req = unknown;
      if (i == 200) req = truncated;
      stream.InferAsync(req, Seconds(5), [&, i](InferenceClient::Result r) {
        absl::MutexLock lock(&mu);
        ++answers[i];
        status[i] = r.status;
        if (r.status.ok()) {
          auto t = DecodeTensor(r.response.output());
          if (t.ok()) got[i] = TensorToFloats(*t).value_or(std::vector<float>());
        }
      });
    }
    // Leaving the scope closes the stream once every query is answered.
  }
  for (int i = 0; i < kQueries; ++i) {
    ASSERT_EQ(answers[i], 1) << "query " << i;
    if (i == 100) {
      EXPECT_EQ(status[i].code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(status[i].message()), ::testing::HasSubstr("unknown model"));
    } else if (i == 200) {
      EXPECT_EQ(status[i].code(), absl::StatusCode::kInvalidArgument) << status[i];
    } else {
      ASSERT_TRUE(status[i].ok()) << "query " << i << ": " << status[i];
      EXPECT_EQ(got[i], expected[i % kInputs]) << "query " << i << " got another query's answer";
    }
  }
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }))
      << InferenceService::LiveReactors() << " reactors left";
  DispatcherStats s = server_->dispatcher()->Stats();
  EXPECT_EQ(s.accepted, s.answered);
  EXPECT_EQ(s.accepted, kInputs + kQueries - 2);
}

// A request the router cannot parse (here a proto3 string that is not UTF-8,
// which C++ protobuf serializes with only a logged error) is INVALID_ARGUMENT
// saying so, on both protocols. gRPC's typed callback methods answered a
// unary one UNIMPLEMENTED with no message, and ended a stream's reads as if
// the client had closed its side: the stream finished OK and the queries of
// that message, and of every later one, were never answered.
inference::ModelInferRequest OipRequest(const std::string& id) {
  inference::ModelInferRequest req;
  req.set_model_name("emu");
  req.set_id(id);
  auto* in = req.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (int64_t d : {1, 1, 28, 28}) in->add_shape(d);
  const std::vector<float> pixels(28 * 28, 0.5f);
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(pixels.data()),
                                         pixels.size() * sizeof(float)));
  return req;
}

TEST_F(InferenceServiceTest, AnUnparsableRequestIsInvalidArgumentOnBothProtocols) {
  InprocWorker worker(worker_address_);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));
  const std::string not_utf8 = "\xff\xfe\xfd";
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = v1::Inference::NewStub(channel);
  auto oip = inference::GRPCInferenceService::NewStub(channel);
  {
    v1::InferRequest bad = *Request(0.5f);
    bad.set_application(not_utf8);
    grpc::ClientContext ctx;
    v1::InferResponse resp;
    const grpc::Status s = stub->Infer(&ctx, bad, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(),
                ::testing::HasSubstr("not a valid superserve.v1.InferRequest"));
  }
  {
    inference::ModelInferRequest bad = OipRequest(not_utf8);
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    const grpc::Status s = oip->ModelInfer(&ctx, bad, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(),
                ::testing::HasSubstr("not a valid inference.ModelInferRequest"));
  }
  {  // InferStream: message 1 (tags 1, 2) answered, message 2 ends the call
    auto message = [&](std::vector<uint64_t> tags, const std::string& application) {
      v1::InferStreamRequest m;
      for (uint64_t t : tags) {
        v1::StreamQuery* q = m.add_queries();
        q->set_tag(t);
        q->set_timeout_us(5'000'000);
        *q->mutable_request() = *Request(0.5f);
        q->mutable_request()->set_application(application);
      }
      return m;
    };
    grpc::ClientContext ctx;
    auto stream = stub->InferStream(&ctx);
    ASSERT_TRUE(stream->Write(message({1, 2}, "")));
    stream->Write(message({3, 4}, not_utf8));
    stream->Write(message({5, 6}, ""));
    stream->WritesDone();
    std::vector<uint64_t> answered;
    v1::InferStreamResponse resp;
    while (stream->Read(&resp)) {
      for (const auto& a : resp.answers()) {
        EXPECT_EQ(a.code(), 0) << a.message();
        answered.push_back(a.tag());
      }
    }
    const grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(),
                ::testing::HasSubstr("message 2 is not a valid superserve.v1.InferStreamRequest"));
    EXPECT_THAT(answered, ::testing::UnorderedElementsAre(1, 2));
  }
  {  // ModelStreamInfer: the same
    // 5 s, as the native stream's queries above: under the router's default
    // SLO (100 ms) whether "a" was served in time depended on how fast the
    // host ran (under TSan on a busy host it was dropped as infeasible).
    auto timed = [](inference::ModelInferRequest r) {
      (*r.mutable_parameters())["timeout"].set_int64_param(5'000'000);
      return r;
    };
    grpc::ClientContext ctx;
    auto stream = oip->ModelStreamInfer(&ctx);
    ASSERT_TRUE(stream->Write(timed(OipRequest("a"))));
    stream->Write(timed(OipRequest(not_utf8)));
    stream->Write(timed(OipRequest("c")));
    stream->WritesDone();
    std::vector<std::string> answered;
    inference::ModelStreamInferResponse resp;
    while (stream->Read(&resp)) {
      EXPECT_EQ(resp.error_message(), "");
      answered.push_back(resp.infer_response().id());
    }
    const grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(),
                ::testing::HasSubstr("message 2 is not a valid inference.ModelInferRequest"));
    EXPECT_THAT(answered, ::testing::ElementsAre("a"));
  }
  // Still serving; every reactor gone, every accepted query answered.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::InferResponse resp;
    EXPECT_TRUE(stub->Infer(&ctx, *Request(0.5f), &resp).ok());
  }
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }))
      << InferenceService::LiveReactors() << " reactors left";
  const DispatcherStats st = server_->dispatcher()->Stats();
  EXPECT_EQ(st.accepted, st.answered);
  EXPECT_EQ(st.accepted, 4);
}

// One caller's query with an application that is not UTF-8 (C++ protobuf
// sends it) made the router end the stream it shared with everyone else's
// queries: they failed too. The client now refuses that one query unsent.
TEST_F(InferenceServiceTest, ANonUtf8QueryFailsAloneOnASharedStream) {
  InprocWorker worker(worker_address_);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));
  InferenceClient client(address_, Transport::kStream);
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  constexpr int kGood = 200;
  absl::Mutex mu;
  int ok = 0, answers = 0;
  absl::Status bad_status;
  auto good = Request(0.25f);
  for (int i = 0; i < kGood; ++i) {
    if (i == 5) {
      auto bad = std::make_shared<v1::InferRequest>(*good);
      bad->set_application("\xff\xfe");
      client.InferAsync(bad, Seconds(5), [&](InferenceClient::Result r) {
        absl::MutexLock lock(&mu);
        bad_status = r.status;
      });
    }
    client.InferAsync(good, Seconds(5), [&](InferenceClient::Result r) {
      absl::MutexLock lock(&mu);
      ++answers;
      if (r.status.ok()) ++ok;
    });
  }
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return answers == kGood;
  }, Seconds(20)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ok, kGood);
  EXPECT_EQ(bad_status.code(), absl::StatusCode::kInvalidArgument) << bad_status;
  EXPECT_THAT(std::string(bad_status.message()), ::testing::HasSubstr("not valid UTF-8"));
}

// An answer quotes what the client sent (an unknown model's name, an OIP id)
// at most kMaxWireMessageBytes of it: a 1 MiB name came back whole, so a
// stream that did not read held --max_stream_unsent_answers such answers
// (+430 MiB for 400), and a unary call's error overflowed the client's
// metadata limit (RESOURCE_EXHAUSTED instead of INVALID_ARGUMENT).
TEST_F(InferenceServiceTest, AnswersQuoteAtMostAKibOfWhatTheClientSent) {
  InprocWorker worker(worker_address_);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Inference::NewStub(channel);
  auto oip = inference::GRPCInferenceService::NewStub(channel);
  const std::string huge(1 << 20, 'm');
  v1::InferRequest unknown = *Request(0.5f);
  unknown.set_model(huge);
  {
    grpc::ClientContext ctx;
    v1::InferResponse resp;
    const grpc::Status s = stub->Infer(&ctx, unknown, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("unknown model \"mmm"));
    EXPECT_LE(s.error_message().size(), kMaxWireMessageBytes);
  }
  {
    grpc::ClientContext ctx;
    auto stream = stub->InferStream(&ctx);
    v1::InferStreamRequest m;
    m.add_queries()->set_tag(7);
    *m.mutable_queries(0)->mutable_request() = unknown;
    ASSERT_TRUE(stream->Write(m));
    stream->WritesDone();
    v1::InferStreamResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    ASSERT_EQ(resp.answers_size(), 1);
    EXPECT_EQ(resp.answers(0).code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_THAT(resp.answers(0).message(), ::testing::HasSubstr("unknown model \"mmm"));
    EXPECT_LE(resp.ByteSizeLong(), 2 * kMaxWireMessageBytes);
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    const grpc::Status s = oip->ModelInfer(&ctx, OipRequest(huge), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("id of 1048576 bytes exceeds the limit"));
  }
  {
    grpc::ClientContext ctx;
    auto stream = oip->ModelStreamInfer(&ctx);
    inference::ModelInferRequest bad_model = OipRequest("q");
    bad_model.set_model_name(huge);
    ASSERT_TRUE(stream->Write(OipRequest(huge)));
    ASSERT_TRUE(stream->Write(bad_model));
    stream->WritesDone();
    inference::ModelStreamInferResponse resp;
    int answers = 0;
    while (stream->Read(&resp)) {
      ++answers;
      EXPECT_NE(resp.error_message(), "");
      EXPECT_LE(resp.ByteSizeLong(), 3 * kMaxWireMessageBytes);
    }
    EXPECT_EQ(answers, 2);
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest req;
    req.set_name(huge);
    inference::ModelMetadataResponse resp;
    const grpc::Status s = oip->ModelMetadata(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_LE(s.error_message().size(), kMaxWireMessageBytes);
  }
}

// A client may send any timeout_us, INT64_MAX included (a stand-in for "no
// deadline"): it is clamped (kMaxQueryTimeout), not overflowed into a
// deadline already passed, so the query is served. timeout_us 0 still means
// the router's default SLO. Likewise a unary call whose gRPC deadline lies
// centuries ahead.
TEST_F(InferenceServiceTest, HugeTimeoutsAreClampedAndServed) {
  InprocWorker worker(worker_address_);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));

  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = v1::Inference::NewStub(channel);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = stub->InferStream(&context);
    v1::InferStreamRequest m;
    const int64_t timeouts[] = {std::numeric_limits<int64_t>::max(),
                                std::numeric_limits<int64_t>::max() / 1000 + 1, 0};
    for (uint64_t tag = 0; tag < 3; ++tag) {
      v1::StreamQuery* q = m.add_queries();
      q->set_tag(tag);
      q->set_timeout_us(timeouts[tag]);
      *q->mutable_request() = *Request(0.1f * tag);
    }
    ASSERT_TRUE(stream->Write(m));
    ASSERT_TRUE(stream->WritesDone());
    std::vector<int> answers(3, 0);
    v1::InferStreamResponse r;
    while (stream->Read(&r)) {
      for (const v1::InferAnswer& a : r.answers()) {
        ASSERT_LT(a.tag(), 3u);
        ++answers[a.tag()];
        EXPECT_EQ(a.code(), 0) << "timeout_us " << timeouts[a.tag()] << ": " << a.message();
        EXPECT_TRUE(a.response().has_output()) << "timeout_us " << timeouts[a.tag()];
      }
    }
    EXPECT_TRUE(stream->Finish().ok());
    EXPECT_THAT(answers, ::testing::ElementsAre(1, 1, 1));
  }
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(24 * 365 * 200));
    v1::InferResponse response;
    grpc::Status s = stub->Infer(&context, *Request(0.5f), &response);
    EXPECT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
    EXPECT_TRUE(response.has_output());
  }
  DispatcherStats s = server_->dispatcher()->Stats();
  EXPECT_EQ(s.accepted, 4);
  EXPECT_EQ(s.answered, 4);
}

TEST_F(InferenceServiceTest, CancelledStreamAnswersItsQueuedQueriesWithoutWorkerTime) {
  HoldingWorker worker(worker_address_);
  ASSERT_TRUE(worker.Register());
  worker.StartReading();
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().workers_alive == 1; }));

  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = v1::Inference::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->InferStream(&context);
  auto send = [&](std::vector<uint64_t> tags) {
    v1::InferStreamRequest m;
    for (uint64_t tag : tags) {
      v1::StreamQuery* q = m.add_queries();
      q->set_tag(tag);
      q->set_timeout_us(10'000'000);
      *q->mutable_request() = *Request(0.1f * tag);
    }
    return stream->Write(m);
  };
  // Query 1 occupies the only worker (lookahead 1); 2 and 3 (one message) queue.
  ASSERT_TRUE(send({1}));
  ASSERT_TRUE(Eventually([&] { return worker.batches() == 1; }));
  ASSERT_TRUE(send({2, 3}));
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().pending == 3; }));
  // The client goes away.
  context.TryCancel();
  (void)stream->Finish();
  ASSERT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().cancelled == 2; }))
      << "the router did not see the stream's cancellation";

  // 2 and 3 are answered by the sweep (nobody listens), never dispatched.
  ASSERT_TRUE(worker.Answer(0));
  EXPECT_TRUE(Eventually([&] { return server_->dispatcher()->Stats().pending == 0; }));
  ExpectAnsweredWithOneBatch(worker, 3, server_.get());
  worker.Close();
}

// A stream client that sends but never reads is cut off at
// max_stream_unsent_answers (RESOURCE_EXHAUSTED naming the bound), and its
// reactor still goes away once the client ends the call.
TEST(InferStreamBound, ANeverReadingStreamIsCutOffAndItsReactorDeleted) {
  RouterServerOptions o;
  o.model_repo = EmulatedRepo();
  o.metrics_listen = "";
  o.max_stream_unsent_answers = 32;
  RouterServer server(o);
  ASSERT_TRUE(server.Start().ok());
  InprocWorker worker("127.0.0.1:" + std::to_string(server.worker_port()));
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(Eventually([&] { return server.dispatcher()->Stats().workers_alive == 1; }));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server.port()),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Inference::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->InferStream(&ctx);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> sent{0};
  std::thread writer([&] {
    v1::InferStreamRequest m;
    for (int i = 0; i < 8; ++i) {
      auto* q = m.add_queries();
      q->set_timeout_us(2'000'000);
      *q->mutable_request() = *Request(0.5f);
    }
    while (!stop && sent < 50000) {
      for (auto& q : *m.mutable_queries()) q.set_tag(sent++);
      if (!stream->Write(m)) break;
    }
  });
  // Give it time to fill the window and pile answers up; then read.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  v1::InferStreamResponse resp;
  int64_t answers = 0;
  while (stream->Read(&resp)) answers += resp.answers_size();
  stop = true;
  writer.join();
  const grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("--max_stream_unsent_answers=32"));
  EXPECT_LT(answers, sent.load());
  EXPECT_TRUE(Eventually([] { return InferenceService::LiveReactors() == 0; }))
      << InferenceService::LiveReactors() << " reactors left";
  // Every query the router accepted was answered (the cut-off stream's
  // answers dropped), and the router still serves.
  EXPECT_TRUE(Eventually([&] {
    const DispatcherStats st = server.dispatcher()->Stats();
    return st.pending == 0 && st.answered == st.accepted;
  }));
  InferenceClient client("127.0.0.1:" + std::to_string(server.port()));
  EXPECT_TRUE(client.Infer(*Request(0.5f), Seconds(5)).ok());
  server.Shutdown();
}

// The same bound on the Open Inference Protocol's ModelStreamInfer.
TEST(InferStreamBound, ANeverReadingOipStreamIsCutOffToo) {
  RouterServerOptions o;
  o.model_repo = EmulatedRepo();
  o.metrics_listen = "";
  o.max_stream_unsent_answers = 32;
  RouterServer server(o);
  ASSERT_TRUE(server.Start().ok());
  InprocWorker worker("127.0.0.1:" + std::to_string(server.worker_port()));
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(Eventually([&] { return server.dispatcher()->Stats().workers_alive == 1; }));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server.port()),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->ModelStreamInfer(&ctx);
  const inference::ModelInferRequest req = OipRequest("");
  std::atomic<bool> stop{false};
  std::atomic<int64_t> sent{0};
  std::thread writer([&] {
    while (!stop && sent < 50000) {
      ++sent;
      if (!stream->Write(req)) break;
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  inference::ModelStreamInferResponse resp;
  int64_t answers = 0;
  while (stream->Read(&resp)) ++answers;
  stop = true;
  writer.join();
  const grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("--max_stream_unsent_answers=32"));
  EXPECT_LT(answers, sent.load());
  EXPECT_TRUE(Eventually([&] {
    const DispatcherStats st = server.dispatcher()->Stats();
    return st.pending == 0 && st.answered == st.accepted;
  }));
  server.Shutdown();
}

}  // namespace
}  // namespace superserve
