// The client library: transport names, how the stream transport splits a
// backlog of queries into messages, and what the stream transport answers
// when its router dies or restarts (against an in-process stand-in).
#include "router/client/inference_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "superserve/v1/inference.grpc.pb.h"

namespace superserve {
namespace {

TEST(InferenceClientTest, ParsesTransportNames) {
  EXPECT_EQ(ParseTransport("unary").value(), Transport::kUnary);
  EXPECT_EQ(ParseTransport("stream").value(), Transport::kStream);
  auto bad = ParseTransport("udp");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("udp"), absl::string_view::npos);
}

// Strings the router could not parse are refused unsent, on both transports
// (no router needed: a refused query is answered at once); valid UTF-8 of
// every length goes out (here to no router: UNAVAILABLE).
TEST(InferenceClientTest, NonUtf8ModelOrApplicationIsRefusedUnsent) {
  for (Transport t : {Transport::kUnary, Transport::kStream}) {
    InferenceClient client("127.0.0.1:1", t);
    auto status_of = [&](const std::string& model, const std::string& application) {
      auto req = std::make_shared<v1::InferRequest>();
      req->set_model(model);
      req->set_application(application);
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      absl::Status status;
      client.InferAsync(req, std::chrono::nanoseconds(std::chrono::seconds(2)).count(),
                        [&](InferenceClient::Result r) {
                          std::lock_guard<std::mutex> lock(mu);
                          status = r.status;
                          done = true;
                          cv.notify_all();
                        });
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done; });
      return status;
    };
    for (const char* bad : {"\xff", "\xc0\xaf" /* overlong */, "\xed\xa0\x80" /* surrogate */,
                            "\xf4\x90\x80\x80" /* > U+10FFFF */, "\xe4\xb8" /* cut */}) {
      const absl::Status app = status_of("emu", bad);
      EXPECT_EQ(app.code(), absl::StatusCode::kInvalidArgument) << app;
      EXPECT_NE(app.message().find("application is not valid UTF-8"), std::string::npos) << app;
      const absl::Status model = status_of(bad, "");
      EXPECT_NE(model.message().find("model is not valid UTF-8"), std::string::npos) << model;
    }
    for (const char* good : {"", "camera", "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"}) {
      EXPECT_EQ(status_of("emu", good).code(), absl::StatusCode::kUnavailable) << good;
    }
  }
}

TEST(InferenceClientTest, BacklogGoesOutInMessagesOfBoundedSize) {
  const std::vector<size_t> none;
  EXPECT_EQ(QueriesPerMessage(none, 100), 0u);
  // Everything fits: one message.
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{10, 20, 30}, 100), 3u);
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{40, 60}, 100), 2u);  // exactly full
  // A prefix that fits; the rest waits for the next message.
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{40, 40, 40, 5}, 100), 2u);
  // A query larger than the limit still goes, alone.
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{500, 10}, 100), 1u);
  // A 1 MB-per-query backlog of 70 under the 4 MB limit: 4 per message.
  std::vector<size_t> big(70, 1 << 20);
  EXPECT_EQ(QueriesPerMessage(big, 4 << 20), 4u);
}

// A router stand-in for the stream transport, on 127.0.0.1 (`port` 0: any):
// answers each query OK as it arrives, or, with `hold_odd`, only those with
// an even tag (the odd ones wait, as behind a slow worker) until it is
// killed.
class StreamRouterStandIn final : public v1::Inference::Service {
 public:
  explicit StreamRouterStandIn(bool hold_odd, int port = 0) : hold_odd_(hold_odd) {
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~StreamRouterStandIn() override { Kill(); }
  int port() const { return port_; }
  int received() const { return received_.load(); }
  // What a SIGKILLed router does to its clients: every stream is cut with no
  // answer for what it held, and nothing listens on the port any more.
  void Kill() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }

  grpc::Status InferStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::InferStreamResponse, v1::InferStreamRequest>* stream) override {
    v1::InferStreamRequest in;
    while (stream->Read(&in)) {
      v1::InferStreamResponse out;
      for (const auto& q : in.queries()) {
        ++received_;
        if (hold_odd_ && q.tag() % 2 == 1) continue;
        v1::InferAnswer* a = out.add_answers();
        a->set_tag(q.tag());
        a->set_code(0);
      }
      if (out.answers_size() > 0 && !stream->Write(out)) break;
    }
    return grpc::Status::OK;
  }

 private:
  const bool hold_odd_;
  int port_ = 0;
  std::atomic<int> received_{0};
  std::unique_ptr<grpc::Server> server_;
};

// Every callback of every query, by query number.
class AnswerBook {
 public:
  InferenceClient::Callback For(int query) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (static_cast<int>(answers_.size()) <= query) answers_.resize(query + 1);
    }
    return [this, query](InferenceClient::Result r) {
      std::lock_guard<std::mutex> lock(mu_);
      answers_[query].push_back(r.status);
      cv_.notify_all();
    };
  }
  // Waits until queries [0, n) have at least one answer each.
  bool WaitAnswered(int n, std::chrono::seconds patience) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, patience, [&] {
      if (static_cast<int>(answers_.size()) < n) return false;
      for (int i = 0; i < n; ++i) {
        if (answers_[i].empty()) return false;
      }
      return true;
    });
  }
  int Unanswered(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    int missing = 0;
    for (int i = 0; i < n; ++i)
      missing += i >= static_cast<int>(answers_.size()) || answers_[i].empty();
    return missing;
  }
  std::vector<absl::Status> Of(int query) {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_[query];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<absl::Status>> answers_;
};

std::shared_ptr<const v1::InferRequest> StandInRequest() {
  auto r = std::make_shared<v1::InferRequest>();
  r->set_model("m");
  return r;
}

// A router killed mid-stream: the queries it held, and every query sent
// after, get exactly one answer, UNAVAILABLE, saying the stream to the router
// ended. (The stream kept a hold that only the client's Close gave back, so
// OnDone never ran: 10 of the first 20 and all 20 later queries waited
// forever, as 599 of 600 did in superserve-loadgen --transport stream.)
TEST(InferenceClientStreamTest, EveryQueryIsAnsweredOnceWhenTheRouterDiesMidStream) {
  constexpr int kBefore = 20, kAfter = 20;
  auto router = std::make_unique<StreamRouterStandIn>(/*hold_odd=*/true);
  AnswerBook book;
  {
    InferenceClient client(absl::StrCat("127.0.0.1:", router->port()), Transport::kStream);
    for (int i = 0; i < kBefore; ++i) client.InferAsync(StandInRequest(), Seconds(30), book.For(i));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (router->received() < kBefore && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(router->received(), kBefore);
    router->Kill();
    for (int i = kBefore; i < kBefore + kAfter; ++i) {
      client.InferAsync(StandInRequest(), Seconds(30), book.For(i));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    // Well before the queries' own 30-s deadlines.
    EXPECT_TRUE(book.WaitAnswered(kBefore + kAfter, std::chrono::seconds(10)))
        << book.Unanswered(kBefore + kAfter) << " of " << kBefore + kAfter
        << " queries unanswered 10 s after the router died";
  }  // the client closes: nothing more may arrive
  int ok = 0, unavailable = 0;
  for (int i = 0; i < kBefore + kAfter; ++i) {
    const std::vector<absl::Status> got = book.Of(i);
    ASSERT_EQ(got.size(), 1u) << "query " << i << " answered " << got.size() << " times";
    if (got[0].ok()) {
      ++ok;
      EXPECT_LT(i, kBefore) << "query " << i << " answered OK by a dead router";
      continue;
    }
    ++unavailable;
    EXPECT_EQ(got[0].code(), absl::StatusCode::kUnavailable) << "query " << i << ": " << got[0];
    EXPECT_NE(got[0].message().find("stream to the router ended"), absl::string_view::npos)
        << got[0];
  }
  EXPECT_EQ(ok, kBefore / 2);  // the even tags, answered before the kill
  EXPECT_EQ(unavailable, kBefore / 2 + kAfter);
}

// After a router restart on the same address the stream client serves again:
// the dead stream is replaced by a new one, as a unary call reconnects.
TEST(InferenceClientStreamTest, ARestartedRouterIsUsedAgain) {
  auto router = std::make_unique<StreamRouterStandIn>(/*hold_odd=*/false);
  const int port = router->port();
  // Reconnect within 100 ms (gRPC's default backoff starts at a second).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  AnswerBook book;
  int sent = 0;
  {
    InferenceClient client(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                     grpc::InsecureChannelCredentials(), args),
                           Transport::kStream);
    client.InferAsync(StandInRequest(), Seconds(5), book.For(sent++));
    ASSERT_TRUE(book.WaitAnswered(sent, std::chrono::seconds(10)));
    ASSERT_TRUE(book.Of(0)[0].ok()) << book.Of(0)[0];
    router->Kill();
    client.InferAsync(StandInRequest(), Seconds(5), book.For(sent++));
    ASSERT_TRUE(book.WaitAnswered(sent, std::chrono::seconds(10)));
    EXPECT_EQ(book.Of(1)[0].code(), absl::StatusCode::kUnavailable) << book.Of(1)[0];
    router = std::make_unique<StreamRouterStandIn>(/*hold_odd=*/false, port);
    ASSERT_EQ(router->port(), port);
    // Until the channel has reconnected a query may still fail UNAVAILABLE;
    // each one is answered, and within seconds one is served.
    bool served = false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!served && std::chrono::steady_clock::now() < until) {
      const int q = sent++;
      client.InferAsync(StandInRequest(), Seconds(5), book.For(q));
      ASSERT_TRUE(book.WaitAnswered(sent, std::chrono::seconds(3)))
          << "query " << q << ", sent after the router restarted, was never answered";
      const absl::Status got = book.Of(q)[0];
      served = got.ok();
      if (!served) {
        EXPECT_EQ(got.code(), absl::StatusCode::kUnavailable) << got;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    EXPECT_TRUE(served) << "the restarted router never served a query in " << sent - 2 << " tries";
  }
  for (int i = 0; i < sent; ++i) EXPECT_EQ(book.Of(i).size(), 1u) << "query " << i;
}

}  // namespace
}  // namespace superserve
