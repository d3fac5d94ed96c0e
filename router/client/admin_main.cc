// superserve-admin: registers, unregisters and lists models on a running
// router through its Admin service (docs/packages.md). Exit codes are meant
// for scripts; see kUsage.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/init.h"
#include "common/model_repository.h"
#include "common/progress.h"
#include "common/secret.h"
#include "common/tar_package.h"
#include "grpcpp/grpcpp.h"
#include "router/client/inference_client.h"
#include "superserve/v1/admin.grpc.pb.h"

ABSL_FLAG(std::string, router, "127.0.0.1:8500", "Router address host:port (its client port).");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA to verify the router's TLS certificate (docs/security.md); empty = plaintext.");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the Admin bearer token, the router's --admin_token_file (make one: head "
          "-c 32 /dev/urandom | base64 > admin.token; chmod 600 admin.token); else env "
          "SUPERSERVE_ADMIN_TOKEN.");
ABSL_FLAG(std::string, name, "",
          "register: the model's name (optional; must equal the package's name).");
ABSL_FLAG(double, wait_ready_s, 60,
          "register: wait at most this long for a worker to load the package (the router "
          "sends it to every worker), printing progress; 0 = do not wait.");
ABSL_FLAG(uint32_t, version, 0,
          "unregister: one version of the model (its manifest's); 0 = every version.");
ABSL_FLAG(double, drain_timeout_s, 30,
          "unregister: how long the model's queued and in-flight queries get to finish.");
ABSL_FLAG(double, timeout_s, 10, "Deadline of each Admin call, seconds.");

namespace superserve {
namespace {

constexpr const char* kUsage =
    "superserve-admin [--router HOST:PORT] [--admin_token_file F] [--tls_ca_file CA] COMMAND\n\n"
    "Commands:\n"
    "  register PACKAGE_DIR   validate and register a model package (a directory, or a .tar\n"
    "                         of one, in the router's model repository, or an absolute path\n"
    "                         the router can read); the router sends it to every worker and this waits\n"
    "                         (--wait_ready_s) until one has loaded it. A package of a\n"
    "                         served model with a higher manifest version is loaded beside\n"
    "                         it and becomes current once a worker has it. A package's\n"
    "                         folder is named after its model (manifest name), a new\n"
    "                         version's too: version 2 of myfmnist goes in another folder\n"
    "                         named myfmnist (e.g. v2/myfmnist/, manifest \"version\": 2),\n"
    "                         not in myfmnist-v2/\n"
    "  unregister NAME        remove a model: new queries are refused, queued ones are\n"
    "                         served (--drain_timeout_s), then the workers free it;\n"
    "                         --version V: only that version (a newer one is current)\n"
    "  list                   one line per registered model\n"
    "  status NAME            one model's details; fails when it is not registered\n"
    "  validate PACKAGE_DIR   check a package locally, as the router would (no router, no\n"
    "                         token needed)\n\n"
    "The admin token comes from --admin_token_file, else the environment variable\n"
    "SUPERSERVE_ADMIN_TOKEN; it must be the router's (its --admin_token_file). Make one\n"
    "before starting the router:\n"
    "  head -c 32 /dev/urandom | base64 > admin.token; chmod 600 admin.token\n"
    "  superserve-router --admin_token_file admin.token ...\n"
    "  superserve-admin --admin_token_file admin.token list\n"
    "A token is one line of printable ASCII (0x20-0x7E; surrounding whitespace and the\n"
    "trailing newline are dropped), any length; 32 random bytes in base64 (44 characters)\n"
    "cannot be guessed. Without one the router's Admin service is off.\n"
    "Exit codes: 0 done; 1 the router refused (bad package, unknown model: the message names\n"
    "the problem and the field); 2 usage error; 3 not authorised (missing or wrong token);\n"
    "4 router unreachable or call timed out; 5 registered, but no worker loaded the model\n"
    "within --wait_ready_s.";

enum Exit { kOk = 0, kRefused = 1, kUsageError = 2, kNotAuthorised = 3, kUnreachable = 4,
            kNotReady = 5 };

int ExitFor(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return kOk;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return kNotAuthorised;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kUnreachable;
    default:
      return kRefused;
  }
}

// The gRPC code's name as the protocol spells it (FAILED_PRECONDITION, ...).
const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN_CODE";
  }
}

int Fail(const char* what, const grpc::Status& s) {
  std::fprintf(stderr, "superserve-admin: %s failed: %s: %s\n", what, CodeName(s.error_code()),
               s.error_message().c_str());
  return ExitFor(s);
}

// A latency in ms to three significant figures (0.381, 9.11, 28.5, 136), as
// a whole number from 1000 on; a tiny model's 0.031 ms keeps its digits.
std::string Ms(double ms) {
  return ms >= 1000 ? absl::StrFormat("%.0f", ms) : absl::StrFormat("%.3g", ms);
}

std::string Describe(const v1::ModelInfo& m) {
  // A dynamic (early-exit) model has no subnets (it read "subnets=0
  // accuracy=100..0%"): its accuracy and time depend on the input, so it
  // shows its applications, its exits and their ranges instead.
  const bool dynamic = m.dynamic() || m.num_subnets() == 0;
  std::string what;
  if (dynamic) {
    std::vector<std::string> apps(m.applications().begin(), m.applications().end());
    constexpr size_t kNamed = 5;  // a profile may hold many; the count says how many
    if (apps.size() > kNamed) {
      apps.resize(kNamed);
      apps.push_back("...");
    }
    what = absl::StrCat(" dynamic: ", m.applications_size(),
                        m.applications_size() == 1 ? " application" : " applications",
                        apps.empty() ? "" : absl::StrCat(" (", absl::StrJoin(apps, ", "), ")"));
    if (m.num_exits() > 0) {
      absl::StrAppend(&what, ", ", m.num_exits(), m.num_exits() == 1 ? " exit" : " exits");
    }
    if (m.max_exit_accuracy() > 0) {
      absl::StrAppend(&what, absl::StrFormat(", exit accuracy %.2f..%.2f%%", m.min_exit_accuracy(),
                                             m.max_exit_accuracy()));
    }
    if (m.max_exec_us() > 0) {
      absl::StrAppend(&what, ", exec time ", Ms(m.min_exec_us() / 1000), "..",
                      Ms(m.max_exec_us() / 1000), " ms");
    }
  } else {
    what = absl::StrFormat(" subnets=%d accuracy=%.2f..%.2f%%", m.num_subnets(), m.min_accuracy(),
                           m.max_accuracy());
  }
  std::string latency;
  if (!dynamic && m.max_latency_us() > 0) {
    latency = absl::StrCat(" latency@batch", m.batch_sizes_size() > 0 ? m.batch_sizes(0) : 1,
                           "=", Ms(m.min_latency_us() / 1000), "..",
                           Ms(m.max_latency_us() / 1000), " ms");
  }
  return absl::StrCat(m.name(), "  family=", m.family(), what, " batch_sizes=[",
                      absl::StrJoin(m.batch_sizes(), ","), "]", latency, " workers=", m.workers(),
                      m.version() > 0
                          ? absl::StrCat(" version=", m.version(), m.current() ? " (current)" : "")
                          : "");
}

class Admin {
 public:
  Admin(std::shared_ptr<grpc::Channel> channel, std::string token, double timeout_s)
      : stub_(v1::Admin::NewStub(std::move(channel))),
        token_(std::move(token)),
        timeout_s_(timeout_s) {}

  // `extra_s`: how long the router may wait on the call's behalf (a
  // register waits for the workers), on top of --timeout_s.
  template <typename Req, typename Resp, typename Call>
  grpc::Status Do(Call call, const Req& req, Resp* resp, double extra_s = 0) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token_);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>((timeout_s_ + extra_s) * 1000)));
    return ((*stub_).*call)(&ctx, req, resp);
  }

  grpc::Status Find(const std::string& name, v1::ModelInfo* out, bool* found) {
    v1::ListModelsResponse resp;
    auto s = Do(&v1::Admin::Stub::ListModels, v1::ListModelsRequest(), &resp);
    *found = false;
    for (const auto& m : resp.models()) {
      if (m.name() == name) {
        *out = m;
        *found = true;
      }
    }
    return s;
  }

 private:
  std::unique_ptr<v1::Admin::Stub> stub_;
  const std::string token_;
  const double timeout_s_;
};

int Run(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return kUsageError;
  }
  const std::string command = args[1];
  const bool takes_arg = command == "register" || command == "unregister" ||
                        command == "status" || command == "validate";
  if ((command != "list" && !takes_arg) || args.size() != (takes_arg ? 3u : 2u)) {
    std::fprintf(stderr, "superserve-admin: bad command line\n\n%s\n", kUsage);
    return kUsageError;
  }
  if (command == "validate") {
    // The router's own loader (LoadModelDirectory): same checks, same messages.
    std::string dir = args[2];
    std::string scratch;
    if (absl::EndsWith(dir, ".tar")) {
      scratch = (std::filesystem::temp_directory_path() /
                 absl::StrCat("superserve-admin-", getpid()))
                    .string();
      auto unpacked = UnpackTarPackage(dir, scratch);
      if (!unpacked.ok()) {
        std::fprintf(stderr, "superserve-admin: validate: %s\n",
                     std::string(unpacked.status().message()).c_str());
        return kRefused;
      }
      dir = *unpacked;
    }
    auto entry = LoadModelDirectory(dir);
    if (!scratch.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(scratch, ec);
    }
    if (!entry.ok()) {
      std::fprintf(stderr, "superserve-admin: validate: %s\n",
                   std::string(entry.status().message()).c_str());
      return kRefused;
    }
    const ModelProfile& p = entry->profile;
    const std::string what =
        p.is_dynamic ? absl::StrCat("dynamic: ", p.dynamic.applications.size(), " applications, ",
                                    p.dynamic.exit_accuracy.size(), " exits")
                     : absl::StrCat(p.subnets.size(), " subnets");
    std::printf("valid: %s (%s, %s, %s)\n", entry->name.c_str(),
                entry->manifest.has_value() ? "package with manifest" : "older layout, no manifest",
                p.family.c_str(), what.c_str());
    return kOk;
  }
  std::string token;
  if (const std::string f = absl::GetFlag(FLAGS_admin_token_file); !f.empty()) {
    auto t = ReadSecretFile(f);
    if (!t.ok()) {
      std::fprintf(stderr, "superserve-admin: --admin_token_file: %s\n",
                   std::string(t.status().message()).c_str());
      return kUsageError;
    }
    token = *std::move(t);
  } else {
    // Checked like a file's content: gRPC aborts on a token it cannot send.
    auto t = ReadSecretEnv("SUPERSERVE_ADMIN_TOKEN");
    if (!t.ok()) {
      std::fprintf(stderr, "superserve-admin: %s\n", std::string(t.status().message()).c_str());
      return kUsageError;
    }
    if (t->has_value()) token = **std::move(t);
  }
  if (token.empty()) {
    std::fprintf(stderr,
                 "superserve-admin: no admin token (--admin_token_file or "
                 "SUPERSERVE_ADMIN_TOKEN)\n");
    return kUsageError;
  }
  auto credentials = MakeChannelCredentials({absl::GetFlag(FLAGS_tls_ca_file), "", ""});
  if (!credentials.ok()) {
    std::fprintf(stderr, "superserve-admin: %s\n",
                 std::string(credentials.status().message()).c_str());
    return kUsageError;
  }
  Admin admin(grpc::CreateChannel(absl::GetFlag(FLAGS_router), *credentials), token,
              absl::GetFlag(FLAGS_timeout_s));

  if (command == "list") {
    v1::ListModelsResponse resp;
    auto s = admin.Do(&v1::Admin::Stub::ListModels, v1::ListModelsRequest(), &resp);
    if (!s.ok()) return Fail("list", s);
    for (const auto& m : resp.models()) std::printf("%s\n", Describe(m).c_str());
    return kOk;
  }
  const std::string arg = args[2];
  if (command == "status") {
    v1::ModelInfo info;
    bool found = false;
    auto s = admin.Find(arg, &info, &found);
    if (!s.ok()) return Fail("status", s);
    if (!found) {
      std::fprintf(stderr, "superserve-admin: status: model \"%s\" is not registered\n",
                   arg.c_str());
      return kRefused;
    }
    std::printf("%s\n", Describe(info).c_str());
    return kOk;
  }
  if (command == "unregister") {
    v1::UnregisterModelRequest req;
    req.set_name(arg);
    const double drain_s = absl::GetFlag(FLAGS_drain_timeout_s);
    req.set_drain_timeout_ms(static_cast<int32_t>(std::max(1.0, drain_s * 1000)));
    req.set_version(absl::GetFlag(FLAGS_version));
    v1::UnregisterModelResponse resp;
    std::printf("unregistering %s: draining its queued queries, then the workers free it\n",
                arg.c_str());
    std::fflush(stdout);
    auto s = admin.Do(&v1::Admin::Stub::UnregisterModel, req, &resp, drain_s);
    if (!s.ok()) return Fail("unregister", s);
    std::printf("unregistered %s\n", arg.c_str());
    return kOk;
  }
  // register: the router sends the package to its workers and answers once
  // one has loaded it (or every one failed, or --wait_ready_s passed).
  const double wait_s = absl::GetFlag(FLAGS_wait_ready_s);
  v1::RegisterModelRequest req;
  req.set_path(arg);
  req.set_name(absl::GetFlag(FLAGS_name));
  req.set_timeout_ms(static_cast<int32_t>(std::max(1.0, wait_s * 1000)));
  v1::RegisterModelResponse resp;
  grpc::Status s;
  std::atomic<bool> answered{false};
  std::thread call([&] {
    s = admin.Do(&v1::Admin::Stub::RegisterModel, req, &resp, wait_s);
    answered = true;
  });
  const auto start = std::chrono::steady_clock::now();
  // The progress lines only once the call has taken a second: a refusal
  // (a bad package, a name clash) comes at once, before any worker loads
  // anything, and was preceded by "the workers load the package ...".
  for (int tick = 1; !answered; ++tick) {
    for (int i = 0; i < 10 && !answered; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!answered) {
      if (tick == 1) std::printf("registering %s: the workers load the package ...\n", arg.c_str());
      std::printf("  ... %d s\n", tick);
      std::fflush(stdout);
    }
  }
  call.join();
  const double waited = SecondsSince(start);
  for (const auto& w : resp.workers()) {
    if (w.ready()) {
      std::printf("  %s: ready (loaded in %lld ms)\n", w.worker().c_str(),
                  static_cast<long long>(w.load_ms()));
    } else if (!w.error().empty()) {
      std::printf("  %s: failed: %s\n", w.worker().c_str(), w.error().c_str());
    } else {
      std::printf("  %s: still loading\n", w.worker().c_str());
    }
  }
  if (!s.ok()) return Fail("register", s);
  if (!resp.visible()) {
    std::fprintf(stderr,
                 "superserve-admin: %s is registered but no worker has loaded it after %.1f s; "
                 "it becomes visible when one does (superserve-admin status %s)\n",
                 resp.name().c_str(), waited, resp.name().c_str());
    return kNotReady;
  }
  std::printf("ready after %.1f s: %s\n", waited, Describe(resp.model()).c_str());
  return kOk;
}

}  // namespace
}  // namespace superserve

int main(int argc, char** argv) {
  return superserve::Run(superserve::InitMain(argc, argv, superserve::kUsage));
}
