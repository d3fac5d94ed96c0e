#include "router/inference_service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <ratio>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/time.h"
#include "router/answering_stream.h"

namespace superserve {
namespace {

std::atomic<int64_t> live_reactors{0};

// deadline - now in nanoseconds, saturating instead of overflowing for
// deadlines far in the future or past.
Nanos TimeLeft(std::chrono::system_clock::time_point deadline,
               std::chrono::system_clock::time_point now) {
  using Duration = std::chrono::system_clock::duration;
  static_assert(std::is_same_v<Duration::period, std::nano> && std::is_same_v<Duration::rep, Nanos>,
                "system_clock ticks are int64 nanoseconds (libstdc++); else convert with care");
  return SaturatingSub(deadline.time_since_epoch().count(), now.time_since_epoch().count());
}

class InferReactor final : public grpc::ServerUnaryReactor, public QueryResponder {
 public:
  InferReactor(Dispatcher* dispatcher, grpc::ByteBuffer* raw_response, bool inline_completion)
      : dispatcher_(dispatcher), raw_response_(raw_response), inline_completion_(inline_completion) {
    live_reactors.fetch_add(1, std::memory_order_relaxed);
  }
  ~InferReactor() override { live_reactors.fetch_sub(1, std::memory_order_relaxed); }

  const v1::InferRequest& request() const override { return request_; }
  v1::InferResponse* response() override { return &response_; }
  // The request is ours (parsed from the raw one): the input moves into the
  // batch payload uncopied.
  bool TakeInput(v1::Tensor* out) override {
    out->Swap(request_.mutable_input());
    return true;
  }
  void Answer(const absl::Status& status) override {
    if (status.ok()) {
      if (grpc::Status s = SerializeResponse(response_, raw_response_); !s.ok()) {
        Finish(s);
        return;
      }
    }
    Finish(ToClientStatus(status));
  }

  // gRPC calls OnCancel before OnDone, so `this` is alive here. A call
  // already on a worker is answered when its batch returns; finishing a
  // cancelled call is allowed.
  void OnCancel() override { dispatcher_->OnCancelled(this); }
  void OnDone() override { delete this; }

  // router/inference_service.h, InlineCompletion: why, and why it is safe.
  bool InternalInlineable() override { return inline_completion_; }

  v1::InferRequest request_;  // parsed before Submit

 private:
  Dispatcher* const dispatcher_;
  grpc::ByteBuffer* const raw_response_;
  const bool inline_completion_;
  v1::InferResponse response_;
};

// The router's end of one InferStream (router/answering_stream.h): several
// queries per message read, each answered with its tag; every answer that
// arrives while a write is in flight is packed into the next message.
class InferStreamReactor final
    : public AnsweringStream<v1::InferStreamRequest, v1::InferStreamResponse> {
 public:
  InferStreamReactor(Dispatcher* dispatcher, Nanos default_slo, size_t max_unsent_answers)
      : AnsweringStream(dispatcher, default_slo, max_unsent_answers, "InferStream") {
    live_reactors.fetch_add(1, std::memory_order_relaxed);
    StartReading();
  }
  ~InferStreamReactor() override { live_reactors.fetch_sub(1, std::memory_order_relaxed); }

  void OnRequest() override {
    const Nanos now = Now();
    std::vector<Query*> queries;
    std::vector<Nanos> deadlines;
    queries.reserve(in_.queries_size());
    deadlines.reserve(in_.queries_size());
    for (v1::StreamQuery& q : *in_.mutable_queries()) {
      auto* query = new TaggedQuery(this, q.tag());
      query->request_.Swap(q.mutable_request());
      DropUnknownFields(&query->request_);
      queries.push_back(query);
      // timeout_us <= 0: the default SLO. Any other value, INT64_MAX
      // included, is clamped (kMaxQueryTimeout), never overflowed.
      deadlines.push_back(q.timeout_us() > 0 ? DeadlineAfterMicros(now, q.timeout_us())
                                             : DeadlineAfter(now, default_slo_));
    }
    in_.Clear();
    if (!Admit(queries)) {  // cut off or cancelled: these queries are dropped
      for (Query* q : queries) delete q;
      return;
    }
    for (size_t i = 0; i < queries.size(); ++i) Submit(queries[i], deadlines[i]);
    ReadNext();
  }

 private:
  class TaggedQuery final : public Query {
   public:
    TaggedQuery(InferStreamReactor* stream, uint64_t tag) : Query(stream), tag_(tag) {}
    const uint64_t tag_;
  };

  void ToMessage(Query* query, const absl::Status& status, v1::InferStreamResponse* msg) override {
    v1::InferAnswer* a = msg->add_answers();
    a->set_tag(static_cast<TaggedQuery*>(query)->tag_);
    a->set_code(static_cast<int32_t>(status.code()));
    if (status.ok()) {
      a->mutable_response()->Swap(&query->response_);
    } else {
      a->set_message(WireMessage(status.message()));
    }
  }
  bool Pack(v1::InferStreamResponse* waiting, v1::InferStreamResponse* msg) override {
    for (v1::InferAnswer& a : *msg->mutable_answers()) waiting->add_answers()->Swap(&a);
    return true;
  }
};

}  // namespace

int64_t InferenceService::LiveReactors() { return live_reactors.load(); }

std::string WireMessage(absl::string_view message) {
  if (message.size() <= kMaxWireMessageBytes) return std::string(message);
  const std::string note = absl::StrCat("... (", message.size(), " bytes, cut)");
  size_t keep = kMaxWireMessageBytes - note.size();
  // Not inside a UTF-8 sequence: a proto3 string must stay valid UTF-8.
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xC0) == 0x80) --keep;
  return absl::StrCat(message.substr(0, keep), note);
}


grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

grpc::Status ToClientStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), WireMessage(s.message()));
}

grpc::ServerUnaryReactor* InferenceService::Infer(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  auto* reactor = new InferReactor(dispatcher_, response, inline_completion_);
  if (grpc::Status s = ParseRequest(*request, &reactor->request_); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  DropUnknownFields(&reactor->request_);
  const Nanos now = dispatcher_->clock()->Now();
  Nanos deadline = DeadlineAfter(now, default_slo_);
  const auto client_deadline = context->deadline();
  if (client_deadline != std::chrono::system_clock::time_point::max()) {
    // The wire carries a relative timeout that gRPC turned into a wall-clock
    // deadline; turn it back into a span and anchor it on our clock, with
    // saturation and the kMaxQueryTimeout clamp (a deadline centuries ahead
    // must not overflow).
    deadline = DeadlineAfter(now, TimeLeft(client_deadline, std::chrono::system_clock::now()));
  }
  dispatcher_->Submit(reactor, deadline);
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferenceService::InferStream(
    grpc::CallbackServerContext* /*context*/) {
  return new InferStreamReactor(dispatcher_, default_slo_, max_stream_unsent_answers_);
}

}  // namespace superserve
