#ifndef SUPERSERVE_ROUTER_ANSWERING_STREAM_H_
#define SUPERSERVE_ROUTER_ANSWERING_STREAM_H_

// The router's end of a bidirectional inference stream, the part InferStream
// and Open Inference's ModelStreamInfer share: every query read becomes its
// own QueryResponder for the Dispatcher; answers are written back in the
// order they come, one write in flight at a time; a client that stops
// reading is cut off once max_unsent answers wait for it (rather than the
// router's memory growing); the call finishes once the client has closed its
// side and every query it sent has been answered (the Dispatcher's
// exactly-once contract carries over per query); the reactor outlives the
// call until its last query is answered.
//
// A protocol subclass reads (OnRequest: make queries from in_, Admit,
// submit, ReadNext) and says how one answer becomes a message (ToMessage) and
// whether answers that wait for the same write share one message (Pack).
//
// The stream is a raw one (ByteBuffer both ways; the service declares the
// method with WithRawCallbackMethod_*): messages are parsed and serialized
// here, so that a message that does not parse (malformed, or a proto3 string
// that is not UTF-8) finishes the call INVALID_ARGUMENT saying so. With
// typed messages gRPC reports a parse failure as the end of the client's
// writes: the call finished OK and the queries of that message, and of
// every later one, were silently never answered.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/logging.h"
#include "common/time.h"
#include "superserve/v1/inference.pb.h"
#include "router/dispatcher.h"
#include "router/query_responder.h"

namespace superserve {

template <typename Request, typename Response>
class AnsweringStream : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // One query of the stream. Protocols derive to keep what addresses the
  // answer (a tag, the original request).
  class Query : public QueryResponder {
   public:
    explicit Query(AnsweringStream* stream) : stream_(stream) {}
    const v1::InferRequest& request() const override { return request_; }
    v1::InferResponse* response() override { return &response_; }
    void Answer(const absl::Status& status) override { stream_->Answer(this, status); }
    // The request is ours: the input moves into the batch payload uncopied.
    bool TakeInput(v1::Tensor* out) override {
      out->Swap(request_.mutable_input());
      return true;
    }

    v1::InferRequest request_;
    v1::InferResponse response_;

   private:
    AnsweringStream* const stream_;
  };

  void OnWriteDone(bool ok) override {
    bool next = false, finish = false;
    out_.Clear();  // ours until writing_ is cleared
    {
      absl::MutexLock lock(&mu_);
      if (!ok) broken_ = true;
      if (!broken_ && !pending_.empty()) {
        out_ = std::move(pending_.front().message);
        unsent_ -= pending_.front().answers;
        pending_.pop_front();
        next = true;
      } else {
        writing_ = false;
        pending_.clear();
        unsent_ = 0;
        finish = ShouldFinishLocked();
      }
    }
    if (next) WriteOut();
    if (finish) this->Finish(FinalStatus());
  }

  // A message read: parsed into in_ for the protocol (OnRequest), or, if it
  // does not parse, the end of reading with INVALID_ARGUMENT as the final
  // status once what is live has been answered.
  void OnReadDone(bool ok) final {
    if (!ok) {  // the client closed its side, or the stream broke
      OnReadsEnded();
      return;
    }
    ++messages_read_;
    if (!grpc::SerializationTraits<Request>::Deserialize(&in_raw_, &in_).ok()) {
      OnUnparsable();
      return;
    }
    OnRequest();
  }

  // The client went away: queued queries are marked so that the Dispatcher
  // answers them instead of dispatching them (as for a cancelled unary
  // call); their answers are then dropped here. Under mu_, so that no query
  // in live_ is answered (and deleted) while the Dispatcher reads it: the
  // lock order is this reactor's mu_, then the Dispatcher's.
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    for (Query* q : live_) dispatcher_->OnCancelled(q);
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

 protected:
  // `method` names the stream in the cut-off status ("InferStream").
  AnsweringStream(Dispatcher* dispatcher, Nanos default_slo, size_t max_unsent_answers,
                  std::string method)
      : dispatcher_(dispatcher),
        default_slo_(default_slo),
        max_unsent_(max_unsent_answers),
        method_(std::move(method)) {}

  // `query`'s answer as a new message. Called outside the lock.
  virtual void ToMessage(Query* query, const absl::Status& status, Response* msg) = 0;
  // Moves the answers of `msg` into `waiting` (a message not yet written)
  // and returns true, or returns false to send `msg` on its own.
  virtual bool Pack(Response* waiting, Response* msg) { return false; }

  // Subclasses call this last in their constructor: a read may complete at
  // once, and OnReadDone must find the object whole.
  void StartReading() { ReadNext(); }
  // The next message: OnRequest calls this last unless Admit refused.
  void ReadNext() { this->StartRead(&in_raw_); }
  // in_ holds a message the client sent.
  virtual void OnRequest() = 0;

  // The read chain ended (OnReadDone(false)): the client closed its side or
  // the stream broke.
  void OnReadsEnded() {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      finish = ShouldFinishLocked();
    }
    if (finish) this->Finish(FinalStatus());
  }

  // Makes `queries` live (each will be answered exactly once), or, once the
  // stream is cut off or cancelled, reads no more and returns false: then
  // the caller deletes them unsubmitted and returns from OnReadDone without
  // another read, and the call finishes once what is live has been answered.
  bool Admit(absl::Span<Query* const> queries) {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (!broken_) {
        live_.insert(queries.begin(), queries.end());
        return true;
      }
      reads_done_ = true;
      finish = ShouldFinishLocked();
    }
    if (finish) this->Finish(FinalStatus());
    return false;
  }

  // Not under mu_: Submit may answer at once (a rejected query), and Answer
  // takes mu_.
  void Submit(Query* query, Nanos deadline) { dispatcher_->Submit(query, deadline); }
  Nanos Now() const { return dispatcher_->clock()->Now(); }

  Dispatcher* const dispatcher_;
  const Nanos default_slo_;
  Request in_;  // only touched by the read chain

 private:
  void OnUnparsable() {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      bad_request_ = grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat(method_, ": message ", messages_read_, " is not a valid ",
                       in_.GetTypeName(),
                       " (malformed, or a string field that is not UTF-8); its queries were not "
                       "read, nor was anything after it"));
      reads_done_ = true;
      finish = ShouldFinishLocked();
    }
    if (finish) this->Finish(FinalStatus());
  }

  // Serializes out_ and writes it (only whoever set writing_ calls this).
  void WriteOut() {
    out_raw_.Clear();
    bool own_buffer = false;
    const grpc::Status s =
        grpc::SerializationTraits<Response>::Serialize(out_, &out_raw_, &own_buffer);
    out_.Clear();
    if (!s.ok()) {  // over 2 GiB: cannot happen with the message size bounds
      SS_LOG(ERROR) << method_ << ": an answer did not serialize: " << s.error_message();
      OnWriteDone(false);
      return;
    }
    this->StartWrite(&out_raw_);
  }

  struct Waiting {
    Response message;
    size_t answers = 0;
  };

  void Answer(Query* query, const absl::Status& status) {
    Response msg;
    ToMessage(query, status, &msg);
    bool start = false, finish = false, cut_off = false, last = false;
    {
      absl::MutexLock lock(&mu_);
      live_.erase(query);
      if (!broken_ && writing_ && max_unsent_ > 0 && unsent_ >= max_unsent_) {
        // The client does not read: cut it off rather than grow. Its
        // queued queries are answered and dropped (OnCancel's path).
        broken_ = true;
        cut_off = !finished_;
        finished_ = true;
        pending_.clear();
        unsent_ = 0;
        for (Query* q : live_) dispatcher_->OnCancelled(q);
      }
      if (!broken_) {
        if (!writing_) {
          writing_ = true;
          out_ = std::move(msg);
          start = true;
        } else {
          if (pending_.empty() || !Pack(&pending_.back().message, &msg)) {
            pending_.push_back(Waiting{std::move(msg), 0});
          }
          ++pending_.back().answers;
          ++unsent_;
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
    if (start) WriteOut();
    if (finish) this->Finish(FinalStatus());
    if (cut_off) {
      SS_LOG(WARNING) << method_ << " cut off: " << max_unsent_
                      << " answers waited for the client to read (--max_stream_unsent_answers)";
      // A write is in flight: the status follows it once the client reads.
      this->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                absl::StrCat(method_, " cut off: ", max_unsent_,
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
                   : bad_request_;
  }

  const size_t max_unsent_;
  const std::string method_;
  absl::Mutex mu_;
  absl::flat_hash_set<Query*> live_ ABSL_GUARDED_BY(mu_);
  // The message being written (out_, then serialized into out_raw_):
  // touched only by whoever set writing_.
  Response out_;
  grpc::ByteBuffer out_raw_;
  grpc::ByteBuffer in_raw_;  // the read chain's
  int64_t messages_read_ = 0;  // the read chain's
  // OK, or why reading stopped at a message that did not parse.
  grpc::Status bad_request_ ABSL_GUARDED_BY(mu_);
  std::deque<Waiting> pending_ ABSL_GUARDED_BY(mu_);  // for the next writes
  size_t unsent_ ABSL_GUARDED_BY(mu_) = 0;            // answers in pending_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // gRPC called OnDone
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_ANSWERING_STREAM_H_
