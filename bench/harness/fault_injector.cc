#include "bench/harness/fault_injector.h"

#include <signal.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/subprocess.h"

namespace superserve {

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKillWorker: return "kill-worker";
    case FaultKind::kHangWorker: return "hang-worker";
    case FaultKind::kTerminateWorker: return "terminate-worker";
    case FaultKind::kRestartRouterDrain: return "restart-router-drain";
    case FaultKind::kRestartRouterKill: return "restart-router-kill";
  }
  return "?";
}

std::vector<Fault> RandomFaultPlan(uint64_t seed, Nanos start, Nanos end, int count,
                                   const std::vector<FaultKind>& kinds, Nanos min_gap) {
  std::vector<Fault> plan;
  if (kinds.empty() || count <= 0 || end <= start) return plan;
  std::mt19937_64 rng(seed);
  // Times: `count` slots of equal length, one fault at a random point of
  // each, pushed apart to min_gap.
  const Nanos slot = (end - start) / count;
  if (slot < min_gap) count = static_cast<int>((end - start) / std::max<Nanos>(min_gap, 1));
  std::vector<FaultKind> bag;
  for (int i = 0; i < count; ++i) {
    if (bag.empty()) {
      bag = kinds;
      std::shuffle(bag.begin(), bag.end(), rng);
    }
    Fault f;
    f.kind = bag.back();
    bag.pop_back();
    const Nanos slot_start = start + (end - start) * i / count;
    const Nanos slot_len = (end - start) / count;
    const Nanos jitter = std::max<Nanos>(0, slot_len - min_gap);
    f.at = slot_start + (jitter > 0 ? static_cast<Nanos>(rng() % static_cast<uint64_t>(jitter)) : 0);
    if (!plan.empty()) f.at = std::max(f.at, plan.back().at + min_gap);
    if (f.kind == FaultKind::kHangWorker) f.hang = Millis(300 + static_cast<int64_t>(rng() % 1200));
    f.replace = f.kind == FaultKind::kKillWorker || f.kind == FaultKind::kTerminateWorker;
    plan.push_back(f);
  }
  return plan;
}

std::vector<int> FaultInjector::HealthyWorkers() {
  std::vector<int> out;
  for (int i = 0; i < cluster_->num_workers(); ++i) {
    if (std::find(hung_.begin(), hung_.end(), i) != hung_.end()) continue;
    if (cluster_->worker(i).running()) out.push_back(i);
  }
  return out;
}

int FaultInjector::healthy_workers() { return static_cast<int>(HealthyWorkers().size()); }

void FaultInjector::ReleaseHung() {
  for (int i : hung_) cluster_->worker(i).Kill(SIGCONT);
  hung_.clear();
}

absl::StatusOr<AppliedFault> FaultInjector::Apply(const Fault& fault, Nanos run_start) {
  const Clock* clock = RealClock::Get();
  AppliedFault a;
  a.fault = fault;
  const Nanos t0 = clock->Now();
  a.started = t0 - run_start;
  switch (fault.kind) {
    case FaultKind::kKillWorker:
    case FaultKind::kHangWorker:
    case FaultKind::kTerminateWorker: {
      const std::vector<int> healthy = HealthyWorkers();
      if (healthy.empty()) return absl::FailedPreconditionError("no healthy worker to fault");
      a.worker = healthy[rng_() % healthy.size()];
      Subprocess& w = cluster_->worker(a.worker);
      a.detail = absl::StrCat("worker ", a.worker, " (pid ", w.pid(), ")");
      if (fault.kind == FaultKind::kHangWorker) {
        w.Kill(SIGSTOP);
        if (fault.hang > 0) {
          std::this_thread::sleep_for(std::chrono::nanoseconds(fault.hang));
          w.Kill(SIGCONT);
          absl::StrAppend(&a.detail, " stopped for ", ToMillis(fault.hang), " ms");
        } else {
          hung_.push_back(a.worker);
        }
      } else {
        w.Kill(fault.kind == FaultKind::kKillWorker ? SIGKILL : SIGTERM);
        if (!w.Wait(Seconds(10)).has_value()) {
          w.Kill(SIGKILL);
          w.Wait(Seconds(5));
          absl::StrAppend(&a.detail, " (SIGTERM ignored for 10 s: killed)");
        }
        if (fault.replace) {
          auto added = cluster_->AddWorker();
          if (!added.ok()) return added.status();
          absl::StrAppend(&a.detail, ", replaced by worker ", *added);
        }
      }
      break;
    }
    case FaultKind::kRestartRouterDrain:
    case FaultKind::kRestartRouterKill: {
      const int generation = cluster_->router_generation();
      if (auto before = cluster_->ScrapeRouterTotals(); before.ok()) a.router_before = *before;
      auto status = cluster_->RestartRouter(
          fault.kind == FaultKind::kRestartRouterDrain ? SIGTERM : SIGKILL);
      if (!status.ok()) return status.status();
      if (auto log = WaitForFile(cluster_->router_log(generation), Seconds(1)); log.ok()) {
        if (auto exit = RouterExitTotals(*log); exit.ok()) a.router_exit = *exit;
      }
      a.detail = absl::StrCat("router ", generation, " exit status ", *status);
      break;
    }
  }
  a.took = clock->Now() - t0;
  return a;
}

}  // namespace superserve
