#include "worker/router_link.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "worker/batch_runner.h"

namespace superserve {

RouterLink::RouterLink(RouterLinkOptions options, Executor* executor,
                       std::vector<ModelEntry> models)
    : options_(std::move(options)), executor_(executor), models_(std::move(models)) {}

RouterLink::~RouterLink() { Stop(); }

void RouterLink::Stop() {
  stop_requested_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (context_) context_->TryCancel();
  }
  batch_cv_.notify_all();
  heartbeat_cv_.notify_all();
}

bool RouterLink::Write(const v1::WorkerMessage& m) {
  std::lock_guard<std::mutex> lock(write_mu_);
  return stream_->Write(m);
}

absl::Status RouterLink::Run() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  args.SetInt("superserve.channel_tag", options_.channel_tag);
  auto channel = grpc::CreateCustomChannel(options_.router, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::nanoseconds(options_.connect_timeout))) {
    return absl::UnavailableError(absl::StrCat("cannot reach router at ", options_.router));
  }
  auto stub = v1::WorkerLink::NewStub(channel);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::OkStatus();
    context_ = std::make_unique<grpc::ClientContext>();
    stream_ = stub->Connect(context_.get());
  }
  v1::WorkerMessage hello;
  auto* reg = hello.mutable_register_();
  reg->set_worker_id(options_.name);
  for (const auto& m : models_) reg->add_models(m.name);
  reg->set_emulated(executor_->kind() == "emulated");
  reg->set_intra_op_threads(options_.intra_op_threads);
  if (!Write(hello)) return absl::UnavailableError("router closed the stream on registration");

  auto first = std::make_unique<v1::RouterMessage>();
  if (!stream_->Read(first.get()) || !first->has_ack()) {
    grpc::Status s = stream_->Finish();
    return absl::UnavailableError(absl::StrCat("router refused registration: ", s.error_message()));
  }
  const Nanos interval = Millis(std::max<int64_t>(10, first->ack().heartbeat_interval_ms()));
  SS_LOG(INFO) << "registered with router " << options_.router << " as "
               << first->ack().assigned_id() << " (" << executor_->kind() << " executor)";

  std::thread executor_thread([this] { ExecuteLoop(); });
  std::thread heartbeat_thread([this, interval] { HeartbeatLoop(interval); });
  while (true) {
    auto msg = std::make_unique<v1::RouterMessage>();
    if (!stream_->Read(msg.get())) break;
    if (msg->has_batch()) {
      const Nanos received = RealClock::Get()->Now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        batches_.push_back({std::move(msg), received});
      }
      // Outside the lock, so that the woken executor does not block on it.
      batch_cv_.notify_one();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  batch_cv_.notify_all();
  heartbeat_cv_.notify_all();
  executor_thread.join();
  heartbeat_thread.join();
  grpc::Status s = stream_->Finish();
  if (stop_requested_) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("router stream ended: ", s.error_message()));
}

void RouterLink::HeartbeatLoop(Nanos interval) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    heartbeat_cv_.wait_for(lock, std::chrono::nanoseconds(interval), [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    v1::WorkerMessage hb;
    hb.mutable_heartbeat()->set_sent_unix_us(
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    bool ok = Write(hb);
    lock.lock();
    if (!ok) break;
  }
}

void RouterLink::ExecuteLoop() {
  while (true) {
    ReceivedBatch b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      batch_cv_.wait(lock, [this] { return stopping_ || !batches_.empty(); });
      if (stopping_) return;
      b = std::move(batches_.front());
      batches_.pop_front();
    }
    v1::WorkerMessage reply;
    RunBatch(b.message->batch(), b.received, models_, executor_, reply.mutable_result());
    batches_run_.fetch_add(1);
    if (!Write(reply)) return;
  }
}

}  // namespace superserve
