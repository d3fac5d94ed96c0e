#include "router/worker_link_service.h"

#include <atomic>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/secret.h"
#include "router/inference_service.h"

namespace superserve {
namespace {

class WorkerStream;

// The Dispatcher's handle on a stream. gRPC allows one write in flight per
// stream, so messages queue here; it outlives the reactor (the Dispatcher
// may still hold it) and turns into a no-op once the reactor is done.
class StreamConnection final : public WorkerConnection {
 public:
  explicit StreamConnection(WorkerStream* stream) : stream_(stream) {}
  void Send(std::unique_ptr<v1::RouterMessage> message) override;
  void Close(const absl::Status& why) override;
  // Called by the reactor.
  void OnWriteDone(bool ok);
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
  }

 private:
  // Requires mu_ and no write in flight; returns the stream to Finish after
  // unlocking (nullptr when there is nothing to finish).
  WorkerStream* TakeFinishLocked();

  std::mutex mu_;
  WorkerStream* stream_;
  std::deque<std::unique_ptr<v1::RouterMessage>> outbox_;  // front = in flight when writing_
  bool writing_ = false;
  bool closing_ = false;
  bool finished_ = false;
  absl::Status close_status_;
};

class WorkerStream final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage> {
 public:
  explicit WorkerStream(Dispatcher* dispatcher)
      : dispatcher_(dispatcher), connection_(std::make_shared<StreamConnection>(this)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Gone(absl::UnavailableError("worker stream closed"));
      return;
    }
    switch (in_.kind_case()) {
      case v1::WorkerMessage::kRegister: {
        if (worker_ >= 0) break;  // duplicate registration: ignore
        auto id = dispatcher_->RegisterWorker(in_.register_(), connection_);
        if (!id.ok()) {
          SS_LOG(WARNING) << "refused worker " << in_.register_().worker_id() << ": "
                          << id.status().message();
          connection_->Close(id.status());
          return;  // no further reads; OnDone follows Finish
        }
        worker_ = *id;
        break;
      }
      case v1::WorkerMessage::kHeartbeat:
        if (worker_ >= 0) dispatcher_->OnHeartbeat(worker_);
        break;
      case v1::WorkerMessage::kResult:
        if (worker_ >= 0) dispatcher_->OnBatchResult(worker_, in_.mutable_result());
        break;
      case v1::WorkerMessage::kModelLoaded:
        if (worker_ >= 0) dispatcher_->OnModelLoaded(worker_, in_.model_loaded());
        break;
      default:
        break;
    }
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override { connection_->OnWriteDone(ok); }

  void OnCancel() override { Gone(absl::UnavailableError("worker stream cancelled")); }

  void OnDone() override {
    connection_->Detach();
    delete this;
  }

 private:
  // Once per stream, though both OnReadDone and OnCancel may end it:
  // OnWorkerGone is the owner's last call for the id, which the core may
  // then give to the next worker that registers (a second call would
  // declare that one dead).
  void Gone(const absl::Status& why) {
    if (gone_.exchange(true)) return;
    if (worker_ >= 0) dispatcher_->OnWorkerGone(worker_, why);
    connection_->Close(why);
  }

  Dispatcher* const dispatcher_;
  std::shared_ptr<StreamConnection> connection_;
  v1::WorkerMessage in_;
  int32_t worker_ = -1;
  std::atomic<bool> gone_{false};
};

void StreamConnection::Send(std::unique_ptr<v1::RouterMessage> message) {
  v1::RouterMessage* to_write = nullptr;
  WorkerStream* stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream_ == nullptr || closing_) return;
    outbox_.push_back(std::move(message));
    if (writing_) return;
    writing_ = true;
    to_write = outbox_.front().get();
    stream = stream_;
  }
  // Outside the lock: gRPC may run reactions inline.
  stream->StartWrite(to_write);
}

void StreamConnection::OnWriteDone(bool ok) {
  v1::RouterMessage* to_write = nullptr;
  WorkerStream* stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.pop_front();
    if (!ok && !closing_) {  // the stream broke; the read side reports it
      closing_ = true;
      close_status_ = absl::UnavailableError("write to worker failed");
    }
    if (closing_) outbox_.clear();
    if (closing_ || outbox_.empty()) {
      writing_ = false;
      stream = closing_ ? TakeFinishLocked() : nullptr;
    } else {
      to_write = outbox_.front().get();
      stream = stream_;
    }
  }
  if (to_write == nullptr) {
    if (stream != nullptr) stream->Finish(ToGrpcStatus(close_status_));
    return;
  }
  stream->StartWrite(to_write);
}

void StreamConnection::Close(const absl::Status& why) {
  WorkerStream* stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) {
      closing_ = true;
      close_status_ = why;
    }
    if (!writing_) stream = TakeFinishLocked();
  }
  // close_status_ is written once, before finished_ is set; safe to read here.
  if (stream != nullptr) stream->Finish(ToGrpcStatus(close_status_));
}

WorkerStream* StreamConnection::TakeFinishLocked() {
  if (finished_ || stream_ == nullptr) return nullptr;
  finished_ = true;
  return stream_;
}

// A Connect that did not prove itself: finished at once, nothing read.
class RefusedStream final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage> {
 public:
  explicit RefusedStream(const grpc::Status& why) { Finish(why); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage>* WorkerLinkService::Connect(
    grpc::CallbackServerContext* context) {
  if (!fleet_token_.empty()) {
    const auto& md = context->client_metadata();
    auto it = md.find(kFleetTokenMetadata);
    const bool present = it != md.end();
    if (!present || !SameSecret(absl::string_view(it->second.data(), it->second.size()),
                                fleet_token_)) {
      const std::string why = absl::StrCat(
          present ? "wrong fleet token" : "missing fleet token", " (metadata \"",
          kFleetTokenMetadata, "\"); worker not registered");
      SS_LOG(WARNING) << "WorkerLink.Connect from " << context->peer() << " refused: " << why;
      return new RefusedStream(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why));
    }
  }
  return new WorkerStream(dispatcher_);
}

}  // namespace superserve
