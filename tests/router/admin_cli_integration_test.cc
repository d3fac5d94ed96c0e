// superserve-admin against a real router and emulated workers: exit codes,
// a malformed package refused naming its field, a package registered at run
// time loaded by the running workers over their streams (and by one that
// joins later) and answering, unregistered with a drain under load.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "bench/harness/local_cluster.h"
#include "common/clock.h"
#include "common/tensor_codec.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "router/client/inference_client.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::BinDir;
using testing::EmulatedRepo;
using testing::MakeWorkDir;

using testing::ReadAll;

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

class AdminCli : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = MakeWorkDir();
    repo_ = work_ + "/repo";
    fs::create_directories(repo_);
    fs::copy(EmulatedRepo() + "/emu", repo_ + "/emu");
    LocalClusterOptions o;
    o.bin_dir = BinDir();
    o.model_repo = repo_;
    o.work_dir = work_;
    o.workers = 1;
    o.emulate = true;
    o.router_flags = RouterFlags();
    auto c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
    token_file_ = work_ + "/cli.token";
    std::ofstream(token_file_) << cluster_->admin_token() << "\n";
  }
  void TearDown() override {
    cluster_.reset();
    fs::remove_all(work_);
  }
  virtual std::vector<std::string> RouterFlags() const { return {}; }

  CliResult Run(std::vector<std::string> args, bool with_token_file = true) {
    std::vector<std::string> argv = {BinDir() + "/superserve-admin",
                                     "--router=" + cluster_->router_address()};
    if (with_token_file) argv.push_back("--admin_token_file=" + token_file_);
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = work_ + "/cli-" + std::to_string(runs_++) + ".log";
    CliResult r;
    auto p = Subprocess::Start(argv, log);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return r;
    auto st = p->Wait(Seconds(30));
    EXPECT_TRUE(st.has_value());
    if (st.has_value() && WIFEXITED(*st)) r.exit_code = WEXITSTATUS(*st);
    r.output = ReadAll(log);
    return r;
  }

  // A copy of emu named `name`, its manifest edited by `edits`.
  void WritePackage(const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& edits = {}) {
    const std::string dir = repo_ + "/" + name;
    fs::create_directories(dir);
    std::string profile = ReadAll(EmulatedRepo() + "/emu/profile.json");
    std::string manifest = ReadAll(EmulatedRepo() + "/emu/manifest.json");
    profile = absl::StrReplaceAll(profile, {{"\"model\": \"emu\"", "\"model\": \"" + name + "\""}});
    manifest = absl::StrReplaceAll(manifest, {{"\"name\": \"emu\"", "\"name\": \"" + name + "\""}});
    manifest = absl::StrReplaceAll(manifest, edits);
    std::ofstream(dir + "/profile.json") << profile;
    std::ofstream(dir + "/manifest.json") << manifest;
  }

  std::string work_, repo_, token_file_;
  std::unique_ptr<LocalCluster> cluster_;
  int runs_ = 0;
};

TEST_F(AdminCli, ExitCodesForUsageTokensAndUnknownModels) {
  auto list = Run({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, HasSubstr("emu  family=emulated subnets=4"));
  EXPECT_THAT(list.output, HasSubstr("workers=1"));
  // Accuracy (2 decimals) and latency (3 significant figures) rounded, with
  // units (latencies read "latency_ms@b1=0.380853..9.11264").
  EXPECT_THAT(list.output,
              ::testing::ContainsRegex("accuracy=[0-9]+\\.[0-9][0-9]\\.\\.[0-9]+\\.[0-9][0-9]% "));
  EXPECT_THAT(list.output,
              ::testing::ContainsRegex(
                  " latency@batch[0-9]+=[0-9.]{1,5}\\.\\.[0-9.]{1,5} ms "));

  std::ofstream(work_ + "/wrong.token") << "not-the-token";
  auto wrong = Run({"--admin_token_file=" + work_ + "/wrong.token", "list"}, false);
  EXPECT_EQ(wrong.exit_code, 3) << wrong.output;
  EXPECT_THAT(wrong.output, HasSubstr("PERMISSION_DENIED"));

  unsetenv("SUPERSERVE_ADMIN_TOKEN");
  auto none = Run({"list"}, false);
  EXPECT_EQ(none.exit_code, 2) << none.output;
  // The environment variable is the other way to pass the token.
  setenv("SUPERSERVE_ADMIN_TOKEN", cluster_->admin_token().c_str(), 1);
  auto env = Run({"status", "emu"}, false);
  unsetenv("SUPERSERVE_ADMIN_TOKEN");
  EXPECT_EQ(env.exit_code, 0) << env.output;
  EXPECT_THAT(env.output, HasSubstr("emu  family=emulated"));

  EXPECT_EQ(Run({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Run({"status"}).exit_code, 2);
  auto unknown = Run({"status", "nope"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("not registered"));
}

TEST_F(AdminCli, MalformedPackageIsRefusedNamingTheField) {
  WritePackage("bad", {{"\"supernet\"", "\"hypernet\""}});
  auto r = Run({"register", "bad"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(r.output, HasSubstr("manifest.json: field kind"));
  EXPECT_THAT(r.output, HasSubstr("hypernet"));
  // Refused before any worker loaded anything: no loading progress first.
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("the workers load the package")));
  auto list = Run({"list"});
  EXPECT_THAT(list.output, ::testing::Not(HasSubstr("bad")));
}

TEST_F(AdminCli, RegisteredPackageIsLoadedByTheWorkersAnswersAndUnregistersUnderLoad) {
  // The running worker loaded its repository before emu2 existed: the
  // router sends it the package over its stream (hot registration).
  WritePackage("emu2");
  auto r = Run({"register", "emu2", "--wait_ready_s=20"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ready after"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("#[0-9]+: ready \\(loaded in [0-9]+ ms\\)"));
  EXPECT_THAT(r.output, HasSubstr("emu2  family=emulated subnets=4"));
  EXPECT_THAT(r.output, HasSubstr("workers=1"));
  auto again = Run({"register", "emu2"});
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_THAT(again.output, HasSubstr("ALREADY_EXISTS"));

  InferenceClient client(cluster_->router_address());
  v1::InferRequest req;
  req.set_model("emu2");
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
               req.mutable_input());
  auto answer = client.Infer(req, Millis(1000));
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_GE(answer->output().shape_size(), 1);
  EXPECT_EQ(answer->output().shape(answer->output().shape_size() - 1), 10);  // num_classes

  // A worker that joins later without the package in its repository gets it too.
  auto w = cluster_->AddWorker({"--models=emu"});
  ASSERT_TRUE(w.ok()) << w.status();
  CliResult status;
  for (int i = 0; i < 100; ++i) {
    status = Run({"status", "emu2"});
    if (status.output.find("workers=2") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(status.output, HasSubstr("workers=2"));

  // Unregister emu2 while both models are queried: every emu query is
  // answered OK; emu2 queries are answered OK until the unregister, then
  // refused naming the model; none is lost.
  std::atomic<bool> stop{false};
  std::atomic<int> emu_ok{0}, emu_failed{0}, emu2_ok{0}, emu2_refused{0}, emu2_other{0};
  std::string emu_failure;
  std::thread load([&] {
    InferenceClient c(cluster_->router_address());
    v1::InferRequest e = req, e2 = req;
    e.set_model("emu");
    while (!stop) {
      auto a = c.Infer(e, Millis(2000));
      if (a.ok()) {
        ++emu_ok;
      } else {
        ++emu_failed;
        emu_failure = a.status().ToString();
      }
      auto b = c.Infer(e2, Millis(2000));
      if (b.ok()) {
        ++emu2_ok;
      } else if (b.status().code() == absl::StatusCode::kInvalidArgument) {
        ++emu2_refused;
      } else {
        ++emu2_other;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto un = Run({"unregister", "emu2"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  load.join();
  EXPECT_EQ(un.exit_code, 0) << un.output;
  EXPECT_THAT(un.output, HasSubstr("unregistered emu2"));
  EXPECT_EQ(Run({"status", "emu2"}).exit_code, 1);
  // Gone from the list and from /metrics (its series stayed until a restart).
  auto listed = Run({"list"});
  EXPECT_THAT(listed.output, HasSubstr("emu  family="));
  EXPECT_THAT(listed.output, ::testing::Not(HasSubstr("emu2")));
  auto scrape = cluster_->ScrapeMetrics();
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_THAT(*scrape, HasSubstr("model=\"emu\""));
  EXPECT_THAT(*scrape, ::testing::Not(HasSubstr("model=\"emu2\""))) << *scrape;
  EXPECT_GT(emu_ok.load(), 20);
  EXPECT_EQ(emu_failed.load(), 0) << emu_failure;
  EXPECT_GT(emu2_ok.load(), 5);
  EXPECT_GT(emu2_refused.load(), 5);
  EXPECT_EQ(emu2_other.load(), 0);
  req.set_model("emu2");
  auto gone = client.Infer(req, Millis(1000));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kInvalidArgument);
  // The workers logged freeing it.
  bool freed = false;
  for (int i = 0; i < 50 && !freed; ++i) {
    for (const auto& e : fs::directory_iterator(work_)) {
      if (e.path().filename().string().rfind("worker", 0) == 0 &&
          ReadAll(e.path().string()).find("model emu2 unloaded") != std::string::npos) {
        freed = true;
      }
    }
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(freed) << "no worker log in " << work_ << " says it unloaded emu2";
}

// A dynamic (early-exit) model was listed "subnets=0 accuracy=100..0%": it
// shows its applications, its exits and their ranges instead.
TEST_F(AdminCli, ADynamicModelIsListedWithItsApplicationsAndExits) {
  auto r = Run({"register", testing::SourceDir() + "/models/dynamic/fmnist-exit",
                "--wait_ready_s=20"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto list = Run({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  // The profile: applications easy, hard, noisy; exit accuracy 98.16,
  // 97.10, 76.53 %; histogram bins (default threshold) from 187 to 982 µs.
  EXPECT_THAT(list.output,
              HasSubstr("fmnist-exit  family=early_exit dynamic: 3 applications (easy, hard, "
                        "noisy), 3 exits, exit accuracy 76.53..98.16%, exec time 0.187..0.982 ms "
                        "batch_sizes=[1,2,4,8,16] workers=1"))
      << list.output;
  EXPECT_THAT(list.output, ::testing::Not(HasSubstr("subnets=0")));
  EXPECT_THAT(list.output, HasSubstr("emu  family=emulated subnets=4"));
}

TEST_F(AdminCli, ATarPackageRegistersLikeItsFolder) {
  WritePackage("emu3");
  const std::string cmd = "tar -cf '" + repo_ + "/emu3.tar' -C '" + repo_ + "' emu3";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  fs::remove_all(repo_ + "/emu3");  // only the archive is left
  auto valid = Run({"validate", repo_ + "/emu3.tar"});
  EXPECT_EQ(valid.exit_code, 0) << valid.output;
  EXPECT_THAT(valid.output, HasSubstr("valid: emu3"));
  auto r = Run({"register", "emu3.tar", "--wait_ready_s=20"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("emu3  family=emulated subnets=4"));
  InferenceClient client(cluster_->router_address());
  v1::InferRequest req;
  req.set_model("emu3");
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
               req.mutable_input());
  auto answer = client.Infer(req, Millis(1000));
  EXPECT_TRUE(answer.ok()) << answer.status();
  // A symlink inside an archive is refused, naming it.
  fs::create_directories(work_ + "/evil/emu4");
  fs::create_symlink("/etc/passwd", work_ + "/evil/emu4/profile.json");
  const std::string evil = "tar -cf '" + work_ + "/evil.tar' -C '" + work_ + "/evil' emu4";
  ASSERT_EQ(std::system(evil.c_str()), 0) << evil;
  auto refused = Run({"register", work_ + "/evil.tar"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("member \"emu4/profile.json\": type '2'"));
}

bool IsV1(double accuracy) {
  return accuracy == 80 || accuracy == 85 || accuracy == 88 || accuracy == 90;
}
bool IsV2(double accuracy) {
  return accuracy == 81 || accuracy == 86 || accuracy == 89 || accuracy == 91;
}

TEST_F(AdminCli, ASecondVersionTakesOverWithoutAFailedQueryAndTheFirstCanBePinned) {
  // emu version 2: the same model, each subnet's accuracy one point higher,
  // so that every answer tells which version served it.
  const std::string v2 = work_ + "/v2/emu";
  fs::create_directories(v2);
  std::ofstream(v2 + "/profile.json") << absl::StrReplaceAll(
      ReadAll(EmulatedRepo() + "/emu/profile.json"),
      {{"\"accuracy\": 80.0", "\"accuracy\": 81.0"}, {"\"accuracy\": 85.0", "\"accuracy\": 86.0"},
       {"\"accuracy\": 88.0", "\"accuracy\": 89.0"}, {"\"accuracy\": 90.0", "\"accuracy\": 91.0"}});
  std::ofstream(v2 + "/manifest.json") << absl::StrReplaceAll(
      ReadAll(EmulatedRepo() + "/emu/manifest.json"), {{"\"version\": 1", "\"version\": 2"}});

  v1::InferRequest req;
  req.set_model("emu");
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
               req.mutable_input());
  struct Answer {
    Nanos sent = 0;
    bool ok = false;
    double accuracy = 0;
    std::string error;
  };
  std::mutex mu;
  std::vector<Answer> unpinned, pinned;
  std::atomic<bool> stop{false};
  RealClock* clock = RealClock::Get();
  std::thread load([&] {
    InferenceClient c(cluster_->router_address());
    v1::InferRequest one = req;
    one.set_model_version(1);
    while (!stop) {
      for (auto* r : {&req, &one}) {
        Answer a;
        a.sent = clock->Now();
        auto got = c.Infer(*r, Millis(2000));
        a.ok = got.ok();
        if (got.ok()) a.accuracy = got->served_by().accuracy();
        if (!got.ok()) a.error = got.status().ToString();
        std::lock_guard<std::mutex> lock(mu);
        (r == &req ? unpinned : pinned).push_back(a);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r = Run({"register", v2});
  const Nanos switched = clock->Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  load.join();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("emu@2  family=emulated"));
  EXPECT_THAT(r.output, HasSubstr("version=2 (current)"));

  int before = 0, after = 0;
  for (const Answer& a : unpinned) {
    ASSERT_TRUE(a.ok) << a.error;  // no failed query during the switch
    if (a.sent >= switched) {
      EXPECT_TRUE(IsV2(a.accuracy)) << a.accuracy;  // the switch is done when register returns
      ++after;
    } else if (IsV1(a.accuracy)) {
      ++before;
    }
  }
  EXPECT_GT(before, 5);
  EXPECT_GT(after, 5);
  for (const Answer& a : pinned) {
    ASSERT_TRUE(a.ok) << a.error;
    EXPECT_TRUE(IsV1(a.accuracy)) << a.accuracy;
  }

  InferenceClient client(cluster_->router_address());
  v1::InferRequest three = req;
  three.set_model_version(3);
  auto none = client.Infer(three, Millis(1000));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("has no version 3 (served: 1, 2)"));
  auto list = Run({"list"});
  EXPECT_THAT(list.output, HasSubstr("version=1\n"));
  EXPECT_THAT(list.output, HasSubstr("version=2 (current)"));
  // The Open Inference Protocol's ModelReady and ModelMetadata resolve a
  // name and version as ModelInfer does. They looked the name up among the
  // internal names: version 2 was NOT_FOUND though ModelInfer served it,
  // metadata said version 1 (a registration count) for the current one,
  // and once version 1 went, "emu" was NOT_FOUND while it was served.
  auto oip = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(cluster_->router_address(), grpc::InsecureChannelCredentials()));
  auto ready = [&](const std::string& version) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest r;
    r.set_name("emu");
    r.set_version(version);
    inference::ModelReadyResponse resp;
    const grpc::Status s = oip->ModelReady(&ctx, r, &resp);
    return s.ok() ? (resp.ready() ? "ready" : "not ready") : s.error_message();
  };
  auto metadata_versions = [&](const std::string& version) {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest r;
    r.set_name("emu");
    r.set_version(version);
    inference::ModelMetadataResponse resp;
    const grpc::Status s = oip->ModelMetadata(&ctx, r, &resp);
    if (!s.ok()) return s.error_message();
    EXPECT_EQ(resp.name(), "emu");
    return absl::StrJoin(resp.versions(), ",");
  };
  EXPECT_EQ(ready(""), "ready");
  EXPECT_EQ(ready("1"), "ready");
  EXPECT_EQ(ready("2"), "ready");
  EXPECT_THAT(ready("3"), HasSubstr("no model \"emu\" version 3; serving: emu v1, emu v2"));
  EXPECT_EQ(metadata_versions(""), "2");
  EXPECT_EQ(metadata_versions("1"), "1");
  EXPECT_EQ(metadata_versions("2"), "2");
  auto same = Run({"register", v2});
  EXPECT_EQ(same.exit_code, 1) << same.output;
  EXPECT_THAT(same.output, HasSubstr("ALREADY_EXISTS"));
  // The current version cannot go while another stays.
  auto current = Run({"unregister", "emu", "--version=2"});
  EXPECT_EQ(current.exit_code, 1) << current.output;
  EXPECT_THAT(current.output, HasSubstr("is the current one"));
  // The status code by name (it read "ERROR").
  EXPECT_THAT(current.output, HasSubstr("unregister failed: FAILED_PRECONDITION: "));
  auto old = Run({"unregister", "emu", "--version=1"});
  EXPECT_EQ(old.exit_code, 0) << old.output;
  v1::InferRequest one = req;
  one.set_model_version(1);
  EXPECT_EQ(client.Infer(one, Millis(1000)).status().code(), absl::StatusCode::kInvalidArgument);
  auto still = client.Infer(req, Millis(1000));
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_TRUE(IsV2(still->served_by().accuracy()));
  EXPECT_EQ(ready(""), "ready");
  EXPECT_EQ(ready("2"), "ready");
  EXPECT_THAT(ready("1"), HasSubstr("no model \"emu\" version 1"));
  EXPECT_EQ(metadata_versions(""), "2");
}

// validate runs the router's loader locally: no router, no token.
TEST(AdminCliValidate, ChecksAPackageWithoutARouter) {
  const std::string work = MakeWorkDir();
  auto run = [&](const std::string& dir) {
    CliResult r;
    const std::string log = work + "/validate.log";
    auto p = Subprocess::Start({BinDir() + "/superserve-admin", "validate", dir}, log);
    EXPECT_TRUE(p.ok());
    if (!p.ok()) return r;
    auto st = p->Wait(Seconds(30));
    if (st.has_value() && WIFEXITED(*st)) r.exit_code = WEXITSTATUS(*st);
    r.output = ReadAll(log);
    return r;
  };
  auto good = run(testing::SourceDir() + "/models/dynamic/fmnist-exit");
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_THAT(good.output, HasSubstr("valid: fmnist-exit (package with manifest, early_exit, "
                                     "dynamic: 3 applications, 3 exits)"));
  fs::create_directories(work + "/emu");
  std::ofstream(work + "/emu/profile.json") << ReadAll(EmulatedRepo() + "/emu/profile.json");
  std::ofstream(work + "/emu/manifest.json")
      << absl::StrReplaceAll(ReadAll(EmulatedRepo() + "/emu/manifest.json"),
                             {{"\"default_slo_ms\": 50", "\"default_slo_ms\": 0"}});
  auto bad = run(work + "/emu");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("manifest.json: field default_slo_ms"));
  // A checkpoint cut short (head -c 100000 checkpoint.pt) was "valid" and
  // failed only when a worker loaded it after register.
  const std::string source = testing::SourceDir() + "/models/fmnist";
  fs::create_directories(work + "/fmnist");
  for (const char* f : {"manifest.json", "profile.json"}) {
    fs::copy_file(source + "/" + f, work + "/fmnist/" + f);
  }
  std::ofstream(work + "/fmnist/checkpoint.pt", std::ios::binary)
      << ReadAll(source + "/checkpoint.pt").substr(0, 100000);
  auto truncated = run(work + "/fmnist");
  EXPECT_EQ(truncated.exit_code, 1) << truncated.output;
  EXPECT_THAT(truncated.output, HasSubstr("model package " + work + "/fmnist: manifest.json: "
                                          "field checkpoint: \"checkpoint.pt\": not a complete "
                                          "LibTorch archive"));
  EXPECT_THAT(truncated.output, HasSubstr("truncated"));
  fs::remove_all(work);
}

// Triton's poll mode: the router re-scans its repository (every 0.1 s here).
class AdminCliPolling : public AdminCli {
 protected:
  std::vector<std::string> RouterFlags() const override { return {"--repository_poll_s=0.1"}; }
  // Runs `status name` until its exit code is `want` (at most 20 s).
  CliResult WaitForStatus(const std::string& name, int want) {
    CliResult r;
    for (int i = 0; i < 100; ++i) {
      r = Run({"status", name});
      if (r.exit_code == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return r;
  }
};

TEST_F(AdminCliPolling, APackageCopiedInIsServedAndOneRemovedIsUnregistered) {
  WritePackage("emu2");
  CliResult added = WaitForStatus("emu2", 0);
  ASSERT_EQ(added.exit_code, 0) << added.output;
  EXPECT_THAT(added.output, HasSubstr("emu2  family=emulated"));
  // The running worker was sent it: the model has a worker, without any
  // superserve-admin register.
  for (int i = 0; i < 100 && added.output.find("workers=1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    added = Run({"status", "emu2"});
  }
  EXPECT_THAT(added.output, HasSubstr("workers=1"));
  fs::remove_all(repo_ + "/emu2");
  CliResult removed = WaitForStatus("emu2", 1);
  EXPECT_EQ(removed.exit_code, 1) << removed.output;
  // The start-up model was left alone throughout.
  auto emu = Run({"status", "emu"});
  EXPECT_EQ(emu.exit_code, 0) << emu.output;
}

}  // namespace
}  // namespace superserve
