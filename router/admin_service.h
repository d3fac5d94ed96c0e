#ifndef SUPERSERVE_ROUTER_ADMIN_SERVICE_H_
#define SUPERSERVE_ROUTER_ADMIN_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "router/dispatcher.h"
#include "superserve/v1/admin.grpc.pb.h"

namespace superserve {

// Admin: register / unregister / list models. Every call must carry
// "authorization: Bearer <token>": none is UNAUTHENTICATED, a wrong one
// PERMISSION_DENIED. With an empty token the service is off: every call is
// UNIMPLEMENTED, saying so. RegisterModel paths are directories relative to the
// model repository (absolute paths are accepted too). RegisterModel answers
// once a worker has loaded the package (or every worker failed, or its
// timeout passed), UnregisterModel once the model is drained: each waits on
// a thread of its own, never on a gRPC thread; a finished one is joined by
// the next call, so the service holds about one thread per call in progress.
class AdminService final : public v1::Admin::CallbackService {
 public:
  AdminService(Dispatcher* dispatcher, std::string token, std::string model_repo)
      : dispatcher_(dispatcher), token_(std::move(token)), model_repo_(std::move(model_repo)) {}
  // Joins the waits (the Dispatcher's Shutdown ends them).
  ~AdminService() override;

  grpc::ServerUnaryReactor* RegisterModel(grpc::CallbackServerContext* context,
                                          const v1::RegisterModelRequest* request,
                                          v1::RegisterModelResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterModel(grpc::CallbackServerContext* context,
                                            const v1::UnregisterModelRequest* request,
                                            v1::UnregisterModelResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

  // The waiting threads the service holds, once the finished ones are
  // joined: the calls in progress.
  size_t threads_held();

 private:
  grpc::Status Authorize(grpc::CallbackServerContext* context) const;
  // Runs `wait` on a thread of its own (joined by a later call once it is
  // done, or by the destructor).
  void RunAside(std::function<void()> wait);
  void JoinFinishedLocked();

  Dispatcher* const dispatcher_;
  const std::string token_;
  const std::string model_repo_;
  struct Aside {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // set by the thread as it ends
  };
  std::mutex threads_mu_;
  std::vector<Aside> threads_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_ADMIN_SERVICE_H_
