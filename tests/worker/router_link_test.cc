// RouterLink against a scripted in-process router (a WorkerLink service on
// 127.0.0.1, port chosen at run time): reconnection, what happens to batches
// of an ended stream, the first connection's timeout, and Stop().
#include "worker/router_link.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/model_digest.h"
#include "common/small_file.h"
#include "common/tensor_codec.h"
#include "superserve/v1/worker.grpc.pb.h"
#include "tests/worker/worker_test_util.h"

namespace superserve {
namespace {

using ::testing::HasSubstr;

v1::RouterMessage BatchMessage(uint64_t id) {
  v1::RouterMessage msg;
  v1::Batch* b = msg.mutable_batch();
  b->set_batch_id(id);
  b->set_model("m");
  v1::BatchQuery* q = b->add_queries();
  q->set_query_id(id * 10);
  EncodeTensor(MakeFloatTensor({2}, std::vector<float>{1, 2}), q->mutable_input());
  return msg;
}

// Runs batches until closed: then each Run blocks until Open(). Records
// which batches it ran (by the query id).
class GatedExecutor final : public Executor {
 public:
  std::string_view kind() const override { return "gated"; }
  absl::Status Load(const ModelEntry&) override { return absl::OkStatus(); }
  absl::Status Unload(const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<HostTensor>> Run(const std::string&, const ControlTuple&,
                                              absl::Span<const v1::Tensor* const> inputs) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++runs_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
    return std::vector<HostTensor>(inputs.size(),
                                   MakeFloatTensor({3}, std::vector<float>{0, 1, 0}));
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool WaitForRuns(int n, Nanos timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::nanoseconds(timeout), [&] { return runs_ >= n; });
  }
  int runs() {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int runs_ = 0;
};

// A WorkerLink service whose every session follows `script`: given the
// session number (1, 2, ...) and the stream, after the registration was read;
// its return value ends the stream. Records each session's result batch ids.
class ScriptedRouter final : public v1::WorkerLink::Service {
 public:
  using Stream = grpc::ServerReaderWriter<v1::RouterMessage, v1::WorkerMessage>;
  using Script = std::function<grpc::Status(int session, Stream* stream)>;

  explicit ScriptedRouter(Script script) : script_(std::move(script)) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~ScriptedRouter() override { server_->Shutdown(std::chrono::system_clock::now()); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int sessions() const { return sessions_.load(); }
  // When the first WorkerLink call arrived (0: none yet).
  Nanos first_call_at() const { return first_call_at_.load(); }

  grpc::Status Connect(grpc::ServerContext*, Stream* stream) override {
    Nanos none = 0;
    first_call_at_.compare_exchange_strong(none, RealClock::Get()->Now());
    v1::WorkerMessage m;
    if (!stream->Read(&m) || !m.has_register_()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no registration");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      registration_ = m.register_();
    }
    const int session = ++sessions_;
    return script_(session, stream);
  }

  static void Ack(Stream* stream, int session) {
    v1::RouterMessage ack;
    ack.mutable_ack()->set_assigned_id(absl::StrCat("w", session));
    ack.mutable_ack()->set_heartbeat_interval_ms(20);
    stream->Write(ack);
  }
  // Reads until the stream ends, recording result batch ids for `session`.
  void ReadResults(int session, Stream* stream) {
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
      if (!m.has_result()) continue;
      std::lock_guard<std::mutex> lock(mu_);
      results_.push_back({session, m.result().batch_id()});
      cv_.notify_all();
    }
  }
  v1::RegisterWorker registration() {
    std::lock_guard<std::mutex> lock(mu_);
    return registration_;
  }
  std::vector<std::pair<int, uint64_t>> results() {
    std::lock_guard<std::mutex> lock(mu_);
    return results_;
  }
  bool WaitForResult(int session, uint64_t batch, Nanos timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::nanoseconds(timeout), [&] {
      for (const auto& r : results_) {
        if (r == std::make_pair(session, batch)) return true;
      }
      return false;
    });
  }

 private:
  Script script_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> sessions_{0};
  std::atomic<Nanos> first_call_at_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<int, uint64_t>> results_;
  v1::RegisterWorker registration_;  // the last one
};

// A port on 127.0.0.1 that nothing listens on (bound, read, released).
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

RouterLinkOptions Options(const std::string& address) {
  RouterLinkOptions o;
  o.router = address;
  o.name = "link-test";
  o.connect_timeout = Seconds(10);
  o.reconnect_initial_backoff = Millis(20);
  o.reconnect_max_backoff = Millis(200);
  return o;
}

// Runs link.Run() on a thread; the future holds its status.
std::future<absl::Status> RunAsync(RouterLink& link) {
  return std::async(std::launch::async, [&link] { return link.Run(); });
}

bool Eventually(const std::function<bool()>& f, Nanos timeout = Seconds(10)) {
  const Nanos end = RealClock::Get()->Now() + timeout;
  while (RealClock::Get()->Now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return f();
}

TEST(RouterLink, AfterTheRouterEndsTheStreamItRegistersAgainAndQueuedBatchesAreDropped) {
  GatedExecutor executor;
  std::promise<void> first_batch_started;
  auto started = first_batch_started.get_future().share();
  ScriptedRouter* router_ptr = nullptr;
  ScriptedRouter router([&](int session, ScriptedRouter::Stream* stream) {
    ScriptedRouter::Ack(stream, session);
    if (session == 1) {
      // Three batches; the first is executing (the executor is closed) when
      // the router ends the stream, as after declaring the worker dead.
      for (uint64_t id : {1, 2, 3}) stream->Write(BatchMessage(id));
      started.wait_for(std::chrono::seconds(10));
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "declared dead (test)");
    }
    stream->Write(BatchMessage(100 + session));
    router_ptr->ReadResults(session, stream);
    return grpc::Status::OK;
  });
  router_ptr = &router;
  executor.Close();
  RouterLink link(Options(router.address()), &executor, {testing::SmallModelEntry()});
  auto run = RunAsync(link);
  ASSERT_TRUE(executor.WaitForRuns(1, Seconds(10)));
  first_batch_started.set_value();
  // The first stream is over; the executor still holds batch 1, so the link
  // cannot start its next session yet.
  ASSERT_TRUE(Eventually([&] { return !link.registered(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(router.sessions(), 1);
  executor.Open();
  ASSERT_TRUE(router.WaitForResult(2, 102, Seconds(10))) << "no result on the second stream";
  EXPECT_TRUE(link.registered());
  EXPECT_EQ(link.reconnects(), 1);
  // Batch 1 ran (it had started), batches 2 and 3 were dropped, batch 102
  // ran on the new stream; nothing of the first stream reached the second.
  EXPECT_EQ(executor.runs(), 2);
  EXPECT_EQ(link.batches_run(), 2);
  for (const auto& [session, batch] : router.results()) {
    EXPECT_FALSE(session == 2 && batch < 100) << "batch " << batch << " of stream 1 on stream 2";
  }
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

// An executor whose thread needs seconds of preparation (a GPU worker warms
// every model on its serving thread): records where and when it ran.
class SlowToPrepareExecutor final : public Executor {
 public:
  std::string_view kind() const override { return "slow-to-prepare"; }
  absl::Status Load(const ModelEntry&) override { return absl::OkStatus(); }
  absl::Status Unload(const std::string&) override { return absl::OkStatus(); }
  void PrepareThread() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    std::lock_guard<std::mutex> lock(mu_);
    prepared_on_ = std::this_thread::get_id();
    prepared_at_ = RealClock::Get()->Now();
  }
  absl::StatusOr<std::vector<HostTensor>> Run(const std::string&, const ControlTuple&,
                                              absl::Span<const v1::Tensor* const> inputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    ran_on_.push_back(std::this_thread::get_id());
    return std::vector<HostTensor>(inputs.size(),
                                   MakeFloatTensor({3}, std::vector<float>{0, 1, 0}));
  }
  std::mutex mu_;
  std::thread::id prepared_on_;
  Nanos prepared_at_ = 0;
  std::vector<std::thread::id> ran_on_;
};

// The preparation runs on the thread that then runs the batches, and before
// the worker opens its call to the router: a call left silent for seconds is
// cut by the keepalive watchdog (code 14), and a GPU worker (seconds of
// warm-up per session) then never registered (docs/gpu.md).
TEST(RouterLink, TheBatchThreadIsPreparedBeforeTheCallOpens) {
  SlowToPrepareExecutor executor;
  ScriptedRouter* router_ptr = nullptr;
  ScriptedRouter router([&](int session, ScriptedRouter::Stream* stream) {
    ScriptedRouter::Ack(stream, session);
    stream->Write(BatchMessage(7));
    router_ptr->ReadResults(session, stream);
    return grpc::Status::OK;
  });
  router_ptr = &router;
  RouterLink link(Options(router.address()), &executor, {testing::SmallModelEntry()});
  auto run = RunAsync(link);
  ASSERT_TRUE(router.WaitForResult(1, 7, Seconds(15))) << "no result";
  EXPECT_EQ(router.sessions(), 1);
  EXPECT_EQ(link.reconnects(), 0);
  {
    std::lock_guard<std::mutex> lock(executor.mu_);
    ASSERT_GT(executor.prepared_at_, 0);
    EXPECT_GE(router.first_call_at(), executor.prepared_at_) << "the call opened while preparing";
    ASSERT_EQ(executor.ran_on_.size(), 1u);
    EXPECT_EQ(executor.ran_on_[0], executor.prepared_on_);
  }
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

TEST(RouterLink, RefusedRegistrationsAreRetriedUntilTheRouterAccepts) {
  GatedExecutor executor;
  ScriptedRouter router([](int session, ScriptedRouter::Stream* stream) {
    if (session <= 2) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    ScriptedRouter::Ack(stream, session);
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
    }
    return grpc::Status::OK;
  });
  RouterLink link(Options(router.address()), &executor, {testing::SmallModelEntry()});
  auto run = RunAsync(link);
  ASSERT_TRUE(Eventually([&] { return link.registered(); }));
  EXPECT_EQ(router.sessions(), 3);
  EXPECT_EQ(link.reconnects(), 0) << "the first registration is not a reconnect";
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

TEST(RouterLink, ARouterThatNeverAcknowledgesIsLeftAfterTheAttemptTimeout) {
  GatedExecutor executor;
  ScriptedRouter router([](int session, ScriptedRouter::Stream* stream) {
    // Session 1 accepts the registration and then says nothing (a hung
    // router); session 2 acknowledges.
    if (session > 1) ScriptedRouter::Ack(stream, session);
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
    }
    return grpc::Status::OK;
  });
  RouterLinkOptions o = Options(router.address());
  o.attempt_timeout = Millis(300);
  RouterLink link(o, &executor, {testing::SmallModelEntry()});
  const Nanos t0 = RealClock::Get()->Now();
  auto run = RunAsync(link);
  ASSERT_TRUE(Eventually([&] { return link.registered(); }));
  EXPECT_GE(RealClock::Get()->Now() - t0, Millis(300));
  EXPECT_EQ(router.sessions(), 2);
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

TEST(RouterLink, WithoutReconnectRunReturnsWhenTheStreamEnds) {
  GatedExecutor executor;
  ScriptedRouter router([](int session, ScriptedRouter::Stream* stream) {
    ScriptedRouter::Ack(stream, session);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "router going away (test)");
  });
  RouterLinkOptions o = Options(router.address());
  o.reconnect = false;
  RouterLink link(o, &executor, {testing::SmallModelEntry()});
  auto run = RunAsync(link);
  ASSERT_EQ(run.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  absl::Status s = run.get();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("router going away (test)"));
  EXPECT_EQ(router.sessions(), 1);
}

TEST(RouterLink, FirstRegistrationGivesUpAfterConnectTimeout) {
  GatedExecutor executor;
  RouterLinkOptions o = Options(absl::StrCat("127.0.0.1:", ClosedPort()));
  o.connect_timeout = Millis(500);
  RouterLink link(o, &executor, {testing::SmallModelEntry()});
  const Nanos t0 = RealClock::Get()->Now();
  absl::Status s = link.Run();
  const Nanos took = RealClock::Get()->Now() - t0;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("connect_timeout"));
  // gRPC's reason, which the channel's state alone does not give.
  EXPECT_THAT(s.message(), HasSubstr("Connection refused"));
  EXPECT_GE(took, Millis(450));
  // Gave up rather than retrying for ever; how soon after the 0.5 s is the
  // host's business, not the test's.
  EXPECT_LT(took, Seconds(20));
}

// A refusal that retrying cannot heal (here a wrong fleet token) keeps being
// retried, but when the first registration gives up its message names the
// router's reason, not the last attempt's "not established in time".
TEST(RouterLink, FirstRegistrationGivesUpNamingTheRoutersRefusal) {
  GatedExecutor executor;
  ScriptedRouter router([](int, ScriptedRouter::Stream*) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong fleet token (test)");
  });
  RouterLinkOptions o = Options(router.address());
  o.connect_timeout = Millis(1500);
  // Attempts keep running into the deadline: the last one is cut short.
  o.reconnect_initial_backoff = Millis(400);
  o.reconnect_max_backoff = Millis(400);
  RouterLink link(o, &executor, {testing::SmallModelEntry()});
  absl::Status s = link.Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("connect_timeout"));
  EXPECT_THAT(s.message(),
              HasSubstr("router refused registration (UNAUTHENTICATED: wrong fleet token (test))"));
  EXPECT_GE(router.sessions(), 2) << "a refused registration is still retried";
}

TEST(RouterLink, StopInterruptsTheBackoffSleep) {
  GatedExecutor executor;
  RouterLinkOptions o = Options(absl::StrCat("127.0.0.1:", ClosedPort()));
  o.connect_timeout = 0;  // wait forever
  o.reconnect_initial_backoff = Seconds(30);
  o.reconnect_max_backoff = Seconds(30);
  RouterLink link(o, &executor, {testing::SmallModelEntry()});
  auto run = RunAsync(link);
  // The first attempt fails at once (connection refused); then a >= 24 s sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(run.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  const Nanos t0 = RealClock::Get()->Now();
  link.Stop();
  // Interrupted: Run returns long before the >= 24 s sleep would end.
  ASSERT_EQ(run.wait_for(std::chrono::seconds(15)), std::future_status::ready);
  EXPECT_LT(RealClock::Get()->Now() - t0, Seconds(15));
  EXPECT_TRUE(run.get().ok());
}

// Loads, and takes its time to unload: RouterLink unloads on its executor
// thread, and the loader thread meanwhile works on the next LoadModel. No
// synchronisation of its own, so that a race between the two threads'
// accesses to the link's state is not hidden from TSan by one here.
class SlowToUnloadExecutor final : public Executor {
 public:
  std::string_view kind() const override { return "slow-to-unload"; }
  absl::Status Load(const ModelEntry&) override { return absl::OkStatus(); }
  absl::Status Unload(const std::string&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<HostTensor>> Run(const std::string&, const ControlTuple&,
                                              absl::Span<const v1::Tensor* const> inputs) override {
    return std::vector<HostTensor>(inputs.size(),
                                   MakeFloatTensor({3}, std::vector<float>{0, 1, 0}));
  }
};

// The LoadModel of tests/router/testdata/emulated_repo/emu, served as `serve_as`.
v1::RouterMessage LoadEmu(const std::string& serve_as) {
  const std::string dir =
      std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/tests/router/testdata/emulated_repo/emu";
  v1::RouterMessage msg;
  v1::LoadModel* load = msg.mutable_load_model();
  load->set_model("emu");
  load->set_serve_as(serve_as);
  auto digest = DigestModelDirectory(dir);
  EXPECT_TRUE(digest.ok()) << digest.status();
  load->mutable_version()->set_model("emu");
  if (digest.ok()) {
    load->mutable_version()->set_profile_digest(digest->profile);
    load->mutable_version()->set_checkpoint_digest(digest->checkpoint);
  }
  for (const char* name : {"manifest.json", "profile.json"}) {
    auto content = ReadSmallFile(dir + "/" + name, 1 << 20);
    EXPECT_TRUE(content.ok()) << content.status();
    v1::PackageFile* f = load->add_files();
    f->set_name(name);
    if (content.ok()) f->set_content(*content);
  }
  return msg;
}

// The executor thread unloads a model (erasing it from the link's models)
// while the loader thread loads another (reading them, and the package
// folder): the link's model list and package folder are shared by the two
// threads. Under TSan (scripts/run-tests' TSan stage) this reported a data
// race before the list was guarded; here it checks that both answers come.
TEST(RouterLink, AnUnloadOnTheExecutorThreadAndALoadOnTheLoaderThreadShareTheModelList) {
  SlowToUnloadExecutor executor;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, std::string>> loaded;  // (model, error)
  ScriptedRouter router([&](int session, ScriptedRouter::Stream* stream) {
    ScriptedRouter::Ack(stream, session);
    auto wait_loaded = [&](const std::string& model) {
      v1::WorkerMessage m;
      while (stream->Read(&m)) {
        if (!m.has_model_loaded()) continue;
        std::lock_guard<std::mutex> lock(mu);
        loaded.emplace_back(m.model_loaded().model(), m.model_loaded().error());
        cv.notify_all();
        if (m.model_loaded().model() == model) return true;
      }
      return false;
    };
    stream->Write(LoadEmu("a"));
    if (!wait_loaded("a")) return grpc::Status::OK;
    v1::RouterMessage unload;
    unload.mutable_unload_model()->set_model("a");
    stream->Write(unload);
    stream->Write(LoadEmu("b"));
    wait_loaded("b");
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
    }
    return grpc::Status::OK;
  });
  RouterLinkOptions o = Options(router.address());
  o.package_dir = ::testing::TempDir() + "/router_link_unload_load";
  RouterLink link(o, &executor, {testing::SmallModelEntry()});
  auto run = RunAsync(link);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return loaded.size() >= 2; }));
    ASSERT_EQ(loaded.size(), 2u);
    EXPECT_EQ(loaded[0], std::make_pair(std::string("a"), std::string()));
    EXPECT_EQ(loaded[1], std::make_pair(std::string("b"), std::string()));
  }
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

// Placement's footprint: each model takes its profile's memory_bytes; an
// unload takes 100 ms on the executor thread, so that a load right behind
// it on the loader thread finds the memory still taken unless it waits.
class FootprintExecutor final : public Executor {
 public:
  std::string_view kind() const override { return "footprint"; }
  absl::Status Load(const ModelEntry& m) override {
    if (slow_loads.count(m.name) > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(mu_);
    bytes_[m.name] = m.profile.memory_bytes;
    return absl::OkStatus();
  }
  absl::Status Unload(const std::string& model) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_.erase(model) > 0 ? absl::OkStatus() : absl::NotFoundError(model);
  }
  int64_t ResidentBytes(const std::string& model) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = bytes_.find(model);
    return it == bytes_.end() ? 0 : it->second;
  }
  absl::StatusOr<std::vector<HostTensor>> Run(const std::string&, const ControlTuple&,
                                              absl::Span<const v1::Tensor* const> inputs) override {
    return std::vector<HostTensor>(inputs.size(),
                                   MakeFloatTensor({3}, std::vector<float>{0, 1, 0}));
  }

  bool Holds(const std::string& model) {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_.count(model) > 0;
  }

  std::set<std::string> slow_loads;  // take 100 ms (set before the link runs)

 private:
  std::mutex mu_;
  std::map<std::string, int64_t> bytes_;
};

// A worker with a memory budget registers its repository and the budget,
// loads nothing until asked, loads a repository model on LoadModel
// (from_repository) reporting the measured footprint, refuses one that
// does not fit beside what it holds (with the figure), waits for an
// UnloadModel received before a load, and refuses a model it does not have.
TEST(RouterLink, ABudgetedWorkerLoadsItsRepositoryModelsWhenAskedWithinTheBudget) {
  FootprintExecutor executor;
  struct Reply {
    std::string model, error;
    int64_t bytes;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Reply> replies;
  ScriptedRouter router([&](int session, ScriptedRouter::Stream* stream) {
    ScriptedRouter::Ack(stream, session);
    auto load = [&](const std::string& model) {
      v1::RouterMessage msg;
      msg.mutable_load_model()->set_model(model);
      msg.mutable_load_model()->set_from_repository(true);
      stream->Write(msg);
      v1::WorkerMessage m;
      while (stream->Read(&m)) {
        if (!m.has_model_loaded()) continue;
        std::lock_guard<std::mutex> lock(mu);
        replies.push_back({m.model_loaded().model(), m.model_loaded().error(),
                           m.model_loaded().memory_bytes()});
        cv.notify_all();
        return;
      }
    };
    load("x");
    load("y");  // 600 + 600 > 1000: refused
    v1::RouterMessage unload;
    unload.mutable_unload_model()->set_model("x");
    stream->Write(unload);
    load("y");  // after x's unload (100 ms on the executor thread)
    load("y");  // held already: ready at once
    load("nope");
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
    }
    return grpc::Status::OK;
  });
  std::vector<ModelEntry> repository;
  for (const char* name : {"x", "y"}) {
    ModelEntry e = testing::SmallModelEntry();
    e.name = name;
    e.profile.model = name;
    e.profile.memory_bytes = 600;
    repository.push_back(e);
  }
  RouterLinkOptions o = Options(router.address());
  o.memory_budget = 1000;
  RouterLink link(o, &executor, repository);
  auto run = RunAsync(link);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return replies.size() >= 5; }));
  }
  const v1::RegisterWorker reg = router.registration();
  EXPECT_EQ(reg.memory_budget_bytes(), 1000);
  EXPECT_THAT(std::vector<std::string>(reg.models().begin(), reg.models().end()),
              ::testing::ElementsAre("x", "y"));
  ASSERT_EQ(replies.size(), 5u);
  EXPECT_EQ(replies[0].model, "x");
  EXPECT_EQ(replies[0].error, "");
  EXPECT_EQ(replies[0].bytes, 600);
  EXPECT_EQ(replies[1].model, "y");
  EXPECT_THAT(replies[1].error, HasSubstr("budget"));
  EXPECT_EQ(replies[1].bytes, 600) << "the refusal carries the measured figure";
  EXPECT_EQ(replies[2].error, "") << "the unload received before it was waited for";
  EXPECT_EQ(replies[2].bytes, 600);
  EXPECT_EQ(replies[3].error, "");
  EXPECT_EQ(replies[3].bytes, 600);
  EXPECT_EQ(replies[4].model, "nope");
  EXPECT_THAT(replies[4].error, HasSubstr("not in this worker's repository"));
  EXPECT_EQ(executor.ResidentBytes("x"), 0);
  EXPECT_EQ(executor.ResidentBytes("y"), 600);
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

// The router removed a model while the worker loaded it: the UnloadModel
// that follows the LoadModel frees it once loaded, and its memory is not
// counted against the next load (the 100-ms load finishes after the unload
// reached the executor thread, the order the worker must handle).
TEST(RouterLink, ABudgetedWorkerFreesAModelUnloadedWhileItLoaded) {
  FootprintExecutor executor;
  executor.slow_loads = {"x"};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, std::string>> replies;  // (model, error)
  ScriptedRouter router([&](int session, ScriptedRouter::Stream* stream) {
    ScriptedRouter::Ack(stream, session);
    auto send = [&](const std::string& model, bool load) {
      v1::RouterMessage msg;
      if (load) {
        msg.mutable_load_model()->set_model(model);
        msg.mutable_load_model()->set_from_repository(true);
      } else {
        msg.mutable_unload_model()->set_model(model);
      }
      stream->Write(msg);
    };
    auto reply = [&] {
      v1::WorkerMessage m;
      while (stream->Read(&m)) {
        if (!m.has_model_loaded()) continue;
        std::lock_guard<std::mutex> lock(mu);
        replies.emplace_back(m.model_loaded().model(), m.model_loaded().error());
        cv.notify_all();
        return;
      }
    };
    send("x", true);
    send("x", false);
    reply();
    send("y", true);  // fits only if x's 600 bytes are free
    reply();
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
    }
    return grpc::Status::OK;
  });
  std::vector<ModelEntry> repository;
  for (const char* name : {"x", "y"}) {
    ModelEntry e = testing::SmallModelEntry();
    e.name = name;
    e.profile.model = name;
    e.profile.memory_bytes = 600;
    repository.push_back(e);
  }
  RouterLinkOptions o = Options(router.address());
  o.memory_budget = 1000;
  RouterLink link(o, &executor, repository);
  auto run = RunAsync(link);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return replies.size() >= 2; }));
  }
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].first, "x");
  EXPECT_EQ(replies[1], std::make_pair(std::string("y"), std::string()));
  EXPECT_EQ(executor.ResidentBytes("x"), 0);
  EXPECT_EQ(executor.ResidentBytes("y"), 600);
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

// A hot-registered package on a budgeted worker (issue 43): stored, not
// loaded; placement then loads it from the store like a repository model,
// evicts it (keep_package), and loads it again; a second version stored as
// "emu@2" loads the same way; a new session declares both with their
// versions; the unregistration's UnloadModel (no keep_package) deletes it.
TEST(RouterLink, ABudgetedWorkerStoresAHotPackageAndLoadsItAgainAfterAnEviction) {
  FootprintExecutor executor;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, std::string>> replies;  // (model, error)
  std::vector<bool> held;  // executor.Holds(model) at each reply
  std::vector<bool> stored_flags;  // ModelLoaded.stored of each reply
  ScriptedRouter router([&](int session, ScriptedRouter::Stream* stream) {
    ScriptedRouter::Ack(stream, session);
    auto reply = [&] {
      v1::WorkerMessage m;
      while (stream->Read(&m)) {
        if (!m.has_model_loaded()) continue;
        std::lock_guard<std::mutex> lock(mu);
        replies.emplace_back(m.model_loaded().model(), m.model_loaded().error());
        held.push_back(executor.Holds(m.model_loaded().model()));
        stored_flags.push_back(m.model_loaded().stored());
        cv.notify_all();
        return;
      }
    };
    auto load = [&](const std::string& model) {
      v1::RouterMessage msg;
      msg.mutable_load_model()->set_model(model);
      msg.mutable_load_model()->set_from_repository(true);
      stream->Write(msg);
      reply();
    };
    auto unload = [&](const std::string& model, bool keep) {
      v1::RouterMessage msg;
      msg.mutable_unload_model()->set_model(model);
      msg.mutable_unload_model()->set_keep_package(keep);
      stream->Write(msg);
    };
    if (session == 1) {
      stream->Write(LoadEmu("hot"));
      reply();              // 0: stored
      load("hot");          // 1
      unload("hot", true);  // placement evicts it
      load("hot");          // 2: loaded again from the stored package
      stream->Write(LoadEmu("emu@2"));
      reply();              // 3: stored
      load("emu@2");        // 4
      return grpc::Status::OK;  // a new session follows
    }
    unload("hot", false);  // unregistered
    load("hot");           // 5: gone
    // Unregistered while it is being stored: not left stored (the reply
    // may be either, by which thread got there first).
    stream->Write(LoadEmu("late"));
    unload("late", false);
    reply();       // 6
    load("late");  // 7: gone
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
    }
    return grpc::Status::OK;
  });
  std::vector<ModelEntry> repository;
  ModelEntry x = testing::SmallModelEntry();
  x.name = "x";
  x.profile.model = "x";
  repository.push_back(x);
  RouterLinkOptions o = Options(router.address());
  o.memory_budget = 1000;
  o.package_dir = ::testing::TempDir() + "/router_link_stored_package";
  RouterLink link(o, &executor, repository);
  auto run = RunAsync(link);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return replies.size() >= 8; }));
  }
  ASSERT_EQ(replies.size(), 8u);
  EXPECT_EQ(replies[0], std::make_pair(std::string("hot"), std::string()));
  EXPECT_FALSE(held[0]) << "stored, not loaded";
  EXPECT_EQ(std::vector<bool>(stored_flags.begin(), stored_flags.begin() + 6),
            (std::vector<bool>{true, false, false, true, false, false}));
  EXPECT_EQ(replies[1], std::make_pair(std::string("hot"), std::string()));
  EXPECT_TRUE(held[1]);
  EXPECT_EQ(replies[2], std::make_pair(std::string("hot"), std::string()))
      << "loadable again after an eviction";
  EXPECT_TRUE(held[2]);
  EXPECT_EQ(replies[3], std::make_pair(std::string("emu@2"), std::string()));
  EXPECT_FALSE(held[3]);
  EXPECT_EQ(replies[4], std::make_pair(std::string("emu@2"), std::string()));
  EXPECT_TRUE(held[4]);
  EXPECT_EQ(replies[5].first, "hot");
  EXPECT_THAT(replies[5].second, HasSubstr("not in this worker's repository"));
  EXPECT_EQ(replies[7].first, "late");
  EXPECT_THAT(replies[7].second, HasSubstr("not in this worker's repository"));
  EXPECT_FALSE(std::filesystem::exists(o.package_dir + "/late"));
  EXPECT_FALSE(std::filesystem::exists(o.package_dir + "/hot")) << "deleted when unregistered";
  EXPECT_TRUE(std::filesystem::exists(o.package_dir + "/emu@2/emu"));
  // The second session's registration: the stored packages, with versions.
  const v1::RegisterWorker reg = router.registration();
  EXPECT_THAT(std::vector<std::string>(reg.models().begin(), reg.models().end()),
              ::testing::UnorderedElementsAre("x", "hot", "emu@2"));
  std::set<std::string> versioned;
  for (const auto& v : reg.versions()) versioned.insert(v.model());
  EXPECT_EQ(versioned, (std::set<std::string>{"hot", "emu@2"}));
  link.Stop();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(run.get().ok());
}

}  // namespace
}  // namespace superserve
