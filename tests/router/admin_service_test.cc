// The Admin service in process, over a gRPC server on 127.0.0.1: what its
// calls leave behind.
#include "router/admin_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "router/router_metrics.h"

namespace superserve {
namespace {

// Each register or unregister call waits on a thread of its own; a finished
// one is joined by a later call, so many calls leave a bounded number (one
// per call was kept until the service was destroyed).
TEST(AdminServiceTest, ManyCallsLeaveABoundedNumberOfThreads) {
  RouterMetrics metrics;
  DispatcherOptions o;
  o.run_timer_thread = false;
  Dispatcher dispatcher(o, RealClock::Get(), &metrics);
  AdminService admin(&dispatcher, "token", ::testing::TempDir());
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&admin);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Admin::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  constexpr int kCalls = 64;
  for (int i = 0; i < kCalls; ++i) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer token");
    v1::UnregisterModelRequest req;
    req.set_name(absl::StrCat("absent-", i));
    v1::UnregisterModelResponse resp;
    const grpc::Status s = stub->UnregisterModel(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  // Every call is answered: its thread is finishing, or done and joined.
  size_t held = admin.threads_held();
  for (int i = 0; i < 1000 && held > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    held = admin.threads_held();
  }
  EXPECT_EQ(held, 0u) << "after " << kCalls << " answered calls";
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace
}  // namespace superserve
