// A router restart with real processes on 127.0.0.1: one superserve-router on
// a port chosen free at run time (fixed by --listen, so that the restarted
// router binds it again) and one emulated superserve-worker. While the router
// is down a client gets UNAVAILABLE quickly, never a hang; once it is back,
// the same worker process registers again and serves.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/subprocess.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "superserve/v1/admin.grpc.pb.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::EmulatedRepo;
using testing::MakeWorkDir;

constexpr char kToken[] = "restart-test-token";

// A port on 127.0.0.1 that was free a moment ago (bound to 0, read, released).
int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return 0;
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A channel of its own (no subchannel shared with, or connection backoff
// inherited from, another channel to the same address).
std::shared_ptr<grpc::Channel> FreshChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// Live workers serving model "emu" per Admin.ListModels; -1 when the router
// does not answer.
int LiveWorkers(const std::string& address) {
  auto stub = v1::Admin::NewStub(FreshChannel(address));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  v1::ListModelsResponse resp;
  if (!stub->ListModels(&ctx, v1::ListModelsRequest(), &resp).ok()) return -1;
  for (const auto& m : resp.models()) {
    if (m.name() == "emu") return m.workers();
  }
  return 0;
}

bool WaitForLiveWorkers(const std::string& address, int n, Nanos timeout) {
  const Nanos end = RealClock::Get()->Now() + timeout;
  while (RealClock::Get()->Now() < end) {
    if (LiveWorkers(address) == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

v1::InferRequest Request() {
  v1::InferRequest req;
  req.set_model("emu");
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
               req.mutable_input());
  return req;
}

using testing::ReadAll;

class RouterRestart : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    port_ = PickFreePort();
    ASSERT_GT(port_, 0);
    address_ = absl::StrCat("127.0.0.1:", port_);
    const int worker_port = PickFreePort();
    ASSERT_GT(worker_port, 0);
    worker_address_ = absl::StrCat("127.0.0.1:", worker_port);
    dir_ = MakeWorkDir();
  }

  // Starts the router on address_; returns once it serves (port file).
  void StartRouter(int generation) {
    const std::string port_file = absl::StrCat(dir_, "/router", generation, ".ports");
    auto r = Subprocess::Start(
        {BinDir() + "/superserve-router", absl::StrCat("--listen=", address_),
         absl::StrCat("--worker_listen=", worker_address_), "--metrics_listen=127.0.0.1:0", absl::StrCat("--model_repo=", EmulatedRepo()),
         absl::StrCat("--admin_token=", kToken), absl::StrCat("--port_file=", port_file),
         "--heartbeat_ms=200"},
        absl::StrCat(dir_, "/router", generation, ".log"));
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = *std::move(r);
    auto ports = WaitForFile(port_file, Seconds(20), &router_);
    ASSERT_TRUE(ports.ok()) << "router did not start on " << address_ << " (see " << dir_
                            << "): " << ports.status();
    ASSERT_TRUE(absl::StrContains(*ports, absl::StrCat("grpc=", port_, "\n"))) << *ports;
  }

  // `n` queries one after another; how many came back OK.
  int ServeQueries(InferenceClient& client, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) {
      auto r = client.Infer(Request(), Seconds(2));
      if (r.ok()) {
        ++ok;
      } else {
        ADD_FAILURE() << "query " << i << ": " << r.status();
      }
    }
    return ok;
  }

  int port_ = 0;
  std::string address_;
  std::string worker_address_;  // the router's --worker_listen, fixed across restarts
  std::string dir_;
  Subprocess router_;
  Subprocess worker_;
};

INSTANTIATE_TEST_SUITE_P(Signals, RouterRestart, ::testing::Values(SIGTERM, SIGKILL),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGTERM ? "SigTerm" : "SigKill";
                         });

TEST_P(RouterRestart, WorkerReconnectsAndServesWhileClientsGetUnavailableMeanwhile) {
  ASSERT_NO_FATAL_FAILURE(StartRouter(1));
  const std::string worker_log = dir_ + "/worker.log";
  auto w = Subprocess::Start({BinDir() + "/superserve-worker", absl::StrCat("--router=", worker_address_),
                              absl::StrCat("--model_repo=", EmulatedRepo()), "--emulate",
                              "--name=w0"},
                             worker_log);
  ASSERT_TRUE(w.ok()) << w.status();
  worker_ = *std::move(w);
  const pid_t worker_pid = worker_.pid();
  ASSERT_TRUE(WaitForLiveWorkers(address_, 1, Seconds(20))) << "see " << worker_log;

  auto client = std::make_unique<InferenceClient>(address_);
  ASSERT_TRUE(client->WaitForConnected(Seconds(5)));
  EXPECT_EQ(ServeQueries(*client, 20), 20);

  // The router goes away (SIGTERM: it closes the streams; SIGKILL: the
  // connections just break).
  router_.Kill(GetParam());
  ASSERT_TRUE(router_.Wait(Seconds(15)).has_value()) << "router did not exit";
  const Nanos down_at = RealClock::Get()->Now();

  // Meanwhile: UNAVAILABLE before the 10 s deadline (a hang would show as
  // DEADLINE_EXCEEDED or an answer at the deadline).
  for (int i = 0; i < 3; ++i) {
    const Nanos t0 = RealClock::Get()->Now();
    auto r = client->Infer(Request(), Seconds(10));
    const Nanos took = RealClock::Get()->Now() - t0;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_LT(took, Seconds(9)) << "query " << i << " while the router is down";
  }
  // Down long enough for several failed reconnection attempts.
  std::this_thread::sleep_for(
      std::chrono::nanoseconds(std::max<Nanos>(0, down_at + Millis(1500) - RealClock::Get()->Now())));
  ASSERT_TRUE(worker_.running()) << "the worker exited with the router (see " << worker_log << ")";

  // Back on the same port: the same worker process registers again in time.
  ASSERT_NO_FATAL_FAILURE(StartRouter(2));
  const Nanos up_at = RealClock::Get()->Now();
  ASSERT_TRUE(WaitForLiveWorkers(address_, 1, Seconds(10)))
      << "the worker did not re-register within 10 s (see " << worker_log << ")";
  const double back_s = ToSeconds(RealClock::Get()->Now() - up_at);
  std::printf("worker re-registered %.2f s after the router came back (down %.2f s)\n", back_s,
              ToSeconds(up_at - down_at));
  ASSERT_TRUE(worker_.running());
  EXPECT_EQ(worker_.pid(), worker_pid);

  // And serves: every query OK (a fresh client: the old one's channel may
  // still sit in gRPC's own reconnection backoff, which is not under test).
  client.reset();
  InferenceClient again(FreshChannel(address_));
  ASSERT_TRUE(again.WaitForConnected(Seconds(5)));
  EXPECT_EQ(ServeQueries(again, 20), 20);

  // The worker says it was a reconnection, with failed attempts before it,
  // and logged them at a bounded rate (not one line per attempt forever).
  const std::string log = ReadAll(worker_log);
  EXPECT_TRUE(absl::StrContains(log, "re-registered with router")) << log;
  EXPECT_TRUE(absl::StrContains(log, "attempt 1 failed")) << log;
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 40) << log;

  // A clean stop reports the reconnect.
  worker_.Kill(SIGTERM);
  auto st = worker_.Wait(Seconds(5));
  ASSERT_TRUE(st.has_value()) << "worker did not stop on SIGTERM";
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  EXPECT_TRUE(absl::StrContains(ReadAll(worker_log), "1 reconnects")) << ReadAll(worker_log);
}

// --reconnect=false keeps the old behaviour: the worker exits with the router.
TEST(RouterRestartNoReconnect, WorkerExitsWhenTheRouterGoes) {
  const int port = PickFreePort();
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const int worker_port = PickFreePort();
  ASSERT_GT(worker_port, 0);
  const std::string worker_address = absl::StrCat("127.0.0.1:", worker_port);
  const std::string dir = MakeWorkDir();
  auto router = Subprocess::Start(
      {BinDir() + "/superserve-router", absl::StrCat("--listen=", address),
       absl::StrCat("--worker_listen=", worker_address), "--metrics_listen=127.0.0.1:0", absl::StrCat("--model_repo=", EmulatedRepo()),
       absl::StrCat("--admin_token=", kToken), absl::StrCat("--port_file=", dir, "/router.ports")},
      dir + "/router.log");
  ASSERT_TRUE(router.ok());
  ASSERT_TRUE(WaitForFile(dir + "/router.ports", Seconds(20), &*router).ok());
  auto worker = Subprocess::Start({BinDir() + "/superserve-worker",
                                   absl::StrCat("--router=", worker_address),
                                   absl::StrCat("--model_repo=", EmulatedRepo()), "--emulate",
                                   "--reconnect=false"},
                                  dir + "/worker.log");
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(WaitForLiveWorkers(address, 1, Seconds(20)));
  router->Kill(SIGKILL);
  auto st = worker->Wait(Seconds(10));
  ASSERT_TRUE(st.has_value()) << "the worker kept running without its router";
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1);
}

}  // namespace
}  // namespace superserve
