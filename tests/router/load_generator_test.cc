// ReplayTrace against scripted in-process inference servers (the stream
// transport, where the server and not gRPC decides when a query is
// answered): answers that trail the last send are waited for while they keep
// coming, and a server that stops answering leaves records marked
// unanswered instead of a crashed load generator.
#include "router/client/load_generator.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "router/client/inference_client.h"
#include "router/client/trace_csv.h"
#include "superserve/v1/inference.grpc.pb.h"

namespace superserve {
namespace {

// Reads every query of a stream; answers them, OK, one every `spacing` once
// `expected` queries have arrived, or never when `answer` is false;
// `expected` 0: answers every message's queries as it arrives.
class ScriptedInference final : public v1::Inference::Service {
 public:
  ScriptedInference(bool answer, int expected, std::chrono::milliseconds spacing)
      : answer_(answer), expected_(expected), spacing_(spacing) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~ScriptedInference() override { server_->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int streams() const { return streams_.load(); }
  // The application tag of every query answered at once (expected 0), in
  // the order they arrived.
  std::vector<std::string> applications() const {
    std::lock_guard<std::mutex> lock(mu_);
    return applications_;
  }

  grpc::Status InferStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::InferStreamResponse, v1::InferStreamRequest>* stream) override {
    ++streams_;
    std::vector<uint64_t> tags;
    v1::InferStreamRequest in;
    if (expected_ == 0) {  // answer each message's queries at once, OK
      while (stream->Read(&in)) {
        v1::InferStreamResponse out;
        for (const auto& q : in.queries()) {
          out.add_answers()->set_tag(q.tag());
          std::lock_guard<std::mutex> lock(mu_);
          applications_.push_back(q.request().application());
        }
        if (!stream->Write(out)) break;
      }
      return grpc::Status::OK;
    }
    while (static_cast<int>(tags.size()) < expected_ && stream->Read(&in)) {
      for (const auto& q : in.queries()) tags.push_back(q.tag());
    }
    if (answer_) {
      for (uint64_t tag : tags) {
        std::this_thread::sleep_for(spacing_);
        v1::InferStreamResponse out;
        v1::InferAnswer* a = out.add_answers();
        a->set_tag(tag);
        a->set_code(0);
        if (!stream->Write(out)) break;
      }
    }
    while (stream->Read(&in)) {
    }
    return grpc::Status::OK;
  }

 private:
  bool answer_;
  int expected_;
  std::chrono::milliseconds spacing_;
  int port_ = 0;
  std::atomic<int> streams_{0};
  mutable std::mutex mu_;
  std::vector<std::string> applications_;
  std::unique_ptr<grpc::Server> server_;
};

std::vector<TraceArrival> Burst(int n) {
  std::vector<TraceArrival> t(n);
  for (int i = 0; i < n; ++i) t[i].arrival = Micros(100) * i;
  return t;
}

LabelledRequests OneInput() {
  LabelledRequests in;
  auto req = std::make_shared<v1::InferRequest>();
  req->set_model("m");
  in.requests.push_back(req);
  in.labels.push_back(3);
  return in;
}

ReplayOptions Options() {
  ReplayOptions o;
  o.progress = false;
  o.default_slo = Millis(10);
  o.drain_timeout = Millis(150);
  return o;
}

// Answers arrive 50 ms apart, 1.5 s in all, three times the SLO plus the
// drain timeout: the replay waits for each, since each comes within the
// timeout. (The timeout is 10 x the spacing: under ThreadSanitizer on a busy
// machine a 150-ms timeout against 60-ms spacing once saw a 150-ms gap.)
TEST(ReplayTraceTest, AnswersThatKeepComingAreAllWaitedFor) {
  constexpr int kQueries = 30;
  ScriptedInference server(/*answer=*/true, kQueries, std::chrono::milliseconds(50));
  InferenceClient client(server.address(), Transport::kStream);
  ReplayOptions options = Options();
  options.drain_timeout = Millis(500);
  auto records = ReplayTrace(client, Burst(kQueries), OneInput(), options);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), static_cast<size_t>(kQueries));
  for (const QueryRecord& r : *records) {
    EXPECT_TRUE(r.answered);
    EXPECT_EQ(r.code, absl::StatusCode::kOk);
    EXPECT_FALSE(r.in_slo);  // the last ones took ~1 s against 10 ms
  }
}

// A server that never answers: after the drain timeout without an answer the
// replay returns every query as unanswered (a miss), and the CSV says so.
TEST(ReplayTraceTest, AServerThatStopsAnsweringLeavesUnansweredRecords) {
  constexpr int kQueries = 8;
  ScriptedInference server(/*answer=*/false, kQueries, std::chrono::milliseconds(0));
  std::vector<QueryRecord> kept;
  {
    InferenceClient client(server.address(), Transport::kStream);
    const auto start = std::chrono::steady_clock::now();
    auto records = ReplayTrace(client, Burst(kQueries), OneInput(), Options());
    const auto waited = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(records.ok()) << records.status();
    EXPECT_LT(waited, std::chrono::seconds(5));
    kept = *std::move(records);
  }  // the client closes its stream; the late failures reach no record
  ASSERT_EQ(kept.size(), static_cast<size_t>(kQueries));
  for (const QueryRecord& r : kept) {
    EXPECT_FALSE(r.answered);
    EXPECT_FALSE(r.in_slo);
    EXPECT_EQ(r.label, 3);
  }
  const ReplaySummary s = Summarize(kept);
  EXPECT_EQ(s.queries, kQueries);
  EXPECT_EQ(s.ok, 0);
  const std::string path = absl::StrCat(::testing::TempDir(), "/unanswered-", getpid(), ".csv");
  ASSERT_TRUE(WriteRecordsCsv(path, kept).ok());
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find(",UNANSWERED,"), std::string::npos) << text.str();
  std::remove(path.c_str());
}

// Several senders: each row goes out once, through its own sender's stream,
// no earlier than its arrival time, and every answer lands in its row.
TEST(ReplayTraceTest, SeveralSendersShareTheRowsAndKeepTheirTimes) {
  constexpr int kQueries = 300;
  ScriptedInference server(/*answer=*/true, /*expected=*/0, std::chrono::milliseconds(0));
  InferenceClient a(server.address(), Transport::kStream, nullptr, /*connection=*/0);
  InferenceClient b(server.address(), Transport::kStream, nullptr, /*connection=*/1);
  InferenceClient c(server.address(), Transport::kStream, nullptr, /*connection=*/2);
  InferenceClient* clients[] = {&a, &b, &c};
  const std::vector<TraceArrival> trace = Burst(kQueries);
  const LabelledRequests inputs = OneInput();
  ReplayOptions o = Options();
  o.default_slo = Seconds(2);
  o.drain_timeout = Seconds(2);  // every answer comes; no gap under a sanitizer ends the wait
  auto records = ReplayTrace(absl::MakeConstSpan(clients), trace,
                             [&inputs](const TraceArrival&) { return &inputs; }, o);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), static_cast<size_t>(kQueries));
  for (size_t i = 0; i < records->size(); ++i) {
    const QueryRecord& r = (*records)[i];
    EXPECT_TRUE(r.answered) << "row " << i;
    EXPECT_EQ(r.code, absl::StatusCode::kOk) << "row " << i;
    EXPECT_GE(r.sent, trace[i].arrival - Micros(150)) << "row " << i << " sent early";
  }
  EXPECT_EQ(server.streams(), 3);
}

// One trace format (issue 44): a trace file whose application column is
// named `application` (what superserve-sim reads too, tests/bench) replays
// with each row's application on its query.
TEST(ReplayTraceTest, ReplaysATraceFileWithAnApplicationColumn) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/application-trace-", getpid(), ".csv");
  std::ofstream(path) << "arrival_us,application\n0,short\n100,long\n200,short\n";
  auto trace = ReadTraceCsv(path);
  std::remove(path.c_str());
  ASSERT_TRUE(trace.ok()) << trace.status();
  ScriptedInference server(/*answer=*/true, /*expected=*/0, std::chrono::milliseconds(0));
  InferenceClient client(server.address(), Transport::kStream);
  ReplayOptions o = Options();
  o.default_slo = Seconds(2);
  o.drain_timeout = Seconds(2);  // every answer comes; no gap under a sanitizer ends the wait
  auto records = ReplayTrace(client, *trace, OneInput(), o);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  const std::vector<std::string> want = {"short", "long", "short"};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE((*records)[i].answered) << "row " << i;
    EXPECT_EQ((*records)[i].application, want[i]) << "row " << i;
  }
  EXPECT_EQ(server.applications(), want) << "the queries the server read, in send order";
}

// Options a replay cannot keep: a NaN or infinite time scale (the sends'
// times were garbage and the replay waited for ever), an SLO past a day or
// not positive, a scaled arrival past int64 nanoseconds. Refused before
// anything is sent, naming the option.
TEST(ReplayTraceTest, RefusesOptionsItCannotReplay) {
  InferenceClient client("127.0.0.1:1", Transport::kStream);  // never reached
  const LabelledRequests inputs = OneInput();
  struct Case {
    double time_scale;
    Nanos default_slo;
    Nanos row_slo;
    Nanos arrival;
    std::string message;
  };
  const Case cases[] = {
      {std::nan(""), Millis(10), 0, 0, "time_scale must be a finite number >= 0, got nan"},
      {HUGE_VAL, Millis(10), 0, 0, "time_scale must be a finite number >= 0, got inf"},
      {-1, Millis(10), 0, 0, "time_scale must be a finite number >= 0, got -1"},
      {1, 0, 0, 0, "default SLO must be in (0, 86400000000] us"},
      {1, kMaxQueryTimeout + 1, 0, 0, "default SLO must be in (0, 86400000000] us"},
      {1, Millis(10), -5, 0, "row 0's SLO must be in (0, 86400000000] us"},
      {1, Millis(10), kMaxQueryTimeout + 1, 0, "row 0's SLO must be in (0, 86400000000] us"},
      {1e6, Millis(10), 0, Seconds(1e5), "row 0: arrival 1e+11 us * time_scale 1e+06 = 1e+17 us"},
  };
  for (const Case& c : cases) {
    std::vector<TraceArrival> trace(1);
    trace[0].arrival = c.arrival;
    trace[0].slo = c.row_slo;
    ReplayOptions o = Options();
    o.time_scale = c.time_scale;
    o.default_slo = c.default_slo;
    auto records = ReplayTrace(client, trace, inputs, o);
    ASSERT_FALSE(records.ok()) << c.message;
    EXPECT_EQ(records.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(records.status().message().find(c.message), absl::string_view::npos)
        << records.status().message();
  }
}

}  // namespace
}  // namespace superserve
