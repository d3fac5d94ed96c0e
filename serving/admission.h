// The checks an arriving query passes before it is queued, in the order they
// run, and the answer each refusal gets.
#ifndef SUPERSERVE_SERVING_ADMISSION_H_
#define SUPERSERVE_SERVING_ADMISSION_H_

#include <cstddef>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "serving/application_registry.h"
#include "serving/model_registry.h"
#include "serving/serving_observer.h"

namespace superserve {

// An arriving query, as admission sees it.
struct Arrival {
  absl::string_view model;  // as the client named it
  absl::string_view application;
  Nanos deadline = 0;  // absolute, on the core's clock
  Nanos now = 0;
};

// A query turned away: the check it failed and its answer.
struct Refusal {
  enum class Check {
    kShutDown,
    kDraining,
    kUnknownModel,
    kClosed,  // ServingCore::CloseModel
    kInput,
    kNoWorker,
    kQueueFull,
    kApplication,
    kDeadlinePassed,
    kTooLittleSlack,  // less left than the fastest batch of one: counted late_on_arrival
    kOverloaded,  // ModelScheduler::Admit: the core counts it shed
    kNoLoadableWorker,
    kLoadTooLate,
  };
  Check check;
  absl::Status status;
  QueryOutcome outcome;
};

// The admission chain. The first check an arrival fails answers it:
//   the core shut down, or draining                       UNAVAILABLE
//   the model unknown, closed, or the input invalid       INVALID_ARGUMENT
//   no live worker serves the model or could load it      UNAVAILABLE
//   `max_queue` live queries queued for the model         RESOURCE_EXHAUSTED
//   the tag over ApplicationRegistry's caps               INVALID_ARGUMENT
//   the deadline passed, less time left than the fastest
//   batch of one (subnet models), or no time to finish
//   behind the queue (overload, ModelScheduler::Admit)    DEADLINE_EXCEEDED
//   placement: no live worker can load the model          UNAVAILABLE
//   placement: its load completes too late for the
//   fastest subnet to meet the deadline                   DEADLINE_EXCEEDED
// The checks that act (Steps) run only once every check before them passed.
// Not thread-safe: the core runs it under its lock.
class Admission {
 public:
  // What the chain asks of the core.
  struct Steps {
    // The query's input against the model's profile (ServingCore::InputCheck).
    absl::FunctionRef<absl::Status(const ModelProfile&)> input;
    // Answers the model's expired and cancelled queued queries, which hold no
    // place: run when the queue looks full.
    absl::FunctionRef<void()> sweep;
    // Placement, last: 0 when a worker holds the model (or the query waits
    // for room), else when the load the query waits for completes (started
    // now unless one is pending); -1: no live worker can load it.
    absl::FunctionRef<Nanos()> place;
  };

  explicit Admission(size_t max_queue) : max_queue_(max_queue) {}

  // nullopt: the arrival may be queued. `m`: the model served under
  // a.model (null: none).
  std::optional<Refusal> Check(const Arrival& a, bool shut_down, bool draining, ServedModel* m,
                               const ApplicationRegistry& applications, const Steps& steps) const;

 private:
  const size_t max_queue_;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_ADMISSION_H_
