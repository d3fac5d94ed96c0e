// TLS on the router's client port (and its worker port), with a CA and
// certificates made inside the test by Debian's openssl CLI (issue 16;
// docs/security.md): the client library, the Admin service and
// superserve-loadgen reach a TLS router only with the right CA; mutual TLS
// refuses a client without a certificate.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "bench/harness/local_cluster.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "superserve/v1/admin.grpc.pb.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::EmulatedRepo;
using ::testing::HasSubstr;
using testing::MakeWorkDir;

using testing::ReadAll;

// Runs a shell command (openssl), quietly; true on exit status 0.
bool Sh(const std::string& dir, const std::string& cmd) {
  const std::string full = absl::StrCat("cd '", dir, "' && ", cmd, " >>openssl.log 2>&1");
  const int st = std::system(full.c_str());
  return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// A CA, a server certificate for 127.0.0.1/localhost signed by it, a client
// certificate signed by it, and an unrelated second CA. EC P-256 keys: fast.
bool MakeCertificates(const std::string& dir) {
  {
    std::ofstream ext(dir + "/server.ext");
    ext << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    if (!ext) return false;
  }
  const std::string key = "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out";
  return Sh(dir, absl::StrCat(key, " ca.key")) &&
         Sh(dir,
            "openssl req -x509 -new -key ca.key -days 2 -subj /CN=superserve-test-ca "
            "-out ca.pem") &&
         Sh(dir, absl::StrCat(key, " server.key")) &&
         Sh(dir, "openssl req -new -key server.key -subj /CN=127.0.0.1 -out server.csr") &&
         Sh(dir,
            "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
            "-days 2 -extfile server.ext -out server.pem") &&
         Sh(dir, absl::StrCat(key, " client.key")) &&
         Sh(dir, "openssl req -new -key client.key -subj /CN=client -out client.csr") &&
         Sh(dir,
            "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
            "-days 2 -out client.pem") &&
         Sh(dir, absl::StrCat(key, " other.key")) &&
         Sh(dir,
            "openssl req -x509 -new -key other.key -days 2 -subj /CN=other-ca "
            "-out other.pem");
}

v1::InferRequest ValidRequest() {
  v1::InferRequest r;
  r.set_model("emu");
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)), r.mutable_input());
  return r;
}

std::shared_ptr<grpc::ChannelCredentials> Creds(const ClientTlsFiles& files) {
  auto c = MakeChannelCredentials(files);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeWorkDir();
    ASSERT_TRUE(MakeCertificates(dir_)) << ReadAll(dir_ + "/openssl.log");
  }
  std::unique_ptr<LocalCluster> Start(std::vector<std::string> router_flags,
                                      std::vector<std::string> worker_flags = {}, int workers = 1) {
    LocalClusterOptions o;
    o.bin_dir = BinDir();
    o.model_repo = EmulatedRepo();
    o.work_dir = dir_;
    o.workers = workers;
    o.emulate = true;
    o.startup_timeout = Seconds(20);
    o.tls_ca_file = dir_ + "/ca.pem";
    router_flags.push_back("--tls_cert_file=" + dir_ + "/server.pem");
    router_flags.push_back("--tls_key_file=" + dir_ + "/server.key");
    o.router_flags = std::move(router_flags);
    o.worker_flags = std::move(worker_flags);
    auto c = LocalCluster::Start(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::string dir_;
};

TEST_F(Tls, ClientsNeedTheRightCa) {
  // The worker link is TLS too here (the workers verify with the same CA).
  auto cluster = Start({"--worker_tls"}, {"--tls_ca_file=" + dir_ + "/ca.pem"});
  ASSERT_NE(cluster, nullptr);
  {
    InferenceClient client(cluster->router_address(), Transport::kUnary,
                           Creds({dir_ + "/ca.pem", "", ""}));
    auto r = client.Infer(ValidRequest(), Seconds(5));
    EXPECT_TRUE(r.ok()) << r.status();
  }
  {
    InferenceClient client(cluster->router_address(), Transport::kStream,
                           Creds({dir_ + "/ca.pem", "", ""}));
    auto r = client.Infer(ValidRequest(), Seconds(5));
    EXPECT_TRUE(r.ok()) << r.status();
  }
  {
    InferenceClient plaintext(cluster->router_address());
    auto r = plaintext.Infer(ValidRequest(), Seconds(2));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  }
  {
    InferenceClient wrong_ca(cluster->router_address(), Transport::kUnary,
                             Creds({dir_ + "/other.pem", "", ""}));
    auto r = wrong_ca.Infer(ValidRequest(), Seconds(2));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  }
  // Admin over TLS (LocalCluster's own calls verified with the CA already).
  auto models = cluster->WorkersPerModel();
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].second, 1);
  // superserve-loadgen with --tls_ca_file.
  {
    std::ofstream(dir_ + "/trace.csv") << "arrival_us\n0\n5000\n10000\n15000\n20000\n";
    const std::string out = dir_ + "/loadgen.out";
    auto p = Subprocess::Start(
        {BinDir() + "/superserve-loadgen", "--router=" + cluster->router_address(),
         "--tls_ca_file=" + dir_ + "/ca.pem", "--trace=" + dir_ + "/trace.csv", "--model=emu",
         "--slo_ms=2000", "--progress=false"},
        out);
    ASSERT_TRUE(p.ok());
    auto st = p->Wait(Seconds(30));
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << ReadAll(out);
    EXPECT_THAT(ReadAll(out), HasSubstr("\"ok\":5")) << ReadAll(out);
  }
}

TEST_F(Tls, MutualTlsRefusesAClientWithoutCertificate) {
  // No workers: LocalCluster's own Admin calls carry no client certificate.
  auto cluster = Start({"--tls_client_ca_file=" + dir_ + "/ca.pem"}, {}, /*workers=*/0);
  ASSERT_NE(cluster, nullptr);
  {
    InferenceClient anonymous(cluster->router_address(), Transport::kUnary,
                              Creds({dir_ + "/ca.pem", "", ""}));
    auto r = anonymous.Infer(ValidRequest(), Seconds(2));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_THAT(r.status().message(), ::testing::Not(HasSubstr("no live worker")));
  }
  {
    InferenceClient with_cert(
        cluster->router_address(), Transport::kUnary,
        Creds({dir_ + "/ca.pem", dir_ + "/client.pem", dir_ + "/client.key"}));
    auto r = with_cert.Infer(ValidRequest(), Seconds(5));
    // Through TLS to the router itself, which has no worker to offer.
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("no live worker serves model emu"));
  }
}

}  // namespace
}  // namespace superserve
