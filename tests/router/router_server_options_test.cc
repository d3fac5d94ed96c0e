// What RouterServer::Start refuses before binding (CheckRouterServerOptions):
// listen addresses out of range or shared between the router's servers, and
// --worker_tls without a certificate. Each message names the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "router/router_server.h"

namespace superserve {
namespace {

using ::testing::HasSubstr;

RouterServerOptions Options(std::string listen, std::string worker_listen,
                            std::string metrics_listen = "") {
  RouterServerOptions o;
  o.listen = std::move(listen);
  o.worker_listen = std::move(worker_listen);
  o.metrics_listen = std::move(metrics_listen);
  return o;
}

TEST(RouterServerOptions, UsualAddressesAreAccepted) {
  for (const RouterServerOptions& o :
       {Options("127.0.0.1:8500", "127.0.0.1:8501", "127.0.0.1:9090"),
        Options("0.0.0.0:8500", "0.0.0.0:8501", "0.0.0.0:9090"),
        Options("[::]:8500", "[::1]:8501"), Options("localhost:65535", "127.0.0.1:1"),
        // Port 0: each server gets a free port of its own, so "equal" is fine.
        Options("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"),
        Options("unix:/tmp/router.sock", "127.0.0.1:8501"),
        // One port on two different hosts of this machine.
        Options("127.0.0.1:8500", "10.1.2.3:8500")}) {
    EXPECT_TRUE(CheckRouterServerOptions(o).ok())
        << o.listen << " " << o.worker_listen << " " << o.metrics_listen << ": "
        << CheckRouterServerOptions(o);
  }
}

TEST(RouterServerOptions, PortsOutOfRangeOrMalformedAreRefusedNamingTheFlag) {
  struct Case {
    RouterServerOptions o;
    std::string flag;
    std::string why;
  };
  for (const Case& c : {
           // gRPC took these mod 65536: 99999 listened on 34463.
           Case{Options("127.0.0.1:99999", "127.0.0.1:8501"), "--listen \"127.0.0.1:99999\"",
                "port 99999 is out of range 0-65535"},
           Case{Options("127.0.0.1:8500", "127.0.0.1:85537"), "--worker_listen", "out of range"},
           Case{Options("127.0.0.1:8500", "127.0.0.1:8501", "127.0.0.1:65536"),
                "--metrics_listen", "out of range"},
           Case{Options("127.0.0.1:-1", "127.0.0.1:8501"), "--listen", "is not a number"},
           Case{Options("127.0.0.1:", "127.0.0.1:8501"), "--listen", "is not a number"},
           Case{Options("8500", "127.0.0.1:8501"), "--listen", "no port"},
           Case{Options(":8500", "127.0.0.1:8501"), "--listen", "no host"},
           Case{Options("::1:8500", "127.0.0.1:8501"), "--listen", "in brackets"},
           Case{Options("127.0.0.1:8500", "127.0.0.1:0x10"), "--worker_listen",
                "is not a number"},
       }) {
    absl::Status s = CheckRouterServerOptions(c.o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.flag << " " << c.why;
    EXPECT_THAT(s.message(), HasSubstr(c.flag));
    EXPECT_THAT(s.message(), HasSubstr(c.why));
  }
}

TEST(RouterServerOptions, TwoServersOnOneAddressAreRefused) {
  struct Case {
    RouterServerOptions o;
    std::string message;
  };
  for (const Case& c : {
           Case{Options("127.0.0.1:8500", "127.0.0.1:8500"),
                "--worker_listen 127.0.0.1:8500 overlaps --listen 127.0.0.1:8500"},
           Case{Options("127.0.0.1:8500", "0.0.0.0:8500"), "--worker_listen 0.0.0.0:8500"},
           Case{Options("[::]:8500", "127.0.0.1:8500"), "overlaps --listen [::]:8500"},
           Case{Options("127.0.0.1:8500", "127.0.0.1:8501", "127.0.0.1:8501"),
                "--metrics_listen 127.0.0.1:8501 overlaps --worker_listen"},
           Case{Options("LOCALHOST:8500", "localhost:8500"), "overlaps --listen"},
           Case{Options("unix:/tmp/r.sock", "unix:/tmp/r.sock"), "overlaps --listen"},
       }) {
    absl::Status s = CheckRouterServerOptions(c.o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

TEST(RouterServerOptions, WorkerTlsNeedsTheCertificateAndKey) {
  RouterServerOptions o = Options("127.0.0.1:0", "127.0.0.1:0");
  o.worker_tls = true;
  absl::Status s = CheckRouterServerOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--worker_tls needs --tls_cert_file and --tls_key_file"));
  o.tls_cert_file = "router.pem";
  EXPECT_THAT(CheckRouterServerOptions(o).message(), HasSubstr("--worker_tls needs --tls_key_file"));
  o.tls_key_file = "router.key";
  EXPECT_TRUE(CheckRouterServerOptions(o).ok());
}

}  // namespace
}  // namespace superserve
