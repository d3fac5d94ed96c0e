#include "worker/batch_runner.h"

#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/control_tuple.h"
#include "common/tensor_codec.h"

namespace superserve {
namespace {

// executor->Run, with every exception it throws turned into INTERNAL: the
// executor boundary. TorchExecutor already maps c10::Error to a status; this
// catches the rest (std::bad_alloc, a library's std::runtime_error, a thrown
// non-exception), which would otherwise end the executor thread and with it
// the worker process (std::terminate).
absl::StatusOr<std::vector<HostTensor>> RunCatchingExceptions(
    Executor* executor, const std::string& model, const ControlTuple& control,
    absl::Span<const v1::Tensor* const> inputs, absl::Span<const std::string* const> applications,
    std::vector<QueryExit>* exits) {
  try {
    return executor->RunWithExits(model, control, inputs, applications, exits);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(std::string(executor->kind()), " executor threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat(std::string(executor->kind()), " executor threw an unknown exception"));
  }
}

}  // namespace

void RunBatch(const v1::Batch& batch, Nanos received, absl::Span<const ModelEntry> models,
              Executor* executor, v1::BatchResult* result) {
  result->set_batch_id(batch.batch_id());
  auto fail = [result](absl::StatusCode code, const std::string& why) {
    result->clear_results();
    result->set_error(why);
    result->set_error_code(static_cast<int32_t>(code));
  };
  Nanos start = RealClock::Get()->Now();
  if (batch.earliest_us() > 0 && start < received + Micros(batch.earliest_us())) {
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(received + Micros(batch.earliest_us()) - start));
    start = RealClock::Get()->Now();
  }
  result->set_worker_queue_us((start - received) / kNanosPerMicro);
  if (batch.latest_us() > 0 && start > received + Micros(batch.latest_us())) {
    fail(absl::StatusCode::kDeadlineExceeded,
         absl::StrCat("batch started ", (start - received) / kNanosPerMicro,
                      " us after receipt; its window closed at ", batch.latest_us(), " us"));
    return;
  }
  const ModelEntry* model = nullptr;
  for (const auto& m : models) {
    if (m.name == batch.model()) model = &m;
  }
  if (model == nullptr) {
    fail(absl::StatusCode::kNotFound, absl::StrCat("model ", batch.model(), " is not loaded"));
    return;
  }
  if (batch.queries_size() == 0) {
    fail(absl::StatusCode::kInvalidArgument, "empty batch");
    return;
  }
  std::vector<const v1::Tensor*> inputs;
  std::vector<const std::string*> applications;
  inputs.reserve(batch.queries_size());
  applications.reserve(batch.queries_size());
  for (const auto& q : batch.queries()) {
    if (auto s = CheckWireTensor(q.input(), DType::kFloat32, model->profile.input_shape); !s.ok()) {
      fail(absl::StatusCode::kInvalidArgument,
           absl::StrCat("query ", q.query_id(), ": ", s.message()));
      return;
    }
    inputs.push_back(&q.input());
    applications.push_back(&q.application());
  }
  std::vector<QueryExit> exits;
  auto outputs = RunCatchingExceptions(executor, model->name, ControlTupleFromProto(batch.control()),
                                       inputs, applications, &exits);
  Nanos end = RealClock::Get()->Now();
  result->set_exec_us((end - start) / kNanosPerMicro);
  if (!outputs.ok()) {
    fail(outputs.status().code(), std::string(outputs.status().message()));
    return;
  }
  if (outputs->size() != inputs.size()) {
    fail(absl::StatusCode::kInternal, absl::StrCat("executor returned ", outputs->size(),
                                                   " outputs for ", inputs.size(), " inputs"));
    return;
  }
  for (int i = 0; i < batch.queries_size(); ++i) {
    v1::QueryResult* r = result->add_results();
    r->set_query_id(batch.queries(i).query_id());
    EncodeTensor(std::move((*outputs)[i]), r->mutable_output());
    if (static_cast<size_t>(i) < exits.size()) {
      const QueryExit& e = exits[i];
      r->set_exit(e.exit + 1);  // 1-based on the wire, 0 = unknown
      r->set_exit_us(e.at / kNanosPerMicro);
      r->set_own_us(e.own / kNanosPerMicro);
    }
  }
}

}  // namespace superserve
