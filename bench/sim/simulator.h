#ifndef SUPERSERVE_BENCH_SIM_SIMULATOR_H_
#define SUPERSERVE_BENCH_SIM_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_profile.h"
#include "common/time.h"
#include "policies/policy.h"
#include "serving/serving_core.h"

namespace superserve {

struct SimulatorOptions {
  int32_t workers = 8;
  Nanos slo = Millis(36);
  uint64_t seed = 1;
  // Multiplicative execution-time noise: lognormal with mean 1 and this
  // coefficient of variation (0 = the profile's latencies exactly).
  double noise_cv = 0;
  // The machine runs this many times slower (or faster) than its profile:
  // every execution takes latency x exec_scale (x noise). The policy still
  // starts from the profile; its online correction has to find the truth
  // (the live main job's workers share 2 cores with the router and the load
  // generator and run ~2x their quiet-machine profile).
  double exec_scale = 1.0;
  // Router -> worker -> router time added to every batch (RPC + transfer);
  // reported to the policy as telemetry overhead.
  Nanos dispatch_overhead = Micros(500);
  // When not empty, each batch's overhead is drawn from these instead
  // (uniformly, seeded): an empirical distribution, e.g. the per-query
  // overheads a live run measured, so that the tail of the machine's RPC and
  // scheduling delays reaches the simulation and not only their median.
  std::vector<Nanos> dispatch_overhead_samples;
  // At each of these times one more worker (the highest live id) fails; the
  // serving core applies the router's rule to its in-flight batch: queries
  // that can still make their deadline are re-queued, the rest dropped.
  std::vector<Nanos> worker_failures;
  // The serving core's options (lookahead, batch grace, tick interval); the
  // simulator turns heartbeat checks off and the queue bound up.
  ServingOptions serving;
  // Tests: replaces the profile-based execution time of a batch (subnet id,
  // number of queries) -> time; noise and exec_scale then do not apply.
  std::function<Nanos(int32_t subnet_id, int32_t queries)> exec_time;
  // Tests: every worker starts each batch this long after it was sent (a
  // worker delayed on purpose); a batch whose action window closed by then
  // is refused, and the serving core re-queues or answers its queries.
  Nanos start_delay = 0;
  // Tests and tools: also told of every answer and batch the core produced.
  ServingObserver* trace = nullptr;
  // Whether to keep the per-bin timeline (SimulationResult::timeline). Its
  // bins cover the whole simulated span, empty ones included: a run that
  // does not write it (superserve-sim without --timeline) turns it off, so
  // that its memory follows the queries, not the span of their times.
  bool timeline = true;
  Nanos timeline_bin = Seconds(1);
  // Dynamic models (profile.is_dynamic): the application of each arrival, an
  // index into profile.dynamic.applications (empty = all the first one), and
  // optionally each query's own execution time l in us (empty = drawn from
  // its application's histogram with `seed`). A batch of k runs
  // c0 + c1 * k * max(l) (times exec_scale); workers report every query's l
  // as telemetry.
  std::vector<int32_t> applications;
  std::vector<double> exec_us;
  // Placement (serving/residency.h): each worker's model memory in bytes
  // (0 = unlimited: every model resident everywhere, as before). With a
  // budget, workers start empty and load models as the core asks, each load
  // taking the profile's load_time (one at a time per worker, beside its
  // batches), using the profile's memory_bytes.
  int64_t worker_memory_bytes = 0;
  // The per-model counts (SimulationResult::model_queries, model_met), the
  // loads, unloads and cold starts count from this time on (queries by
  // arrival): a warm-up left out. 0 = all.
  Nanos measure_from = 0;
};

// The most bins a timeline may have (one CSV row each): a million rows is
// more than any plot reads, and the bins then take ~70 MB. A timeline that
// needs more is an InvalidArgument error that asks for wider bins.
constexpr int64_t kMaxTimelineBins = 1000 * 1000;

// One bin of the simulated timeline.
struct TimelineBin {
  Nanos start = 0;
  int64_t arrivals = 0;
  int64_t met = 0;
  int64_t late = 0;
  int64_t dropped = 0;
  double accuracy_sum = 0;  // over met queries
  int64_t batches = 0;
  int64_t batched_queries = 0;
  int32_t live_workers = 0;  // at the end of the bin
};

struct SimulationResult {
  std::string policy;
  int64_t queries = 0;
  int64_t met = 0;      // completed by their deadline
  int64_t late = 0;     // completed after it
  int64_t dropped = 0;  // answered DEADLINE_EXCEEDED by the policy, or never served
  int64_t batches = 0;
  int64_t refused = 0;  // batches refused by a worker (action window closed)
  double accuracy_sum = 0;
  Nanos p99_latency = 0;   // over completed queries (met + late)
  Nanos first_arrival = 0;
  Nanos last_event = 0;
  std::vector<TimelineBin> timeline;  // empty unless SimulatorOptions::timeline
  // Times the simulation ran the serving core's Tick (tests: idle time, with
  // nothing due, costs none).
  int64_t ticks = 0;
  // Execution time each worker spent on batches (registration order), over
  // [first_arrival, last_event]: the load-proportionality measure.
  std::vector<Nanos> worker_busy;
  // Per model, in the order SimulateModels was given them (one entry for
  // Simulate): queries and queries that met their deadline.
  std::vector<int64_t> model_queries;
  std::vector<int64_t> model_met;
  // Placement: loads and unloads the core asked for, and the cold starts
  // (first query finding its model resident nowhere -> model resident),
  // from SimulatorOptions::measure_from; load_too_late over the whole run.
  int64_t loads = 0;
  int64_t unloads = 0;
  int64_t load_too_late = 0;
  std::vector<Nanos> cold_starts;
  // Dynamic models: queries dispatched at each exit threshold (0 = the
  // model's default, stated by no profile), by threshold.
  std::map<double, int64_t> threshold_queries;

  double slo_attainment() const { return queries ? static_cast<double>(met) / queries : 0; }
  // SuperServe's definition: averaged over the queries that met their SLO.
  double mean_accuracy() const { return met ? accuracy_sum / met : 0; }
  double throughput_qps() const;
  double mean_batch() const { return batches ? static_cast<double>(met + late) / batches : 0; }
  // Fraction of worker time spent idle over the run (Symphony §2's
  // load-proportionality: ≈ (peak − offered) / peak for an ideal scheduler).
  double idle_fraction() const;
  // Workers that ran at least one batch.
  int32_t workers_used() const;
};

// Discrete-event simulation on the simulated clock: queries arrive at the
// trace's times with deadline arrival + slo and go through the router's own
// serving core (serving/: EDF queue, policy, the rules for applying its
// decisions, worker loss), with emulated workers that run each batch for the
// profile's latency (times the optional noise and scale) plus the dispatch
// overhead. Every query ends exactly once as met, late or dropped. A dynamic
// model's batches take the Orloj batch time of their queries' own times.
absl::StatusOr<SimulationResult> Simulate(const ModelProfile& profile,
                                          absl::Span<const Nanos> arrivals, Policy* policy,
                                          const SimulatorOptions& options);

// One model of a multi-model simulation: its profile, the policy that
// schedules it (kept by the caller) and its SLO (0 = SimulatorOptions::slo).
struct SimulatedModel {
  const ModelProfile* profile = nullptr;
  Policy* policy = nullptr;
  Nanos slo = 0;
};

// Many models sharing one pool of `options.workers` workers (every worker
// serves every model; statistical multiplexing), each with its own profile,
// queue and policy, through the same serving core. `model_of[i]` is the
// index into `models` of arrival i. Simulate is the one-model case.
absl::StatusOr<SimulationResult> SimulateModels(absl::Span<const SimulatedModel> models,
                                                absl::Span<const Nanos> arrivals,
                                                absl::Span<const int32_t> model_of,
                                                const SimulatorOptions& options);

// The timeline as CSV (one row per bin) for plots.
absl::Status WriteTimelineCsv(const SimulationResult& r, Nanos bin, const std::string& path);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_SIMULATOR_H_
