// Admission: the checks before a query is queued (admission.h).
#include "serving/admission.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace superserve {

std::optional<Refusal> Admission::Check(const Arrival& a, bool shut_down, bool draining,
                                        ServedModel* m, const ApplicationRegistry& applications,
                                        const Steps& steps) const {
  using C = Refusal::Check;
  if (shut_down) {
    return Refusal{C::kShutDown, absl::UnavailableError("shutting down"),
                   QueryOutcome::kUnavailable};
  }
  if (draining) {
    return Refusal{C::kDraining,
                   absl::UnavailableError("draining: shutting down, no new queries accepted"),
                   QueryOutcome::kUnavailable};
  }
  if (m == nullptr) {
    return Refusal{C::kUnknownModel,
                   absl::InvalidArgumentError(absl::StrCat("unknown model \"", a.model, "\"")),
                   QueryOutcome::kInvalidArgument};
  }
  if (m->closed) {
    return Refusal{C::kClosed,
                   absl::InvalidArgumentError(absl::StrCat(
                       "model \"", a.model, "\" is being unregistered (no new queries)")),
                   QueryOutcome::kInvalidArgument};
  }
  if (const absl::Status input = steps.input(m->profile); !input.ok()) {
    return Refusal{
        C::kInput,
        absl::InvalidArgumentError(absl::StrCat("model ", *m->name, " input: ", input.message())),
        QueryOutcome::kInvalidArgument};
  }
  if (m->scheduler.workers().empty() && m->loadable_on.empty()) {
    return Refusal{C::kNoWorker,
                   absl::UnavailableError(absl::StrCat("no live worker serves model ", *m->name)),
                   QueryOutcome::kUnavailable};
  }
  // Expired and cancelled entries do not hold places: sweep them first.
  if (m->scheduler.queued() >= max_queue_) steps.sweep();
  if (m->scheduler.queued() >= max_queue_) {
    return Refusal{C::kQueueFull,
                   absl::ResourceExhaustedError(
                       absl::StrCat("model ", *m->name, " queue is full (", max_queue_, ")")),
                   QueryOutcome::kResourceExhausted};
  }
  if (absl::Status tag = applications.Check(a.application); !tag.ok()) {
    return Refusal{C::kApplication, std::move(tag), QueryOutcome::kInvalidArgument};
  }
  if (a.deadline <= a.now) {
    return Refusal{C::kDeadlinePassed,
                   absl::DeadlineExceededError("deadline already passed on arrival"),
                   QueryOutcome::kDeadlineExceeded};
  }
  if (!m->profile.subnets.empty() && a.deadline - a.now < m->scheduler.fastest()) {
    // Past the router's peak queries reach the core late (queued in gRPC):
    // one that not even the fastest batch of one can finish is answered now,
    // not queued until the policy drops it or a sweep finds it expired.
    // Subnet models only: a dynamic model's lower exit thresholds run faster
    // than its fastest() (the default threshold's).
    return Refusal{C::kTooLittleSlack,
                   absl::DeadlineExceededError(absl::StrCat(
                       "cannot finish by the deadline: ", ToMicros(a.deadline - a.now),
                       " us left on arrival, model ", *m->name, "'s fastest batch takes ",
                       ToMicros(m->scheduler.fastest()), " us")),
                   QueryOutcome::kDeadlineExceeded};
  }
  if (!m->scheduler.Admit(a.deadline, a.now)) {
    return Refusal{C::kOverloaded,
                   absl::DeadlineExceededError(
                       absl::StrCat("overloaded: cannot finish by the deadline behind the ",
                                    m->scheduler.queued(), " queries queued for model ", *m->name)),
                   QueryOutcome::kDeadlineExceeded};
  }
  const Nanos ready = steps.place();
  if (ready < 0) {
    return Refusal{C::kNoLoadableWorker,
                   absl::UnavailableError(absl::StrCat("no live worker can load model ", *m->name)),
                   QueryOutcome::kUnavailable};
  }
  if (ready > 0 && a.deadline - ready < m->scheduler.fastest()) {
    return Refusal{C::kLoadTooLate,
                   absl::DeadlineExceededError(absl::StrCat(
                       "model ", *m->name, " is resident on no worker and loading it completes ",
                       ToMillis(ready - a.now), " ms from now, too late for the deadline")),
                   QueryOutcome::kDeadlineExceeded};
  }
  return std::nullopt;
}

}  // namespace superserve
