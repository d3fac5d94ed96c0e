#include "router/client/inference_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace superserve {
namespace {

struct PendingCall {
  grpc::ClientContext context;
  std::shared_ptr<const v1::InferRequest> request;
  InferenceClient::Result result;
  InferenceClient::Callback done;
  Nanos start = 0;
};

absl::Status FromWire(int32_t code, const std::string& message) {
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace

size_t QueriesPerMessage(absl::Span<const size_t> sizes, size_t max_bytes) {
  size_t n = 0, bytes = 0;
  while (n < sizes.size() && (n == 0 || bytes + sizes[n] <= max_bytes)) bytes += sizes[n++];
  return n;
}

absl::StatusOr<Transport> ParseTransport(const std::string& name) {
  if (name == "unary") return Transport::kUnary;
  if (name == "stream") return Transport::kStream;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport \"", name, "\" (expected unary or stream)"));
}

struct InferenceClient::InFlight {
  std::mutex mu;
  std::condition_variable done;
  int64_t calls = 0;
};

// Transport::kStream: one Inference.InferStream for the client's lifetime,
// started by the first query. Queries queued while a write is in flight go
// out together in the next message, each with the time left to its deadline
// at that moment; answers are matched to their callbacks by tag.
class InferenceClient::Stream final
    : public grpc::ClientBidiReactor<v1::InferStreamRequest, v1::InferStreamResponse> {
 public:
  // gRPC's default receive limit; the router accepts more (64 MB).
  static constexpr size_t kMaxMessageBytes = 4 << 20;

  explicit Stream(v1::Inference::Stub* stub) {
    stub->async()->InferStream(&context_, this);
    StartRead(&in_);
    AddHold();  // writes come later, from Send; Close removes the hold
  }

  void Send(const v1::InferRequest& request, Nanos timeout, Nanos start, Callback done) {
    bool write = false, accepted = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!ended_ && !closing_) {
        accepted = true;
        const uint64_t tag = ++next_tag_;
        calls_.emplace(tag, Call{std::move(done), start});
        v1::StreamQuery* q = queued_.add_queries();
        q->set_tag(tag);
        *q->mutable_request() = request;
        queued_deadlines_.push_back(start + timeout);
        queued_bytes_.push_back(request.ByteSizeLong() + 32);  // + tag, timeout, framing
        if (!writing_) write = writing_ = TakeQueuedLocked();
      }
    }
    if (!accepted) {  // the stream is over
      Result r;
      r.status = absl::UnavailableError("inference stream closed");
      done(std::move(r));
      return;
    }
    StartOnce();
    if (write) StartWrite(&out_);
  }

  // Closes the client's side and waits until the router has answered every
  // query (or `patience` passed: then the stream is cancelled and the rest
  // fail CANCELLED).
  void Close(Nanos patience) {
    StartOnce();
    bool writes_done = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      if (!writing_ && !ended_) writes_done = writes_done_sent_ = true;
    }
    if (writes_done) StartWritesDone();
    RemoveHold();
    std::unique_lock<std::mutex> lock(mu_);
    if (!ended_cv_.wait_for(lock, std::chrono::nanoseconds(patience), [this] { return ended_; })) {
      context_.TryCancel();
      ended_cv_.wait(lock, [this] { return ended_; });
    }
  }

  void OnWriteDone(bool ok) override {
    bool write = false, writes_done = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out_.Clear();
      if (ok && queued_.queries_size() > 0) {
        write = TakeQueuedLocked();
      } else {
        writing_ = false;  // (!ok: the stream broke; OnDone fails the calls)
        if (ok && closing_ && !writes_done_sent_) writes_done = writes_done_sent_ = true;
      }
    }
    if (write) StartWrite(&out_);
    if (writes_done) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    const Nanos now = RealClock::Get()->Now();
    for (v1::InferAnswer& a : *in_.mutable_answers()) {
      Call call;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = calls_.find(a.tag());
        if (it == calls_.end()) {  // answered before, or never sent: a router bug
          ++stray_answers_;
          continue;
        }
        call = std::move(it->second);
        calls_.erase(it);
      }
      Result r;
      r.status = FromWire(a.code(), a.message());
      r.response.Swap(a.mutable_response());
      r.latency = now - call.start;
      call.done(std::move(r));
    }
    in_.Clear();
    StartRead(&in_);
  }

  int64_t stray_answers() const { return stray_answers_.load(); }

  void OnDone(const grpc::Status& s) override {
    absl::flat_hash_map<uint64_t, Call> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(calls_);
    }
    const absl::Status why =
        s.ok() ? absl::UnavailableError("inference stream ended before the answer")
               : FromWire(static_cast<int32_t>(s.error_code()),
                          absl::StrCat("inference stream: ", s.error_message()));
    const Nanos now = RealClock::Get()->Now();
    for (auto& [tag, call] : left) {
      Result r;
      r.status = why;
      r.latency = now - call.start;
      call.done(std::move(r));
    }
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    ended_cv_.notify_all();
  }

 private:
  struct Call {
    Callback done;
    Nanos start = 0;
  };

  // Moves queued queries into out_ (all of them, or as many as fit in
  // kMaxMessageBytes: after a stall the backlog goes out in several messages
  // rather than one the router may refuse), their timeouts counted from now.
  bool TakeQueuedLocked() {
    const Nanos now = RealClock::Get()->Now();
    const size_t n = QueriesPerMessage(queued_bytes_, kMaxMessageBytes);
    for (size_t i = 0; i < n; ++i) {
      // At least 1 us: 0 would mean "the router's default".
      queued_.mutable_queries(static_cast<int>(i))
          ->set_timeout_us(std::max<int64_t>(1, (queued_deadlines_[i] - now) / 1000));
    }
    if (n == queued_bytes_.size()) {
      out_.Swap(&queued_);
      queued_deadlines_.clear();
      queued_bytes_.clear();
    } else {
      for (size_t i = 0; i < n; ++i) {
        out_.add_queries()->Swap(queued_.mutable_queries(static_cast<int>(i)));
      }
      queued_.mutable_queries()->DeleteSubrange(0, static_cast<int>(n));
      queued_deadlines_.erase(queued_deadlines_.begin(), queued_deadlines_.begin() + n);
      queued_bytes_.erase(queued_bytes_.begin(), queued_bytes_.begin() + n);
    }
    return true;
  }
  void StartOnce() {
    std::call_once(started_, [this] { StartCall(); });
  }

  grpc::ClientContext context_;
  std::once_flag started_;
  v1::InferStreamResponse in_;  // only touched by the read chain
  v1::InferStreamRequest out_;  // only touched by whoever set writing_
  std::mutex mu_;
  std::condition_variable ended_cv_;
  absl::flat_hash_map<uint64_t, Call> calls_;
  v1::InferStreamRequest queued_;
  std::vector<Nanos> queued_deadlines_;  // per queued query
  std::vector<size_t> queued_bytes_;     // per queued query, its wire size (about)
  uint64_t next_tag_ = 0;
  std::atomic<int64_t> stray_answers_{0};
  bool writing_ = false;
  bool closing_ = false;
  bool writes_done_sent_ = false;
  bool ended_ = false;
};

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTlsFiles& tls) {
  if (tls.ca_file.empty()) {
    if (!tls.client_cert_file.empty() || !tls.client_key_file.empty()) {
      return absl::InvalidArgumentError("a client certificate needs a TLS CA file");
    }
    return grpc::InsecureChannelCredentials();
  }
  auto read = [](const std::string& path) -> absl::StatusOr<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  grpc::SslCredentialsOptions ssl;
  auto ca = read(tls.ca_file);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  if (tls.client_cert_file.empty() != tls.client_key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs its key, and the reverse");
  }
  if (!tls.client_cert_file.empty()) {
    auto cert = read(tls.client_cert_file);
    if (!cert.ok()) return cert.status();
    auto key = read(tls.client_key_file);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

InferenceClient::InferenceClient(const std::string& address, Transport transport,
                                 std::shared_ptr<grpc::ChannelCredentials> credentials,
                                 int connection)
    : in_flight_(std::make_shared<InFlight>()) {
  grpc::ChannelArguments args;
  if (connection != 0) args.SetInt("superserve.connection", connection);
  args.SetMaxReceiveMessageSize(64 << 20);
  // A query past its deadline is useless, and each call already has one:
  // no transparent retries (they also cost a buffering filter per call).
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  channel_ = grpc::CreateCustomChannel(
      address, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Inference::NewStub(channel_);
  if (transport == Transport::kStream) stream_ = std::make_unique<Stream>(stub_.get());
}

InferenceClient::InferenceClient(std::shared_ptr<grpc::Channel> channel, Transport transport)
    : channel_(std::move(channel)),
      stub_(v1::Inference::NewStub(channel_)),
      in_flight_(std::make_shared<InFlight>()) {
  if (transport == Transport::kStream) stream_ = std::make_unique<Stream>(stub_.get());
}

InferenceClient::~InferenceClient() {
  // The router answers what it accepted before it ends the stream; a router
  // that never does is given up on after a minute.
  if (stream_) stream_->Close(Seconds(60));
  std::unique_lock<std::mutex> lock(in_flight_->mu);
  in_flight_->done.wait(lock, [this] { return in_flight_->calls == 0; });
}

void InferenceClient::InferAsync(std::shared_ptr<const v1::InferRequest> request, Nanos timeout,
                                 Callback done) {
  if (stream_) {
    {
      std::lock_guard<std::mutex> lock(in_flight_->mu);
      ++in_flight_->calls;
    }
    stream_->Send(*request, timeout, RealClock::Get()->Now(),
                  [done = std::move(done), in_flight = in_flight_](Result r) {
                    done(std::move(r));
                    std::lock_guard<std::mutex> lock(in_flight->mu);
                    if (--in_flight->calls == 0) in_flight->done.notify_all();
                  });
    return;
  }
  auto* call = new PendingCall();
  call->request = std::move(request);
  call->done = std::move(done);
  call->start = RealClock::Get()->Now();
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(timeout));
  {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    ++in_flight_->calls;
  }
  stub_->async()->Infer(&call->context, call->request.get(), &call->result.response,
                        [call, in_flight = in_flight_](grpc::Status s) {
                          call->result.latency = RealClock::Get()->Now() - call->start;
                          call->result.status =
                              absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                                           s.error_message());
                          call->done(std::move(call->result));
                          delete call;  // drops the context's channel reference
                          std::lock_guard<std::mutex> lock(in_flight->mu);
                          if (--in_flight->calls == 0) in_flight->done.notify_all();
                        });
}

absl::StatusOr<v1::InferResponse> InferenceClient::Infer(const v1::InferRequest& request,
                                                         Nanos timeout) {
  // The blocking stub: the calling thread polls for its own completion, one
  // thread hop fewer than waiting on an async callback.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(timeout));
  v1::InferResponse response;
  grpc::Status s = stub_->Infer(&context, request, &response);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return response;
}

int64_t InferenceClient::stray_answers() const {
  return stream_ != nullptr ? stream_->stray_answers() : 0;
}

bool InferenceClient::WaitForConnected(Nanos timeout) {
  return channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::nanoseconds(timeout));
}

}  // namespace superserve
