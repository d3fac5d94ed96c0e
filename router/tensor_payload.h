#ifndef SUPERSERVE_ROUTER_TENSOR_PAYLOAD_H_
#define SUPERSERVE_ROUTER_TENSOR_PAYLOAD_H_

#include <string>

#include "serving/query_handle.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {

// A wire tensor carried through the serving core: a query's input on its way
// to a worker, its output on the way back. Shared, never copied by the core.
struct TensorPayload final : public QueryPayload {
  v1::Tensor tensor;
  // The query's application tag, forwarded to the worker with its input
  // (dynamic models; empty otherwise).
  std::string application;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_TENSOR_PAYLOAD_H_
