#ifndef SUPERSERVE_COMMON_WORKER_LINK_LIMITS_H_
#define SUPERSERVE_COMMON_WORKER_LINK_LIMITS_H_

// How big one message on the router-worker link may be, and whether a
// model's batches fit in one.
//
// A batch travels to its worker as one message holding every query's input,
// and comes back as one holding every output. Both ends of the link set the
// same limit (router/router_server.cc, worker/router_link.cc): a batch over it
// breaks the link, so the worker is dropped and its in-flight queries, other
// clients' included, are retried elsewhere or fail. The router therefore
// refuses a model whose largest batch cannot fit (CheckBatchesFitWorkerLink),
// at start-up and at registration, instead of failing its batches.

#include <cstdint>

#include "absl/status/status.h"
#include "common/model_profile.h"

namespace superserve {

// The most bytes of one worker-link message, either way. Large enough for
// ImageNet-sized inputs (3x224x224 FP32, 588 KiB) at batch 256.
inline constexpr int64_t kWorkerLinkMaxMessageBytes = int64_t{256} << 20;

// What a query adds to a batch message besides its tensor's data: query id,
// tensor dtype and shape, an application tag of up to 256 bytes
// (ServingOptions::max_application_bytes, serving/serving_core.h), and
// protobuf framing.
inline constexpr int64_t kWorkerLinkQueryOverheadBytes = 512;

// Bytes one query of `profile` adds to a batch message in the larger of the
// two directions: its FP32 input (input_shape) going out, or its FP32 logits
// (num_classes) coming back; plus kWorkerLinkQueryOverheadBytes. Saturates at
// INT64_MAX instead of overflowing.
int64_t WorkerLinkQueryBytes(const ModelProfile& profile);

// OK when a batch of the profile's largest batch size fits in a worker-link
// message (with `reserve` bytes left for the message's own fields).
// Otherwise FAILED_PRECONDITION naming the model, the bytes per query, the
// largest batch, the limit and the largest batch size that would fit.
absl::Status CheckBatchesFitWorkerLink(const ModelProfile& profile,
                                       int64_t reserve = int64_t{64} << 10);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_WORKER_LINK_LIMITS_H_
