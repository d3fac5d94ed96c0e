// The serving core's effects: the work it decides under its lock (batches,
// loads, answers, closes, observer events) and carries out after releasing
// it, so that nothing calls out while the lock is held (docs/design.md).
#ifndef SUPERSERVE_SERVING_CORE_EFFECTS_H_
#define SUPERSERVE_SERVING_CORE_EFFECTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/logging.h"
#include "common/time.h"
#include "serving/batch.h"
#include "serving/query_handle.h"
#include "serving/serving_observer.h"
#include "serving/worker_channel.h"

namespace superserve {

struct CoreEffects {
  std::vector<std::pair<std::shared_ptr<WorkerChannel>, BatchPlan>> sends;
  std::vector<std::pair<QueryHandle*, QueryAnswer>> answers;
  std::vector<std::pair<std::shared_ptr<const std::string>, QueryDone>> done;
  // Worker losses and housekeeping: kept apart, so that an arrival or a
  // batch result (nearly every call) neither builds nor frees them.
  struct Rare {
    std::vector<std::pair<std::shared_ptr<WorkerChannel>, absl::Status>> closes;
    std::vector<std::pair<std::shared_ptr<const std::string>, int64_t>> depths;
    std::vector<std::pair<std::shared_ptr<const std::string>, double>> busy;
    std::vector<std::pair<std::shared_ptr<const std::string>, double>> slowdown;
    // (model, worker) of each batch refused for a closed window.
    std::vector<std::pair<std::shared_ptr<const std::string>, std::shared_ptr<const std::string>>>
        refused;
    // Placement, applied before the batches (one channel's order: unload,
    // load, batches): (channel, model, expected load time).
    std::vector<std::pair<std::shared_ptr<WorkerChannel>, std::string>> unloads;
    std::vector<std::tuple<std::shared_ptr<WorkerChannel>, std::string, Nanos>> loads;
    // (model, worker, cold start) of each finished load.
    std::vector<std::tuple<std::shared_ptr<const std::string>, std::shared_ptr<const std::string>,
                           Nanos>>
        loaded;
    // A closed model's query was answered: Apply looks, under the lock
    // again, for closed models that are drained now (ServingCore::CloseModel).
    bool drain_check = false;
    // The on_drained callbacks of models found drained, run last.
    std::vector<std::function<void()>> drained;
    // Log lines, written after the lock: a worker or client that triggers
    // them at will (an unknown batch id, a wrong result count, reconnects)
    // then never holds the core up on stderr.
    struct LogEntry {
      LogLevel level;
      const char* file;
      int line;
      std::string text;
    };
    std::vector<LogEntry> logs;
  };
  std::unique_ptr<Rare> rare;  // null: none of them
  Rare& rare_effects() {
    if (rare == nullptr) rare = std::make_unique<Rare>();
    return *rare;
  }
  // Records a log line for Carry (below the log level: dropped now).
  void Log(LogLevel level, const char* file, int line, std::string text) {
    if (level < GetLogLevel()) return;
    rare_effects().logs.push_back({level, file, line, std::move(text)});
  }
  int32_t workers_alive = -1;  // >= 0: report it
  uint64_t workers_alive_version = 0;  // ServingCore::NoteWorkersAliveLocked's
  Nanos wake = 0;              // > 0: ask the owner for a Tick at this time

  // Carries out all but the live-worker count and the wake-up (the core
  // reports those after, from its own state): for each channel its unloads,
  // loads and batches in that order (each batch told to `observer` first,
  // may be null), then the answers, the closes, the log lines, the
  // observer's events and the drained models' callbacks.
  void Carry(ServingObserver* observer);
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_CORE_EFFECTS_H_
