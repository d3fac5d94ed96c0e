#ifndef SUPERSERVE_ROUTER_QUERY_RESPONDER_H_
#define SUPERSERVE_ROUTER_QUERY_RESPONDER_H_

#include "absl/status/status.h"
#include "serving/query_handle.h"
#include "superserve/v1/inference.pb.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {

// The answering end of one client query. The gRPC Infer handler implements it
// over its reactor, InferStream per query; unit tests implement it in memory.
// The request and the response live until Answer; the Dispatcher calls
// Answer exactly once (through the serving core's Deliver, which fills the
// response first).
class QueryResponder : public QueryHandle {
 public:
  virtual const v1::InferRequest& request() const = 0;
  virtual v1::InferResponse* response() = 0;
  virtual void Answer(const absl::Status& status) = 0;
  // Moves the input tensor out of a request this responder owns, so that the
  // Dispatcher need not copy it; false (the default) when the request is
  // read-only and the Dispatcher copies it.
  virtual bool TakeInput(v1::Tensor* out) { return false; }

  // QueryHandle: the served subnet, timings and output go into response(),
  // then Answer(status).
  void Deliver(QueryAnswer answer) final;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_QUERY_RESPONDER_H_
