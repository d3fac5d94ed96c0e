// gRPC keepalive on the worker link must not cut a connection that the
// router's own liveness rule (--heartbeat_ms x --missed_heartbeats) still
// keeps: a process stalled for a few seconds (a loaded host moving 128 MiB
// batches, a paging pause) used to lose its stream to a 1-s keepalive
// watchdog on either end although the operator had allowed 10 s of silence,
// and the router answered the stalled worker's queries UNAVAILABLE.
//
// The stall is made deterministic with SIGSTOP/SIGCONT on one process.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/harness/local_cluster.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::EmulatedRepo;
using testing::MakeWorkDir;
using testing::ReadAll;

// 500-ms heartbeats, 20 of them may be missed: the router declares a
// worker dead after 10 s of silence.
std::unique_ptr<LocalCluster> StartTolerantCluster(const std::string& dir) {
  LocalClusterOptions o;
  o.bin_dir = BinDir();
  o.model_repo = EmulatedRepo();
  o.work_dir = dir;
  o.workers = 1;
  o.emulate = true;
  o.router_flags = {"--heartbeat_ms=500", "--missed_heartbeats=20"};
  o.startup_timeout = Seconds(30);
  auto c = LocalCluster::Start(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void Stall(Subprocess& process, Nanos how_long) {
  ASSERT_EQ(kill(process.pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::nanoseconds(how_long));
  ASSERT_EQ(kill(process.pid(), SIGCONT), 0);
}

// One query is answered OK.
void ExpectServes(LocalCluster& cluster) {
  InferenceClient client(cluster.router_address());
  ASSERT_TRUE(client.WaitForConnected(Seconds(10)));
  v1::InferRequest req;
  req.set_model("emu");
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)), req.mutable_input());
  auto r = client.Infer(req, Seconds(10));
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(KeepaliveIntegration, AWorkerStalledWithinTheHeartbeatToleranceKeepsItsConnection) {
  const std::string dir = MakeWorkDir();
  auto cluster = StartTolerantCluster(dir);
  ASSERT_NE(cluster, nullptr);
  // 4 s: past the router's old keepalive (a ping after 1 s of silence,
  // unanswered within 1 s more) and well inside the 10 s allowed.
  Stall(cluster->worker(0), Seconds(4));
  ExpectServes(*cluster);
  const std::string router_log = ReadAll(dir + "/router.log");
  EXPECT_EQ(Count(router_log, " gone ("), 0) << "the router dropped the stalled worker: see "
                                               << dir << "/router.log";
  EXPECT_EQ(Count(router_log, " registered"), 1) << router_log;
}

TEST(KeepaliveIntegration, ARouterStalledWithinTheHeartbeatToleranceKeepsItsWorkers) {
  const std::string dir = MakeWorkDir();
  auto cluster = StartTolerantCluster(dir);
  ASSERT_NE(cluster, nullptr);
  // 4 s: past the worker's old keepalive watchdog (1 s + 1 s) and inside
  // the worker's default keepalive timeout.
  Stall(cluster->router(), Seconds(4));
  ExpectServes(*cluster);
  const std::string worker_log = ReadAll(dir + "/worker0.log");
  EXPECT_FALSE(absl::StrContains(worker_log, "reconnecting"))
      << "the worker dropped its connection to the stalled router: see " << dir
      << "/worker0.log";
  EXPECT_EQ(Count(ReadAll(dir + "/router.log"), " gone ("), 0) << "see " << dir << "/router.log";
}

}  // namespace
}  // namespace superserve
