#ifndef SUPERSERVE_ROUTER_CLIENT_INFERENCE_CLIENT_H_
#define SUPERSERVE_ROUTER_CLIENT_INFERENCE_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/time.h"
#include "superserve/v1/inference.grpc.pb.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}

namespace superserve {

// How InferenceClient::InferAsync reaches the router.
enum class Transport {
  kUnary,   // one Inference.Infer call per query (deadline = gRPC deadline)
  kStream,  // queries share one Inference.InferStream: each message carries
            // every query queued while the previous write was in flight, and
            // each answer its tag. Far less gRPC work per query (no HTTP/2
            // stream, headers or timer per query) for high-rate clients.
};
absl::StatusOr<Transport> ParseTransport(const std::string& name);  // "unary" | "stream"

// Transport::kStream packs the queries queued behind a write into the next
// message: how many of them (in order, of these wire sizes) go in one message
// of at most `max_bytes` — at least one, so an oversized query still goes.
size_t QueriesPerMessage(absl::Span<const size_t> sizes, size_t max_bytes);

// Channel credentials for a router: plaintext when `tls_ca_file` is empty,
// else TLS verifying the router's certificate against that PEM CA (and, with
// both client files, presenting a client certificate for mutual TLS).
struct ClientTlsFiles {
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
};
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTlsFiles& tls);

// A small client of Inference.Infer. Every call carries its own deadline (the
// query's SLO: the router schedules against it). Thread-safe; one channel.
class InferenceClient {
 public:
  // What a finished call reports to its callback.
  struct Result {
    absl::Status status;
    v1::InferResponse response;  // meaningful when status.ok()
    Nanos latency = 0;           // send to callback, client clock
  };
  using Callback = std::function<void(Result)>;

  // Connects to "host:port" (insecure channel unless `credentials`). Clients
  // with different `connection` numbers never share a TCP connection (gRPC
  // otherwise shares one between channels of equal arguments).
  explicit InferenceClient(const std::string& address, Transport transport = Transport::kUnary,
                           std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
                           int connection = 0);
  explicit InferenceClient(std::shared_ptr<grpc::Channel> channel,
                           Transport transport = Transport::kUnary);
  // Waits until every InferAsync callback has returned (so must not run from
  // one of them). A call's context holds a reference to the channel; if the
  // client went away first, the callback's cleanup would destroy the channel
  // on gRPC's own callback thread, which gRPC 1.51 cannot do (it joins that
  // thread from itself and crashes: an integration test aborted in
  // grpc_cq_internal_unref about one run in five).
  ~InferenceClient();

  // Sends `request` (shared so that replays can reuse one request message per
  // input without copying it) with a deadline `timeout` from now; `done` runs
  // exactly once, on a gRPC thread, when the call ends. Never blocks on the
  // network. With Transport::kStream the router enforces the deadline (it
  // answers every query it accepted, late ones DEADLINE_EXCEEDED). If the
  // stream ends first (the router was killed, drained and exited, or cut the
  // stream), every query it had not answered fails UNAVAILABLE with a message
  // that says the stream ended and why (the router's own refusals, e.g.
  // RESOURCE_EXHAUSTED or UNAUTHENTICATED, keep their code). The next query
  // then opens a new stream, as a unary call reconnects its channel: while
  // no router listens those fail UNAVAILABLE too, and a restarted router is
  // used again. A query whose model or application is not valid UTF-8 is
  // answered INVALID_ARGUMENT at once, unsent (the router could not parse
  // the message carrying it, and would end the stream with it).
  void InferAsync(std::shared_ptr<const v1::InferRequest> request, Nanos timeout, Callback done);

  // Blocking convenience wrapper (always a unary call).
  absl::StatusOr<v1::InferResponse> Infer(const v1::InferRequest& request, Nanos timeout);

  // Waits until the channel is connected or `timeout` passes.
  bool WaitForConnected(Nanos timeout);

  // Transport::kStream: answers that arrived for a query already answered
  // (or never sent), over all the client's streams. They reach no callback; a
  // router that answered a query twice shows here (docs/faults.md counts them
  // as duplicates).
  int64_t stray_answers() const;

 private:
  struct InFlight;  // InferAsync calls whose callback has not returned yet
  class Stream;     // one InferStream of Transport::kStream

  // Declared first, destroyed last: a stream's context holds a channel
  // reference, and the streams (below) are destroyed before it.
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Inference::Stub> stub_;
  std::shared_ptr<InFlight> in_flight_;
  const Transport transport_;
  std::atomic<int64_t> stray_answers_{0};  // Transport::kStream, all streams
  std::mutex streams_mu_;
  // Transport::kStream: the stream new queries go to (null before the first
  // query), and the streams it replaced whose OnDone may not have returned
  // yet (a reactor must outlive its OnDone). Those are destroyed by the
  // InferAsync that next replaces a stream, or by the destructor.
  std::unique_ptr<Stream> stream_;
  std::vector<std::unique_ptr<Stream>> ended_streams_;
  bool closing_ = false;  // the destructor runs: no new stream
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_CLIENT_INFERENCE_CLIENT_H_
