#include "router/inference_service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <ratio>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/time.h"

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
  InferReactor(Dispatcher* dispatcher, const v1::InferRequest* request,
               v1::InferResponse* response)
      : dispatcher_(dispatcher), request_(request), response_(response) {
    live_reactors.fetch_add(1, std::memory_order_relaxed);
  }
  ~InferReactor() override { live_reactors.fetch_sub(1, std::memory_order_relaxed); }

  const v1::InferRequest& request() const override { return *request_; }
  v1::InferResponse* response() override { return response_; }
  void Answer(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }

  // gRPC calls OnCancel before OnDone, so `this` is alive here. A call
  // already on a worker is answered when its batch returns; finishing a
  // cancelled call is allowed.
  void OnCancel() override { dispatcher_->OnCancelled(this); }
  void OnDone() override { delete this; }

  // gRPC 1.51 otherwise hands OnDone (and with it the call's teardown and
  // the re-arming of the next Infer request) to its executor thread: one
  // more thread wake-up per query (perf: ~1/4 of the router's CPU ran on
  // "default-executor"). Both reactions are trivial and safe on whichever
  // gRPC thread finishes the call: OnDone deletes the reactor; OnCancel
  // takes the Dispatcher's lock, which no thread holds while calling into
  // gRPC (the Dispatcher runs all network actions after releasing it).
  // The hook is public in <grpcpp/support/server_callback.h> but marked
  // "not API"; tests/router/inference_service_test.cc pins the behaviour.
  bool InternalInlineable() override { return true; }

 private:
  Dispatcher* const dispatcher_;
  const v1::InferRequest* const request_;
  v1::InferResponse* const response_;
};

// The router's end of one InferStream: reads queries (several per message),
// submits each to the Dispatcher as its own QueryResponder, and writes the
// answers back with their tags, packing every answer that arrives while a
// write is in flight into the next message. Finishes once the client has
// closed its side and every query it sent has been answered (the
// Dispatcher's exactly-once contract carries over per query).
class InferStreamReactor final
    : public grpc::ServerBidiReactor<v1::InferStreamRequest, v1::InferStreamResponse> {
 public:
  InferStreamReactor(Dispatcher* dispatcher, Nanos default_slo, size_t max_unsent_answers)
      : dispatcher_(dispatcher), default_slo_(default_slo), max_unsent_(max_unsent_answers) {
    live_reactors.fetch_add(1, std::memory_order_relaxed);
    StartRead(&in_);
  }
  ~InferStreamReactor() override { live_reactors.fetch_sub(1, std::memory_order_relaxed); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, or the stream broke
      bool finish;
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
        finish = ShouldFinishLocked();
      }
      if (finish) Finish(FinalStatus());
      return;
    }
    const Nanos now = dispatcher_->clock()->Now();
    std::vector<std::pair<StreamQuery*, Nanos>> accepted;
    accepted.reserve(in_.queries_size());
    bool stop_reading = false, finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (broken_) {
        // Cut off or cancelled: read no more; these queries are dropped.
        // As after the client's last message, finish once all is answered.
        stop_reading = true;
        reads_done_ = true;
        finish = ShouldFinishLocked();
      } else {
        for (v1::StreamQuery& q : *in_.mutable_queries()) {
          auto* query = new StreamQuery(this, q.tag());
          query->request_.Swap(q.mutable_request());
          live_.insert(query);
          // timeout_us <= 0: the default SLO. Any other value, INT64_MAX
          // included, is clamped (kMaxQueryTimeout), never overflowed.
          accepted.emplace_back(query, q.timeout_us() > 0
                                           ? DeadlineAfterMicros(now, q.timeout_us())
                                           : DeadlineAfter(now, default_slo_));
        }
      }
    }
    if (stop_reading) {
      in_.Clear();
      if (finish) Finish(FinalStatus());
      return;
    }
    in_.Clear();
    // Not under mu_: Submit may answer at once (a rejected query), and
    // Answer takes mu_.
    for (auto& [query, deadline] : accepted) dispatcher_->Submit(query, deadline);
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    bool next = false, finish = false;
    {
      absl::MutexLock lock(&mu_);
      out_.Clear();
      if (!ok) broken_ = true;
      if (!broken_ && pending_.answers_size() > 0) {
        out_.Swap(&pending_);
        next = true;
      } else {
        writing_ = false;
        pending_.Clear();
        finish = ShouldFinishLocked();
      }
    }
    if (next) StartWrite(&out_);
    if (finish) Finish(FinalStatus());
  }

  // The client went away: queued queries are marked so that the Dispatcher
  // answers them instead of dispatching them (as for a cancelled unary
  // call); their answers are then dropped here. Under mu_, so that no
  // query in live_ is answered (and deleted) while the Dispatcher reads it:
  // the lock order is this reactor's mu_, then the Dispatcher's.
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    for (StreamQuery* q : live_) dispatcher_->OnCancelled(q);
  }
  // A query still in flight when the call ends (the stream was cut off or
  // cancelled while its batch ran) answers later: the last one of them
  // deletes the reactor, not gRPC's OnDone.
  void OnDone() override {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      last = live_.empty();
    }
    if (last) delete this;
  }

 private:
  class StreamQuery final : public QueryResponder {
   public:
    StreamQuery(InferStreamReactor* stream, uint64_t tag) : stream_(stream), tag_(tag) {}
    const v1::InferRequest& request() const override { return request_; }
    v1::InferResponse* response() override { return &response_; }
    void Answer(const absl::Status& status) override { stream_->Answer(this, status); }
    // The request is ours: the input moves into the batch payload uncopied.
    bool TakeInput(v1::Tensor* out) override {
      out->Swap(request_.mutable_input());
      return true;
    }

    InferStreamReactor* const stream_;
    const uint64_t tag_;
    v1::InferRequest request_;
    v1::InferResponse response_;
  };

  void Answer(StreamQuery* query, const absl::Status& status) {
    bool start = false, finish = false, cut_off = false, last = false;
    {
      absl::MutexLock lock(&mu_);
      live_.erase(query);
      if (!broken_ && writing_ && max_unsent_ > 0 &&
          static_cast<size_t>(pending_.answers_size()) >= max_unsent_) {
        // The client does not read: cut it off rather than grow. Its
        // queued queries are answered and dropped (OnCancel's path).
        broken_ = true;
        cut_off = !finished_;
        finished_ = true;
        pending_.Clear();
        for (StreamQuery* q : live_) dispatcher_->OnCancelled(q);
      }
      if (!broken_) {
        v1::InferAnswer* a = pending_.add_answers();
        a->set_tag(query->tag_);
        a->set_code(static_cast<int32_t>(status.code()));
        if (status.ok()) {
          a->mutable_response()->Swap(&query->response_);
        } else {
          a->set_message(std::string(status.message()));
        }
        if (!writing_) {
          writing_ = true;
          out_.Swap(&pending_);
          start = true;
        }
      }
      finish = !start && ShouldFinishLocked();
      last = done_ && live_.empty();
    }
    delete query;
    if (last) {  // the call is over (start, finish and cut_off are false)
      delete this;
      return;
    }
    if (start) StartWrite(&out_);
    if (finish) Finish(FinalStatus());
    if (cut_off) {
      SS_LOG(WARNING) << "InferStream cut off: " << max_unsent_
                      << " answers waited for the client to read (--max_stream_unsent_answers)";
      // A write is in flight: the status follows it once the client reads.
      Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("InferStream cut off: ", max_unsent_,
                       " answers waited for the client to read (bound "
                       "--max_stream_unsent_answers=",
                       max_unsent_, ")")));
    }
  }

  // Finish exactly once: the client is done sending, every query it sent
  // has its answer, and no write is in flight.
  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || !live_.empty() || writing_) return false;
    finished_ = true;
    return true;
  }
  grpc::Status FinalStatus() {
    absl::MutexLock lock(&mu_);
    return broken_ ? grpc::Status(grpc::StatusCode::CANCELLED, "stream broken or cancelled")
                   : grpc::Status::OK;
  }

  Dispatcher* const dispatcher_;
  const Nanos default_slo_;
  const size_t max_unsent_;
  v1::InferStreamRequest in_;  // only touched by the read chain
  absl::Mutex mu_;
  absl::flat_hash_set<StreamQuery*> live_ ABSL_GUARDED_BY(mu_);
  // The message being written: touched only by whoever set writing_.
  v1::InferStreamResponse out_;
  v1::InferStreamResponse pending_ ABSL_GUARDED_BY(mu_);  // answers for the next write
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // gRPC called OnDone
};

}  // namespace

int64_t InferenceService::LiveReactors() { return live_reactors.load(); }

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

grpc::ServerUnaryReactor* InferenceService::Infer(grpc::CallbackServerContext* context,
                                                  const v1::InferRequest* request,
                                                  v1::InferResponse* response) {
  auto* reactor = new InferReactor(dispatcher_, request, response);
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

grpc::ServerBidiReactor<v1::InferStreamRequest, v1::InferStreamResponse>*
InferenceService::InferStream(grpc::CallbackServerContext* /*context*/) {
  return new InferStreamReactor(dispatcher_, default_slo_, max_stream_unsent_answers_);
}

}  // namespace superserve
