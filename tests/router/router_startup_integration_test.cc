// The router's start-up refusals and the answers of its two ports, against
// the real binaries (superserve-router, -worker, -admin) on 127.0.0.1:
// addresses out of range or shared (with a second router on a taken port),
// --worker_tls without a certificate, tokens gRPC could not send (which
// made every worker and superserve-admin abort), numeric flags out of range,
// the Admin service off, a client on the worker port and a worker on the
// client port, and a worker refused for a wrong fleet token.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "superserve/v1/admin.grpc.pb.h"
#include "superserve/v1/inference.grpc.pb.h"
#include "superserve/v1/worker.grpc.pb.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::EmulatedRepo;
using ::testing::HasSubstr;
using testing::MakeWorkDir;
using ::testing::Not;

using testing::ReadAll;

struct Exit {
  int code = -1;  // exit status; 128 + signal; -1: still running after the timeout (stopped)
  std::string log;
};

// Runs `argv` with its output in `log`, for at most `timeout`.
// `timeout` is a hang guard: every run here exits by itself at once on a
// quiet host; a loaded one took over 5 s to start a LibTorch-linked worker.
Exit RunFor(const std::vector<std::string>& argv, const std::string& log,
            Nanos timeout = Seconds(60)) {
  Exit e;
  auto p = Subprocess::Start(argv, log);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return e;
  if (auto st = p->Wait(timeout); st.has_value()) {
    e.code = WIFEXITED(*st) ? WEXITSTATUS(*st) : 128 + WTERMSIG(*st);
  } else {
    p->Stop();
  }
  e.log = ReadAll(log);
  return e;
}

class RouterStartup : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeWorkDir();
    unsetenv("SUPERSERVE_ADMIN_TOKEN");  // the routers here get theirs from flags, or none
  }
  void TearDown() override {
    for (auto& r : routers_) r.Stop();
  }

  std::vector<std::string> RouterArgv(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {BinDir() + "/superserve-router",
                                     "--model_repo=" + EmulatedRepo()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  }
  // A router that must refuse to start: its exit and output.
  Exit RefusedRouter(const std::vector<std::string>& flags) {
    return RunFor(RouterArgv(flags), absl::StrCat(dir_, "/refused", ++runs_, ".log"));
  }
  // A router that serves (kept until the test ends); its ports by name.
  std::map<std::string, int> ServingRouter(std::vector<std::string> flags,
                                           std::string* log = nullptr) {
    const std::string name = absl::StrCat(dir_, "/router", ++runs_);
    flags.push_back("--port_file=" + name + ".ports");
    auto p = Subprocess::Start(RouterArgv(flags), name + ".log");
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    routers_.push_back(*std::move(p));
    auto ports = WaitForFile(name + ".ports", Seconds(20), &routers_.back());
    EXPECT_TRUE(ports.ok()) << ports.status() << "\n" << ReadAll(name + ".log");
    if (log != nullptr) *log = name + ".log";
    std::map<std::string, int> out;
    if (!ports.ok()) return out;
    for (absl::string_view line : absl::StrSplit(*ports, '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, '=');
      out[kv.first] = std::stoi(kv.second);
    }
    return out;
  }
  std::string WriteFile(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::owner_write);
    return path;
  }

  std::string dir_;
  int runs_ = 0;
  std::vector<Subprocess> routers_;
};

// gRPC turned SO_REUSEPORT on: a second router on a running one's address
// started, and the kernel split clients (and workers) between the two.
TEST_F(RouterStartup, ASecondRouterOnATakenAddressFailsNamingIt) {
  auto ports = ServingRouter({"--listen=127.0.0.1:0", "--worker_listen=127.0.0.1:0",
                              "--metrics_listen="});
  ASSERT_GT(ports["grpc"], 0);
  ASSERT_GT(ports["worker"], 0);
  const std::string listen = absl::StrCat("127.0.0.1:", ports["grpc"]);
  Exit same_listen =
      RefusedRouter({"--listen=" + listen, "--worker_listen=127.0.0.1:0", "--metrics_listen="});
  EXPECT_EQ(same_listen.code, 1) << same_listen.log;
  EXPECT_THAT(same_listen.log,
              HasSubstr(absl::StrCat("cannot listen on ", listen, " (--listen): address already "
                                     "in use")));
  const std::string worker = absl::StrCat("127.0.0.1:", ports["worker"]);
  Exit same_worker =
      RefusedRouter({"--listen=127.0.0.1:0", "--worker_listen=" + worker, "--metrics_listen="});
  EXPECT_EQ(same_worker.code, 1) << same_worker.log;
  EXPECT_THAT(same_worker.log, HasSubstr(absl::StrCat("cannot listen for workers on ", worker,
                                                      " (--worker_listen): address already "
                                                      "in use")));
}

// A TLS file that is a device was read until memory ran out (std::bad_alloc:
// SIGABRT, or the machine's memory); a FIFO blocked the start forever. The
// FIFO is what this test uses: a regression then hangs into RunFor's timeout
// instead of allocating without bound.
TEST_F(RouterStartup, TlsFilesThatAreNotRegularFilesAreRefusedNamingTheFlag) {
  const std::string pem = dir_ + "/not-a-certificate.pem";
  std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\n";
  const std::string fifo = dir_ + "/tls.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string flag : {"--tls_cert_file", "--tls_key_file"}) {
    std::vector<std::string> flags = {"--listen=127.0.0.1:0", "--worker_listen=127.0.0.1:0",
                                      "--metrics_listen=", "--tls_cert_file=" + pem,
                                      "--tls_key_file=" + pem};
    flags.push_back(flag + "=" + fifo);
    Exit e = RefusedRouter(flags);
    EXPECT_EQ(e.code, 1) << flag << "\n" << e.log;
    EXPECT_THAT(e.log, HasSubstr(flag + ": " + fifo + ": is a FIFO")) << e.log;
  }
}

TEST_F(RouterStartup, BadAddressesAndFlagsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           // Used to listen on 34463 (99999 mod 65536).
           {{"--listen=127.0.0.1:99999"}, "--listen \"127.0.0.1:99999\": port 99999 is out of "
                                          "range 0-65535"},
           {{"--worker_listen=127.0.0.1:85537"}, "--worker_listen \"127.0.0.1:85537\""},
           {{"--listen=127.0.0.1:19421", "--worker_listen=127.0.0.1:19421"},
            "--worker_listen 127.0.0.1:19421 overlaps --listen 127.0.0.1:19421"},
           {{"--listen=127.0.0.1:19421", "--metrics_listen=0.0.0.0:19421"},
            "--metrics_listen 0.0.0.0:19421 overlaps --listen"},
           // Used to be ignored: the worker link ran in plaintext.
           {{"--worker_tls"}, "--worker_tls needs --tls_cert_file and --tls_key_file"},
           {{"--heartbeat_ms=0"}, "--heartbeat_ms=0 is out of range"},
           {{"--heartbeat_ms=-5"}, "--heartbeat_ms=-5 is out of range"},
           {{"--missed_heartbeats=0"}, "--missed_heartbeats=0 is out of range"},
           {{"--lookahead=0"}, "--lookahead=0 is out of range"},
           {{"--max_message_bytes=-1"}, "--max_message_bytes=-1 is out of range"},
           {{"--max_queue=-1"}, "--max_queue=-1 is out of range"},
           {{"--log_level=bogus"}, "--log_level=bogus: expected debug, info, warning or error"},
       }) {
    std::vector<std::string> flags = {"--listen=127.0.0.1:0", "--worker_listen=127.0.0.1:0",
                                      "--metrics_listen="};
    // Later flags win.
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    Exit e = RefusedRouter(flags);
    EXPECT_EQ(e.code, 2) << c.message << "\n" << e.log;
    EXPECT_THAT(e.log, HasSubstr(c.message));
  }
}

// --model_repo models/fmnist (one package) instead of models/: the worker
// served nothing with a warning, the router said the folder had "no
// <model>/profile.json" or, with an admin token, served nothing. An empty
// repository is still a fleet's start before superserve-admin register.
TEST_F(RouterStartup, APackageFolderPassedAsTheRepositoryIsRefusedNamingItsParent) {
  const std::vector<std::string> listen = {"--listen=127.0.0.1:0", "--worker_listen=127.0.0.1:0",
                                           "--metrics_listen="};
  for (const std::string& package : {EmulatedRepo() + "/emu", EmulatedRepo() + "/emu/"}) {
    const std::string want = "--model_repo " + package +
                             " is a model package (it has a manifest.json), not a repository: "
                             "pass the folder that holds the packages, its parent: --model_repo " +
                             EmulatedRepo();
    std::vector<std::string> flags = listen;
    flags.push_back("--admin_token=fine");
    flags.push_back("--model_repo=" + package);  // later flags win
    Exit router = RefusedRouter(flags);
    EXPECT_EQ(router.code, 2) << router.log;
    EXPECT_THAT(router.log, HasSubstr("superserve-router: " + want));
    Exit worker = RunFor({BinDir() + "/superserve-worker", "--router=127.0.0.1:1",
                          "--model_repo=" + package, "--emulate", "--connect_timeout_s=0.1",
                          "--reconnect=false"},
                         absl::StrCat(dir_, "/worker", ++runs_, ".log"));
    EXPECT_EQ(worker.code, 2) << worker.log;
    EXPECT_THAT(worker.log, HasSubstr("superserve-worker: " + want));
  }
  const std::string empty = dir_ + "/empty-repo";
  std::filesystem::create_directories(empty);
  Exit worker = RunFor({BinDir() + "/superserve-worker", "--router=127.0.0.1:1",
                        "--model_repo=" + empty, "--emulate", "--connect_timeout_s=0.1",
                        "--reconnect=false"},
                       dir_ + "/worker-empty.log");
  EXPECT_THAT(worker.log, HasSubstr("no models in " + empty)) << worker.log;
  EXPECT_THAT(worker.log, Not(HasSubstr("is a model package")));
  std::vector<std::string> flags = listen;
  flags.push_back("--admin_token=fine");
  flags.push_back("--model_repo=" + empty);
  EXPECT_GT(ServingRouter(flags)["grpc"], 0);
}

// A new user could not find how to make admin.token, nor that a second
// version's folder must be named like the model (myfmnist-v2/ was refused).
TEST(RouterStartupHelp, TheAdminTokenRecipeAndThePackageFolderRuleAreInTheHelp) {
  const std::string dir = MakeWorkDir();
  const std::string recipe =
      "head -c 32 /dev/urandom | base64 > admin.token; chmod 600 admin.token";
  Exit admin = RunFor({BinDir() + "/superserve-admin", "--help"}, dir + "/admin-help.log");
  EXPECT_EQ(admin.code, 0) << admin.log;
  EXPECT_THAT(admin.log, HasSubstr(recipe));
  EXPECT_THAT(admin.log, HasSubstr("superserve-router --admin_token_file admin.token"));
  EXPECT_THAT(admin.log, HasSubstr("printable ASCII (0x20-0x7E"));
  EXPECT_THAT(admin.log, HasSubstr("version 2 of myfmnist goes in another folder"));
  EXPECT_THAT(admin.log, HasSubstr("not in myfmnist-v2/"));
  // The flag's text wraps differently in the router's help: compare words.
  Exit router = RunFor({BinDir() + "/superserve-router", "--help"}, dir + "/router-help.log");
  EXPECT_EQ(router.code, 0) << router.log;
  std::string words = router.log;
  words.erase(std::unique(words.begin(), words.end(),
                          [](char a, char b) { return std::isspace(a) && std::isspace(b); }),
              words.end());
  std::replace(words.begin(), words.end(), '\n', ' ');
  EXPECT_THAT(words, HasSubstr(recipe)) << router.log;
  EXPECT_THAT(words, HasSubstr("printable ASCII (0x20-0x7E)")) << router.log;
  std::filesystem::remove_all(dir);
}

// Tokens with a byte gRPC metadata cannot carry: the router took them, and
// every worker and superserve-admin presenting one aborted inside gRPC
// ("Illegal header value", SIGABRT) without naming the file.
TEST_F(RouterStartup, TokensGrpcCannotSendAreRefusedWhereTheyAreRead) {
  const std::string newline = WriteFile("newline.token", "tokA\ntokB\n");
  const std::string utf8 = WriteFile("utf8.token", "h\xc3\xa9llo");
  const std::vector<std::string> base = {"--listen=127.0.0.1:0", "--worker_listen=127.0.0.1:0",
                                         "--metrics_listen="};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), base.begin(), base.end());
    return extra;
  };
  for (const std::string& flag : {"--fleet_token_file=", "--admin_token_file="}) {
    Exit e = RefusedRouter(with({flag + newline}));
    EXPECT_EQ(e.code, 2) << e.log;
    EXPECT_THAT(e.log, HasSubstr("secret file " + newline + ": byte 5 is 0x0a"));
    EXPECT_THAT(e.log, Not(HasSubstr("tokA")));
    EXPECT_THAT(e.log, Not(HasSubstr("tokB")));
    Exit u = RefusedRouter(with({flag + utf8}));
    EXPECT_EQ(u.code, 2) << u.log;
    EXPECT_THAT(u.log, HasSubstr("secret file " + utf8 + ": byte 2 is 0xc3"));
  }
  {
    Exit d = RefusedRouter(with({"--fleet_token_file=" + dir_}));
    EXPECT_EQ(d.code, 2) << d.log;
    EXPECT_THAT(d.log, HasSubstr("secret file " + dir_ + ": is a directory"));
  }
  {
    setenv("SUPERSERVE_ADMIN_TOKEN", "tokA\x01tokB", 1);
    Exit e = RefusedRouter(base);
    unsetenv("SUPERSERVE_ADMIN_TOKEN");
    EXPECT_EQ(e.code, 2) << e.log;
    EXPECT_THAT(e.log, HasSubstr("environment variable SUPERSERVE_ADMIN_TOKEN: byte 5 is 0x01"));
    EXPECT_THAT(e.log, Not(HasSubstr("tokA")));
  }

  // The clients, against a router they could otherwise reach.
  auto ports = ServingRouter(with({"--admin_token=fine"}));
  ASSERT_GT(ports["grpc"], 0);
  Exit worker = RunFor({BinDir() + "/superserve-worker",
                        absl::StrCat("--router=127.0.0.1:", ports["worker"]),
                        "--model_repo=" + EmulatedRepo(), "--emulate",
                        "--fleet_token_file=" + newline, "--connect_timeout_s=3"},
                       dir_ + "/worker.log", Seconds(10));
  EXPECT_EQ(worker.code, 2) << worker.log;
  EXPECT_THAT(worker.log, HasSubstr("--fleet_token_file: secret file " + newline +
                                    ": byte 5 is 0x0a"));
  const std::vector<std::string> admin = {BinDir() + "/superserve-admin",
                                          absl::StrCat("--router=127.0.0.1:", ports["grpc"])};
  Exit from_file = RunFor({admin[0], admin[1], "--admin_token_file=" + utf8, "list"},
                          dir_ + "/admin-file.log");
  EXPECT_EQ(from_file.code, 2) << from_file.log;
  EXPECT_THAT(from_file.log, HasSubstr("secret file " + utf8 + ": byte 2 is 0xc3"));
  setenv("SUPERSERVE_ADMIN_TOKEN", "tokA\ntokB", 1);
  Exit from_env = RunFor({admin[0], admin[1], "list"}, dir_ + "/admin-env.log");
  unsetenv("SUPERSERVE_ADMIN_TOKEN");
  EXPECT_EQ(from_env.code, 2) << from_env.log;
  EXPECT_THAT(from_env.log,
              HasSubstr("environment variable SUPERSERVE_ADMIN_TOKEN: byte 5 is 0x0a"));
  EXPECT_THAT(from_env.log, Not(HasSubstr("tokA")));
}

std::shared_ptr<grpc::Channel> Channel(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}
std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// A router without an admin token answered every Admin call "bad admin
// token" although none could be right; the wrong one of the router's two
// ports answered UNIMPLEMENTED with no message at all.
TEST_F(RouterStartup, AdminOffAndTheWrongPortAreSaidSo) {
  std::string log;
  auto ports = ServingRouter({"--listen=127.0.0.1:0", "--worker_listen=127.0.0.1:0",
                              "--metrics_listen=",
                              "--model_policy=emu=slackfit,nosuchmodel=slackfit"},
                             &log);
  ASSERT_GT(ports["grpc"], 0);
  // A typo in --model_policy is warned about (a model by that name may come later).
  EXPECT_THAT(ReadAll(log), HasSubstr("--model_policy nosuchmodel=slackfit: "));
  EXPECT_THAT(ReadAll(log), Not(HasSubstr("--model_policy emu=")));

  setenv("SUPERSERVE_ADMIN_TOKEN", "anything", 1);
  Exit admin = RunFor({BinDir() + "/superserve-admin",
                       absl::StrCat("--router=127.0.0.1:", ports["grpc"]), "list"},
                      dir_ + "/admin.log");
  unsetenv("SUPERSERVE_ADMIN_TOKEN");
  EXPECT_EQ(admin.code, 1) << admin.log;  // refused, not "not authorised" (3)
  EXPECT_THAT(admin.log, HasSubstr("the Admin service is off"));
  EXPECT_THAT(admin.log, HasSubstr("--admin_token_file"));
  {
    auto stub = v1::Admin::NewStub(Channel(ports["grpc"]));
    grpc::ClientContext ctx;  // no token at all: the same answer
    ctx.set_deadline(In(5));
    v1::ListModelsResponse resp;
    grpc::Status s = stub->ListModels(&ctx, v1::ListModelsRequest(), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("the Admin service is off"));
  }
  {
    auto stub = v1::Inference::NewStub(Channel(ports["worker"]));
    grpc::ClientContext ctx;
    ctx.set_deadline(In(5));
    v1::InferRequest req;
    req.set_model("emu");
    v1::InferResponse resp;
    grpc::Status s = stub->Infer(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(s.error_message(), HasSubstr("this is the router's worker port (--worker_listen); "
                                             "clients use its --listen"));
  }
  {
    auto stub = v1::WorkerLink::NewStub(Channel(ports["grpc"]));
    grpc::ClientContext ctx;
    ctx.set_deadline(In(5));
    auto stream = stub->Connect(&ctx);
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(s.error_message(), HasSubstr("this is the router's client port (--listen); "
                                             "workers dial its --worker_listen"));
  }
}

// A refusal no retry heals was logged at INFO only, and the worker gave up
// with "connection not established in time".
TEST_F(RouterStartup, AWorkerWithAWrongFleetTokenSaysSoLoudly) {
  const std::string right = WriteFile("right.token", "right-token\n");
  const std::string wrong = WriteFile("wrong.token", "wrong-token\n");
  auto ports = ServingRouter({"--listen=127.0.0.1:0", "--worker_listen=127.0.0.1:0",
                              "--metrics_listen=", "--fleet_token_file=" + right});
  ASSERT_GT(ports["worker"], 0);
  Exit w = RunFor({BinDir() + "/superserve-worker",
                   absl::StrCat("--router=127.0.0.1:", ports["worker"]),
                   "--model_repo=" + EmulatedRepo(), "--emulate", "--fleet_token_file=" + wrong,
                   "--connect_timeout_s=2"},
                  dir_ + "/worker.log", Seconds(15));
  EXPECT_EQ(w.code, 1) << w.log;
  int warnings = 0;
  for (absl::string_view line : absl::StrSplit(w.log, '\n', absl::SkipEmpty())) {
    if (line[0] == 'W' && absl::StrContains(line, "UNAUTHENTICATED: wrong fleet token")) {
      ++warnings;
    }
  }
  EXPECT_GE(warnings, 2) << "each refusal is a warning\n" << w.log;
  // The final error names the refusal.
  EXPECT_THAT(w.log, HasSubstr("within 2 s (--connect_timeout_s): router refused registration "
                               "(UNAUTHENTICATED: wrong fleet token"));
}

}  // namespace
}  // namespace superserve
