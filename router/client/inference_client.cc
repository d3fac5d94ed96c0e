#include "router/client/inference_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/small_file.h"

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

// Transport::kStream: one Inference.InferStream, started by the first query
// sent on it, until it ends (the client closes it, or the router ends or
// loses it); the client then opens another for the next query. Queries queued
// while a write is in flight go out together in the next message, each with
// the time left to its deadline at that moment; answers are matched to their
// callbacks by tag.
//
// Every query sent on it gets exactly one callback: its answer, or, once the
// stream is over, a failure from OnDone. OnDone runs only when no operation
// is outstanding and no hold is left; Send starts writes from outside any
// reaction, so the stream holds a hold while a Send may still come, and
// gives it back as soon as none can: once the reads are over (the router
// will answer nothing more; Send refuses from then on) or the client has
// closed its side, and no write is in flight or about to start. (Only
// Close gave it back before, so a stream the router dropped never reached
// OnDone: its pending queries, and every later one, waited forever.)
class InferenceClient::Stream final
    : public grpc::ClientBidiReactor<v1::InferStreamRequest, v1::InferStreamResponse> {
 public:
  // gRPC's default receive limit; the router accepts more (64 MB).
  static constexpr size_t kMaxMessageBytes = 4 << 20;

  Stream(v1::Inference::Stub* stub, std::atomic<int64_t>* stray_answers)
      : stray_answers_(stray_answers) {
    stub->async()->InferStream(&context_, this);
    StartRead(&in_);
    AddHold();  // for Send's writes; ReleaseHoldLocked says when it goes
  }

  // Queues the query and takes `done`, or returns false and leaves `done`
  // alone if the stream is over (its reads ended, or Close ran). A stream
  // nothing was sent on yet always takes its query.
  bool Send(const v1::InferRequest& request, Nanos timeout, Nanos start, Callback& done) {
    bool write = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (reads_over_ || closing_) return false;
      const uint64_t tag = ++next_tag_;
      calls_.emplace(tag, Call{std::move(done), start});
      v1::StreamQuery* q = queued_.add_queries();
      q->set_tag(tag);
      *q->mutable_request() = request;
      queued_deadlines_.push_back(start + timeout);
      queued_bytes_.push_back(request.ByteSizeLong() + 32);  // + tag, timeout, framing
      // writing_ keeps the hold until this write's OnWriteDone.
      if (!writing_) write = writing_ = TakeQueuedLocked();
    }
    StartOnce();
    if (write) StartWrite(&out_);
    return true;
  }

  // Closes the client's side and waits until the router has answered every
  // query (or `patience` passed: then the stream is cancelled and the rest
  // fail CANCELLED). Returns once OnDone has run.
  void Close(Nanos patience) {
    StartOnce();
    bool writes_done = false, release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      if (!writing_ && !reads_over_ && !writes_done_sent_) {
        writes_done = writing_ = writes_done_sent_ = true;
      }
      release = ReleaseHoldLocked();
    }
    if (writes_done) StartWritesDone();
    if (release) RemoveHold();
    std::unique_lock<std::mutex> lock(mu_);
    if (!ended_cv_.wait_for(lock, std::chrono::nanoseconds(patience), [this] { return ended_; })) {
      cancelled_ = true;
      context_.TryCancel();
      ended_cv_.wait(lock, [this] { return ended_; });
    }
  }

  // OnDone has returned (every call got its callback): the stream may be
  // destroyed.
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  void WaitEnded() {
    std::unique_lock<std::mutex> lock(mu_);
    ended_cv_.wait(lock, [this] { return ended_; });
  }

  void OnWriteDone(bool ok) override {
    bool write = false, writes_done = false, release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out_.Clear();
      // Once the reads are over the call is: what is still queued fails in
      // OnDone.
      if (ok && !reads_over_ && queued_.queries_size() > 0) {
        write = TakeQueuedLocked();
      } else if (ok && !reads_over_ && closing_ && !writes_done_sent_) {
        writes_done = writes_done_sent_ = true;  // writing_ stays set until it is done
      } else {
        writing_ = false;
      }
      release = ReleaseHoldLocked();
    }
    if (write) StartWrite(&out_);
    if (writes_done) StartWritesDone();
    if (release) RemoveHold();
  }

  void OnWritesDoneDone(bool /*ok*/) override {
    bool release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      release = ReleaseHoldLocked();
    }
    if (release) RemoveHold();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The router finished the call, or it broke: no answer comes any more.
      // Send refuses from now on (the client opens a new stream), and the
      // hold goes once no write is in flight, so that OnDone can fail what
      // is still pending.
      bool release = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reads_over_ = true;
        release = ReleaseHoldLocked();
      }
      if (release) RemoveHold();
      return;
    }
    const Nanos now = RealClock::Get()->Now();
    for (v1::InferAnswer& a : *in_.mutable_answers()) {
      Call call;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = calls_.find(a.tag());
        if (it == calls_.end()) {  // answered before, or never sent: a router bug
          stray_answers_->fetch_add(1);
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

  void OnDone(const grpc::Status& s) override {
    absl::flat_hash_map<uint64_t, Call> left;
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reads_over_ = true;  // (already set by the last read; Send must not add to calls_)
      left.swap(calls_);
      cancelled = cancelled_;
    }
    const absl::Status why = Unanswered(s, cancelled);
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

  // What a query the stream ended without answering fails with: UNAVAILABLE
  // (the router went away, restarted, or ended the stream; the unary path
  // gets UNAVAILABLE there too, and callers retry on it), saying that the
  // stream ended and with what. Statuses in which the router refused the
  // stream keep their code (retrying the same way would not help), and so
  // does the client's own cancel after Close's patience.
  static absl::Status Unanswered(const grpc::Status& s, bool cancelled_by_client) {
    const auto code = static_cast<absl::StatusCode>(s.error_code());
    const std::string what =
        absl::StrCat("the inference stream to the router ended before this query's answer (",
                     absl::StatusCodeToString(code), s.error_message().empty() ? "" : ": ",
                     s.error_message(), ")");
    if (cancelled_by_client) {
      return absl::CancelledError(
          absl::StrCat(what,
                       "; the client cancelled it, its router had not answered when the "
                       "client closed"));
    }
    switch (code) {
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kPermissionDenied:
      case absl::StatusCode::kUnauthenticated:
      case absl::StatusCode::kResourceExhausted:
      case absl::StatusCode::kFailedPrecondition:
      case absl::StatusCode::kUnimplemented:
        return absl::Status(code, what);
      default:
        return absl::UnavailableError(what);
    }
  }

  // Whether the hold can go now (at most once): no Send can add a write any
  // more (the reads are over, or Close ran and its WritesDone is sent) and
  // no write or WritesDone is in flight or about to be started.
  bool ReleaseHoldLocked() {
    if (hold_released_ || writing_) return false;
    if (!reads_over_ && !(closing_ && writes_done_sent_)) return false;
    hold_released_ = true;
    return true;
  }

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

  std::atomic<int64_t>* const stray_answers_;  // the client's
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
  bool writing_ = false;  // a Write or WritesDone is in flight or about to start
  bool closing_ = false;  // Close ran: no more queries
  bool writes_done_sent_ = false;
  bool reads_over_ = false;  // no answer comes any more: no more queries
  bool hold_released_ = false;
  bool cancelled_ = false;  // by Close, after its patience
  bool ended_ = false;      // OnDone has run
};

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTlsFiles& tls) {
  if (tls.ca_file.empty()) {
    if (!tls.client_cert_file.empty() || !tls.client_key_file.empty()) {
      return absl::InvalidArgumentError("a client certificate needs a TLS CA file");
    }
    return grpc::InsecureChannelCredentials();
  }
  // Bounded, regular files only: /dev/zero used to be read until memory ran
  // out (std::bad_alloc), a FIFO blocked forever.
  auto read = [](const std::string& path) { return ReadSmallFile(path, kMaxPemBytes); };
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
    : in_flight_(std::make_shared<InFlight>()), transport_(transport) {
  grpc::ChannelArguments args;
  if (connection != 0) args.SetInt("superserve.connection", connection);
  args.SetMaxReceiveMessageSize(64 << 20);
  // A query past its deadline is useless, and each call already has one:
  // no transparent retries (they also cost a buffering filter per call).
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  channel_ = grpc::CreateCustomChannel(
      address, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Inference::NewStub(channel_);
}

InferenceClient::InferenceClient(std::shared_ptr<grpc::Channel> channel, Transport transport)
    : channel_(std::move(channel)),
      stub_(v1::Inference::NewStub(channel_)),
      in_flight_(std::make_shared<InFlight>()),
      transport_(transport) {}

InferenceClient::~InferenceClient() {
  std::unique_ptr<Stream> last;
  std::vector<std::unique_ptr<Stream>> ended;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    closing_ = true;
    last = std::move(stream_);
    ended = std::move(ended_streams_);
  }
  // The router answers what it accepted before it ends the stream; a router
  // that never does is given up on after a minute. Replaced streams are over
  // already: their OnDone comes on its own.
  if (last != nullptr) last->Close(Seconds(60));
  for (auto& s : ended) s->WaitEnded();
  last.reset();
  ended.clear();
  std::unique_lock<std::mutex> lock(in_flight_->mu);
  in_flight_->done.wait(lock, [this] { return in_flight_->calls == 0; });
}

namespace {

// Whether `s` is valid UTF-8, as protobuf checks a proto3 string field when
// it parses one (no overlong forms, surrogates or code points past U+10FFFF).
bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace

void InferenceClient::InferAsync(std::shared_ptr<const v1::InferRequest> request, Nanos timeout,
                                 Callback done) {
  // C++ protobuf sends a string field that is not UTF-8 (it only logs), and
  // the router cannot parse the message: on a stream that failed every query
  // of the message and every later one (other callers' too). Refused here.
  if (!IsUtf8(request->model()) || !IsUtf8(request->application())) {
    Result r;
    r.status = absl::InvalidArgumentError(absl::StrCat(
        "InferenceClient: the query's ", IsUtf8(request->model()) ? "application" : "model",
        " is not valid UTF-8 (a protobuf string field must be); not sent"));
    done(std::move(r));
    return;
  }
  if (transport_ == Transport::kStream) {
    {
      std::lock_guard<std::mutex> lock(in_flight_->mu);
      ++in_flight_->calls;
    }
    Callback counted = [done = std::move(done), in_flight = in_flight_](Result r) {
      done(std::move(r));
      std::lock_guard<std::mutex> lock(in_flight->mu);
      if (--in_flight->calls == 0) in_flight->done.notify_all();
    };
    const Nanos start = RealClock::Get()->Now();
    {
      // Held across Send so that a stream made here takes its query before
      // anyone else can start it (Send starts gRPC operations, whose
      // reactions never run inline, so no callback runs under this lock).
      std::lock_guard<std::mutex> lock(streams_mu_);
      if (!closing_) {
        if (stream_ != nullptr && stream_->Send(*request, timeout, start, counted)) return;
        // The stream is over (its router went away, restarted or ended it):
        // a new one on the same channel, which reconnects as it does for a
        // unary call. While no router listens, it fails at once and its
        // queries UNAVAILABLE.
        if (stream_ != nullptr) ended_streams_.push_back(std::move(stream_));
        ended_streams_.erase(
            std::remove_if(ended_streams_.begin(), ended_streams_.end(),
                           [](const std::unique_ptr<Stream>& s) { return s->ended(); }),
            ended_streams_.end());
        stream_ = std::make_unique<Stream>(stub_.get(), &stray_answers_);
        if (stream_->Send(*request, timeout, start, counted)) return;  // (always)
      }
    }
    Result r;
    r.status = absl::UnavailableError("InferenceClient: query sent while the client is closing");
    counted(std::move(r));
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

int64_t InferenceClient::stray_answers() const { return stray_answers_.load(); }

bool InferenceClient::WaitForConnected(Nanos timeout) {
  return channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::nanoseconds(timeout));
}

}  // namespace superserve
