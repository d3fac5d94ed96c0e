#include "bench/harness/faulted_load.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "common/clock.h"

namespace superserve {
namespace {

// A channel of its own that retries a lost connection quickly (gRPC's
// default backoff grows to two minutes: a restarted router would stay
// unreachable to it long after it is back).
std::shared_ptr<grpc::Channel> QuickReconnectChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// The clients queries go through; replaced after a router restart. Old ones
// are kept until the end: their destructors wait for their callbacks.
class Clients {
 public:
  explicit Clients(std::string address) : address_(std::move(address)) { Replace(); }
  void Replace() {
    auto channel = QuickReconnectChannel(address_);
    auto unary = std::make_shared<InferenceClient>(channel, Transport::kUnary);
    auto stream = std::make_shared<InferenceClient>(channel, Transport::kStream);
    std::lock_guard<std::mutex> lock(mu_);
    if (unary_) all_.push_back(unary_);
    if (stream_) all_.push_back(stream_);
    unary_ = std::move(unary);
    stream_ = std::move(stream);
  }
  std::shared_ptr<InferenceClient> Get(Transport t) {
    std::lock_guard<std::mutex> lock(mu_);
    return t == Transport::kStream ? stream_ : unary_;
  }
  int64_t StrayAnswers() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = stream_->stray_answers();
    for (const auto& c : all_) n += c->stray_answers();
    return n;
  }
  // Destroys every client (waits for their callbacks).
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    all_.clear();
    unary_.reset();
    stream_.reset();
  }

 private:
  const std::string address_;
  std::mutex mu_;
  std::shared_ptr<InferenceClient> unary_, stream_;
  std::vector<std::shared_ptr<InferenceClient>> all_;
};

}  // namespace

absl::StatusOr<FaultedLoadResult> RunFaultedLoad(LocalCluster& cluster,
                                                 const LabelledRequests& inputs,
                                                 const FaultedLoadOptions& options) {
  if (inputs.requests.empty()) return absl::InvalidArgumentError("faulted load: no inputs");
  FaultedLoadResult result;
  AnswerLedger ledger;  // outlives the clients (their callbacks book into it)
  Clients clients(cluster.router_address());
  clients.Get(Transport::kUnary)->WaitForConnected(Seconds(5));
  FaultInjector injector(&cluster, options.seed ^ 0x9e3779b97f4a7c15ull);
  const Clock* clock = RealClock::Get();
  const Nanos start = clock->Now();

  // Queries go out from a thread of their own; faults are applied from the
  // caller's thread: the processes a fault starts (replacement workers, the
  // restarted router) die with the thread that started them
  // (PR_SET_PDEATHSIG, common/subprocess.h), so that thread must outlive
  // the run.
  std::thread sender([&] {
    std::mt19937_64 rng(options.seed);
    std::bernoulli_distribution use_stream(options.stream_share);
    for (size_t i = 0; i < options.arrivals.size(); ++i) {
      const Nanos target = start + options.arrivals[i];
      const Nanos now = clock->Now();
      if (target - now > Micros(100)) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(target - now - Micros(50)));
      }
      const Transport t = use_stream(rng) ? Transport::kStream : Transport::kUnary;
      const uint64_t id = ledger.Send(clock->Now() - start, options.slo, t);
      clients.Get(t)->InferAsync(inputs.requests[i % inputs.requests.size()], options.slo,
                                 [&ledger, id](InferenceClient::Result r) { ledger.Answer(id, r); });
    }
  });
  for (const Fault& f : options.faults) {
    const Nanos wait = start + f.at - clock->Now();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
    auto applied = injector.Apply(f, start);
    if (!applied.ok()) {
      std::fprintf(stderr, "faulted load: %s at %.1f s skipped: %s\n", FaultKindName(f.kind),
                   ToSeconds(f.at), std::string(applied.status().message()).c_str());
      continue;
    }
    if (f.kind == FaultKind::kRestartRouterDrain || f.kind == FaultKind::kRestartRouterKill) {
      clients.Replace();
    }
    result.faults.push_back(*std::move(applied));
  }
  sender.join();
  ledger.WaitAllAnswered(options.slo + options.drain);
  injector.ReleaseHung();
  result.stray_answers = clients.StrayAnswers();
  clients.Close();
  result.elapsed = clock->Now() - start;
  result.counts = ledger.Count();
  result.queries = ledger.Entries();
  // The router's own count, once what it still holds is answered.
  const Nanos give_up = clock->Now() + Seconds(5);
  while (true) {
    auto totals = cluster.ScrapeRouterTotals();
    if (totals.ok()) {
      result.router_final = *totals;
    } else {
      result.router_final_error = std::string(totals.status().message());
    }
    if ((totals.ok() && totals->pending == 0) || clock->Now() > give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return result;
}

}  // namespace superserve
