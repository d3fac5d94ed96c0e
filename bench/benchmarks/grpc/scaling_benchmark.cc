// `scaling` (SuperServe Fig. 11b, Clockwork's emulated-worker experiment):
// for N = 1, 2, 4, ... --max_workers emulated workers behind one router (one
// `superserve-worker --emulate --instances=N` process), all on this machine
// with this process as the open-loop Poisson load generator, the highest rate
// served with >= 0.999 SLO attainment, found by a geometric binary search of
// --probes short probes (--probe_s each). Every probe reads the CPU time
// (/proc/<pid>/stat) of the router(s), the worker process(es) and this
// process, and the whole machine's busy time (/proc/stat), so each point says
// what its rate cost: the router's CPU per query and how many cores each part
// kept busy. The baseline of the same run is the ideal linear curve,
// N x max_rate(1); efficiency = max_rate(N) / (N x max_rate(1)).
//
// --routers R shards the fleet: router r serves its own model ("shard<r>")
// with its own workers (N / R of them), and the load generator splits the
// rate by model in proportion to the workers behind it. A point with
// N < R workers uses N routers, so the 1-worker baseline is always one router
// with one worker.
//
// The emulated model is slow on purpose (batch 1/2/4 at 30/40/60 ms for the
// fast subnet: one worker serves at most ~67 q/s) so that the fleet, not the
// router, is the limit for several doublings.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/benchmark_registry.h"
#include "bench/benchmarks/grpc/emulated_fleet.h"
#include "bench/harness/local_cluster.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "common/process_cpu.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"

ABSL_FLAG(int32_t, max_workers, 256, "scaling: the largest fleet (1, 2, 4, ... up to this).");
ABSL_FLAG(double, probe_s, 2.0, "scaling: seconds of load per rate probe.");
ABSL_FLAG(int32_t, probes, 7, "scaling: rate probes per point (the binary search's budget).");
ABSL_FLAG(int32_t, routers, 1,
          "scaling: routers the fleet is sharded across (each its own model and workers).");
ABSL_FLAG(std::string, out_dir, "",
          "scaling: folder for scaling.json and scaling.csv (scripts/plot-scaling reads them); "
          "empty: none written. faults: folder for its timeline CSVs and PNG; empty: "
          "faults-report.");
ABSL_FLAG(double, scaling_slo_ms, 250, "scaling: query SLO, ms.");
ABSL_FLAG(std::string, scaling_transport, "stream",
          "scaling: client transport (stream: one InferStream per router; unary: one Infer "
          "call per query).");
ABSL_DECLARE_FLAG(std::string, bench_policy);
ABSL_DECLARE_FLAG(std::string, router_cpus);

namespace superserve::bench::scaling_benchmark {
namespace {

constexpr double kTargetAttainment = 0.999;

// The scaling model: two subnets (80 %, 85 %), batch 1/2/4, 30/40/60 ms and
// 45/60/90 ms.
EmulatedModel ScalingModel(const std::string& name) {
  EmulatedModel m;
  m.model = name;
  m.batch_sizes = {1, 2, 4};
  m.accuracy = {80, 85};
  m.base_us = {30000, 45000};
  m.batch_factor = {1, 4.0 / 3.0, 2};
  return m;
}

// What one worker can serve at most: the best batch size / latency.
double WorkerCapacityQps(const ModelProfile& p) {
  double best = 0;
  for (const auto& s : p.subnets) {
    for (size_t j = 0; j < p.batch_sizes.size() && j < s.latency.size(); ++j) {
      if (s.latency[j] > 0) best = std::max(best, p.batch_sizes[j] / ToSeconds(s.latency[j]));
    }
  }
  return best;
}

// Busy CPU time of the whole machine (all CPUs, every process) from the
// first line of /proc/stat: everything but idle and iowait.
absl::StatusOr<Nanos> MachineBusyTime() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind("cpu ", 0) != 0) {
    return absl::InternalError("cannot read /proc/stat");
  }
  std::istringstream fields(line.substr(4));
  std::vector<int64_t> v;
  int64_t x;
  while (fields >> x) v.push_back(x);
  if (v.size() < 5) return absl::InternalError("malformed /proc/stat: " + line);
  int64_t busy = 0;
  for (size_t i = 0; i < v.size() && i < 8; ++i) {  // guest times are inside user already
    if (i != 3 && i != 4) busy += v[i];
  }
  return static_cast<Nanos>(busy * (1e9 / sysconf(_SC_CLK_TCK)));
}

// The CPU time of several processes together; an error if any reading fails.
absl::StatusOr<Nanos> CpuOf(const std::vector<pid_t>& pids) {
  Nanos total = 0;
  for (pid_t pid : pids) {
    auto t = ProcessCpuTime(pid);
    if (!t.ok()) return t.status();
    total += *t;
  }
  return total;
}

struct CpuReadings {
  std::vector<absl::StatusOr<Nanos>> routers;  // one per router
  absl::StatusOr<Nanos> workers = Nanos{0};
  absl::StatusOr<Nanos> loadgen = Nanos{0};
  absl::StatusOr<Nanos> machine = Nanos{0};
  Nanos wall = 0;
};

struct Probe {
  double qps = 0;
  ReplaySummary summary;
  int64_t served = 0;
  double router_cpu_us_per_query = -1;  // all routers together
  double router_cores = -1;             // all routers together
  double busiest_router_cores = -1;
  double worker_cpu_us_per_query = -1;
  double worker_cores = -1;
  double loadgen_cpu_us_per_query = -1;
  double loadgen_cores = -1;
  double machine_busy_cores = -1;  // every process on the machine, other users included
  double mean_batch = 0;           // mean batch size over the OK answers
  bool passed() const { return summary.queries > 0 && summary.slo_attainment >= kTargetAttainment; }
};

struct Point {
  int workers = 0;
  int routers = 0;
  double idle_router_cores = -1;  // with no load: heartbeats, timers
  double idle_worker_cores = -1;
  double max_qps = 0;  // 0: not even the lowest rate probed passed
  Probe at_max;        // the passing probe at max_qps
  int probes = 0;
};

double CoresOf(const absl::StatusOr<Nanos>& before, const absl::StatusOr<Nanos>& after,
               Nanos wall) {
  if (!before.ok() || !after.ok() || wall <= 0) return -1;
  return static_cast<double>(*after - *before) / static_cast<double>(wall);
}

// One fleet of `workers` emulated workers behind `routers` routers.
class Fleet {
 public:
  static absl::StatusOr<std::unique_ptr<Fleet>> Start(const std::string& work, int workers,
                                                      int routers, Transport transport) {
    auto f = std::unique_ptr<Fleet>(new Fleet());
    for (int r = 0; r < routers; ++r) {
      const int n = workers / routers + (r < workers % routers ? 1 : 0);
      const std::string dir = absl::StrCat(work, "/n", workers, "-r", r);
      const std::string model = absl::StrCat("shard", r);
      auto repo = WriteEmulatedRepo(dir + "/repo", ScalingModel(model));
      if (!repo.ok()) return repo.status();
      LocalClusterOptions o;
      o.bin_dir = SelfDir();
      o.model_repo = *repo;
      o.work_dir = dir;
      o.policy = absl::GetFlag(FLAGS_bench_policy);
      o.workers = 1;
      o.instances_per_worker = n;
      o.emulate = true;
      if (!absl::GetFlag(FLAGS_router_cpus).empty()) {
        o.router_flags.push_back("--cpus=" + absl::GetFlag(FLAGS_router_cpus));
      }
      o.router_flags.push_back("--log_level=warning");
      o.worker_flags.push_back("--log_level=warning");
      auto cluster = LocalCluster::Start(o);
      if (!cluster.ok()) {
        return absl::Status(
            cluster.status().code(),
            absl::StrCat("router ", r, " with ", n, " workers: ", cluster.status().message()));
      }
      Shard s;
      s.workers = n;
      s.inputs = BenchInputs(32, model);
      s.client = std::make_unique<InferenceClient>((*cluster)->router_address(), transport);
      s.client->WaitForConnected(Seconds(5));
      s.cluster = std::move(*cluster);
      f->shards_.push_back(std::move(s));
    }
    f->workers_ = workers;
    return f;
  }

  // Offers `qps` in total for `seconds` (each router its share), returns
  // what came back and what it cost.
  Probe Run(double qps, double seconds, uint64_t seed, Nanos slo) {
    CpuReadings before = Read();
    const Nanos t0 = RealClock::Get()->Now();
    std::vector<absl::StatusOr<std::vector<QueryRecord>>> results(shards_.size(),
                                                                  std::vector<QueryRecord>{});
    std::vector<std::thread> threads;
    for (size_t r = 0; r < shards_.size(); ++r) {
      threads.emplace_back([&, r] {
        const double share = qps * shards_[r].workers / workers_;
        ReplayOptions ro;
        ro.default_slo = slo;
        ro.progress = false;
        results[r] = ReplayTrace(*shards_[r].client, PoissonTrace(share, seconds, seed * 131 + r),
                                 shards_[r].inputs, ro);
      });
    }
    for (auto& t : threads) t.join();
    const Nanos wall = RealClock::Get()->Now() - t0;
    CpuReadings after = Read();
    Probe p;
    p.qps = qps;
    std::vector<QueryRecord> all;
    for (auto& r : results) {
      if (!r.ok()) {
        std::fprintf(stderr, "scaling: replay: %s\n", std::string(r.status().message()).c_str());
        continue;
      }
      all.insert(all.end(), r->begin(), r->end());
    }
    // A replay that failed counts every query it was to send as missed.
    int64_t expected = 0;
    for (size_t r = 0; r < shards_.size(); ++r) {
      expected += static_cast<int64_t>(qps * shards_[r].workers / workers_ * seconds);
    }
    p.summary = Summarize(all);
    if (p.summary.queries < expected) {
      p.summary.slo_attainment = static_cast<double>(p.summary.ok) / expected;
      p.summary.queries = expected;
    }
    int64_t batch_sum = 0;
    for (const auto& q : all) {
      if (q.code != absl::StatusCode::kOk) continue;
      ++p.served;
      batch_sum += q.batch_size;
    }
    if (p.served > 0) p.mean_batch = static_cast<double>(batch_sum) / p.served;
    // Routers: the sum, and the busiest one's cores.
    absl::StatusOr<Nanos> rb = Nanos{0}, ra = Nanos{0};
    for (size_t r = 0; r < shards_.size(); ++r) {
      const double c = CoresOf(before.routers[r], after.routers[r], wall);
      p.busiest_router_cores = std::max(p.busiest_router_cores, c);
      if (!before.routers[r].ok() || !after.routers[r].ok()) {
        rb = before.routers[r].ok() ? after.routers[r].status() : before.routers[r].status();
      } else if (rb.ok()) {
        *rb += *before.routers[r];
        *ra += *after.routers[r];
      }
    }
    p.router_cpu_us_per_query = CpuPerQuery("scaling (routers)", rb, ra, p.served);
    p.router_cores = CoresOf(rb, ra, wall);
    p.worker_cpu_us_per_query =
        CpuPerQuery("scaling (workers)", before.workers, after.workers, p.served);
    p.worker_cores = CoresOf(before.workers, after.workers, wall);
    p.loadgen_cpu_us_per_query =
        CpuPerQuery("scaling (load generator)", before.loadgen, after.loadgen, p.served);
    p.loadgen_cores = CoresOf(before.loadgen, after.loadgen, wall);
    p.machine_busy_cores = CoresOf(before.machine, after.machine, wall);
    return p;
  }

  // What the fleet costs with no load (heartbeats, timers, idle streams):
  // the cores of all routers and of the worker processes over `seconds`.
  std::pair<double, double> IdleCores(double seconds) {
    CpuReadings before = Read();
    const Nanos t0 = RealClock::Get()->Now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const Nanos wall = RealClock::Get()->Now() - t0;
    CpuReadings after = Read();
    double routers = 0;
    for (size_t r = 0; r < shards_.size(); ++r) {
      routers += std::max(0.0, CoresOf(before.routers[r], after.routers[r], wall));
    }
    return {routers, CoresOf(before.workers, after.workers, wall)};
  }

  void Stop() {
    for (auto& s : shards_) {
      s.client.reset();
      s.cluster->Stop();
    }
  }

 private:
  struct Shard {
    int workers = 0;
    LabelledRequests inputs;
    std::unique_ptr<InferenceClient> client;
    std::unique_ptr<LocalCluster> cluster;
  };

  CpuReadings Read() {
    CpuReadings c;
    std::vector<pid_t> worker_pids;
    for (auto& s : shards_) {
      c.routers.push_back(ProcessCpuTime(s.cluster->router().pid()));
      for (int i = 0; i < s.cluster->num_workers(); ++i) {
        worker_pids.push_back(s.cluster->worker(i).pid());
      }
    }
    c.workers = CpuOf(worker_pids);
    c.loadgen = ProcessCpuTime(getpid());
    c.machine = MachineBusyTime();
    return c;
  }

  Fleet() = default;
  int workers_ = 0;
  std::vector<Shard> shards_;
};

std::string Fmt(double v, const char* format) {
  if (v < 0) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

void PrintProbe(int workers, const Probe& p) {
  std::fprintf(stderr,
               "  N=%d %.1f q/s offered: attainment %.4f, served %.1f q/s, p99 %.1f ms, mean "
               "batch %.2f, router %s/query (%s cores), load generator %s cores, workers %s "
               "cores, machine %s cores busy\n",
               workers, p.qps, p.summary.slo_attainment, p.summary.throughput_qps, p.summary.p99_ms,
               p.mean_batch, CpuText(p.router_cpu_us_per_query).c_str(),
               Fmt(p.router_cores, "%.2f").c_str(), Fmt(p.loadgen_cores, "%.2f").c_str(),
               Fmt(p.worker_cores, "%.2f").c_str(), Fmt(p.machine_busy_cores, "%.2f").c_str());
}

// The highest rate in [lo, hi] that passes, by geometric bisection with at
// most `budget` probes; `lo` itself is probed only when nothing above it
// passed. Returns 0 when not even `lo` passed.
Point SearchMaxRate(Fleet& fleet, int workers, int routers, double lo, double hi, int budget,
                    double probe_s, Nanos slo) {
  Point pt;
  pt.workers = workers;
  pt.routers = routers;
  uint64_t seed = static_cast<uint64_t>(workers) * 1000003;
  auto probe = [&](double qps) {
    Probe p = fleet.Run(qps, probe_s, ++seed, slo);
    ++pt.probes;
    PrintProbe(workers, p);
    // Let the queues drain between probes.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (p.passed() && qps > pt.max_qps) {
      pt.max_qps = qps;
      pt.at_max = p;
    }
    return p.passed();
  };
  for (int i = 0; i < budget; ++i) {
    const double mid = std::sqrt(lo * hi);
    if (probe(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (pt.max_qps == 0) probe(lo);
  return pt;
}

// What bounds a point. While the curve is linear (efficiency >= 0.9) it is
// the fleet: the workers' emulated capacity and queueing. Past that, from the
// cores at its max rate: "machine" when this benchmark's processes together
// (routers, workers, load generator) kept (nearly) all of this machine's CPUs
// busy; "router" when the busiest router used (nearly) a whole core;
// "machine (other processes)" when the machine was busy with other work.
double OwnCores(const Probe& p) {
  return std::max(0.0, p.router_cores) + std::max(0.0, p.worker_cores) +
         std::max(0.0, p.loadgen_cores);
}
std::string Limit(const Probe& p, double efficiency, int cpus) {
  if (efficiency >= 0.9) return "fleet";
  if (OwnCores(p) >= 0.85 * cpus) return "machine";
  if (p.busiest_router_cores >= 0.85) return "router";
  if (p.machine_busy_cores >= 0.85 * cpus) return "machine (other processes)";
  return "unknown";
}

int MeasureScaling(const BenchmarkArgs& args, const std::string& work) {
  const int max_workers = absl::GetFlag(FLAGS_max_workers);
  const int routers = std::max(1, absl::GetFlag(FLAGS_routers));
  const double probe_s = absl::GetFlag(FLAGS_probe_s);
  const int budget = std::max(1, absl::GetFlag(FLAGS_probes));
  const Nanos slo = Millis(absl::GetFlag(FLAGS_scaling_slo_ms));
  const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  auto transport = ParseTransport(absl::GetFlag(FLAGS_scaling_transport));
  const double capacity = WorkerCapacityQps(MakeEmulatedProfile(ScalingModel("shard0")));
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  std::vector<Point> points;
  for (int n = 1; n <= max_workers; n *= 2) {
    const int r = std::min(routers, n);
    auto fleet = Fleet::Start(work, n, r, *transport);
    if (!fleet.ok()) {
      std::fprintf(stderr, "scaling: %s\n", std::string(fleet.status().message()).c_str());
      return 1;
    }
    // The search bracket: no fleet serves more than its workers' capacity;
    // the lower end is well below the previous point's rate (more workers
    // serve at least about as much) and below 1/16 of the capacity.
    const double hi = n * capacity * 1.1;
    double lo = hi / 16;
    if (!points.empty() && points.back().max_qps > 0) lo = std::min(lo, points.back().max_qps / 2);
    // Warm-up (connections, threads), not counted.
    (void)(*fleet)->Run(lo, std::min(0.5, probe_s), 1, slo);
    const auto idle = (*fleet)->IdleCores(std::min(1.0, probe_s / 2));
    Point pt = SearchMaxRate(**fleet, n, r, lo, hi, budget, probe_s, slo);
    pt.idle_router_cores = idle.first;
    pt.idle_worker_cores = idle.second;
    (*fleet)->Stop();
    const double ideal = points.empty() ? pt.max_qps : n * points.front().max_qps;
    std::fprintf(stderr,
                 "scaling: N=%d workers, %d router(s): max %.1f q/s at >= %.3f attainment "
                 "(ideal %.1f, efficiency %.3f), router %s/query (%s cores), load generator "
                 "%s/query, idle: router %s cores, workers %s cores, %d probes\n",
                 n, r, pt.max_qps, kTargetAttainment, ideal, ideal > 0 ? pt.max_qps / ideal : 0,
                 CpuText(pt.at_max.router_cpu_us_per_query).c_str(),
                 Fmt(pt.at_max.router_cores, "%.2f").c_str(),
                 CpuText(pt.at_max.loadgen_cpu_us_per_query).c_str(),
                 Fmt(pt.idle_router_cores, "%.3f").c_str(),
                 Fmt(pt.idle_worker_cores, "%.3f").c_str(), pt.probes);
    points.push_back(pt);
  }
  const double base = points.front().max_qps;
  // Linear while every point so far keeps >= 0.9 of the ideal.
  int linear_until = 0;
  for (const auto& p : points) {
    if (base <= 0 || p.max_qps < 0.9 * p.workers * base) break;
    linear_until = p.workers;
  }
  std::vector<JsonWriter> rows;
  std::ostringstream csv;
  csv << "workers,routers,max_qps,ideal_qps,efficiency,slo_attainment,p99_ms,mean_batch,"
         "router_cpu_us_per_query,router_cores,busiest_router_cores,worker_cpu_us_per_query,"
         "worker_cores,loadgen_cpu_us_per_query,loadgen_cores,machine_busy_cores,other_cores,idle_"
         "router_cores,idle_worker_cores,limit,probes\n";
  const Point* first_nonlinear = nullptr;
  for (const auto& p : points) {
    const double ideal = p.workers * base;
    const double eff = ideal > 0 ? p.max_qps / ideal : 0;
    if (first_nonlinear == nullptr && p.workers > linear_until) first_nonlinear = &p;
    const Probe& m = p.at_max;
    const std::string limit = p.max_qps > 0 ? Limit(m, eff, cpus) : "none passed";
    JsonWriter row;
    row.Add("workers", p.workers)
        .Add("routers", p.routers)
        .Add("max_qps", p.max_qps)
        .Add("ideal_qps", ideal)
        .Add("efficiency", eff)
        .Add("slo_attainment", m.summary.slo_attainment)
        .Add("p99_ms", m.summary.p99_ms)
        .Add("mean_batch", m.mean_batch)
        .Add("router_cpu_us_per_query", m.router_cpu_us_per_query)
        .Add("router_cores", m.router_cores)
        .Add("busiest_router_cores", m.busiest_router_cores)
        .Add("worker_cpu_us_per_query", m.worker_cpu_us_per_query)
        .Add("worker_cores", m.worker_cores)
        .Add("loadgen_cpu_us_per_query", m.loadgen_cpu_us_per_query)
        .Add("loadgen_cores", m.loadgen_cores)
        .Add("machine_busy_cores", m.machine_busy_cores)
        .Add("other_cores", std::max(0.0, m.machine_busy_cores - OwnCores(m)))
        .Add("idle_router_cores", p.idle_router_cores)
        .Add("idle_worker_cores", p.idle_worker_cores)
        .Add("limit", limit)
        .Add("probes", p.probes);
    rows.push_back(std::move(row));
    char line[512];
    std::snprintf(line, sizeof(line),
                  "%d,%d,%.2f,%.2f,%.4f,%.4f,%.2f,%.3f,%.2f,%.3f,%.3f,%.2f,%.3f,%.2f,%.3f,"
                  "%.3f,%.3f,%.3f,%.3f,%s,%d\n",
                  p.workers, p.routers, p.max_qps, ideal, eff, m.summary.slo_attainment,
                  m.summary.p99_ms, m.mean_batch, m.router_cpu_us_per_query, m.router_cores,
                  m.busiest_router_cores, m.worker_cpu_us_per_query, m.worker_cores,
                  m.loadgen_cpu_us_per_query, m.loadgen_cores, m.machine_busy_cores,
                  std::max(0.0, m.machine_busy_cores - OwnCores(m)), p.idle_router_cores,
                  p.idle_worker_cores, limit.c_str(), p.probes);
    csv << line;
    std::printf(
        "N=%4d  max %8.1f q/s  ideal %8.1f  efficiency %.3f  router %s/query (%s "
        "cores)  load generator %s/query (%s cores)  machine %s cores busy  limit: %s\n",
        p.workers, p.max_qps, ideal, eff, CpuText(m.router_cpu_us_per_query).c_str(),
        Fmt(m.router_cores, "%.2f").c_str(), CpuText(m.loadgen_cpu_us_per_query).c_str(),
        Fmt(m.loadgen_cores, "%.2f").c_str(), Fmt(m.machine_busy_cores, "%.2f").c_str(),
        limit.c_str());
  }
  const Point& last = points.back();
  JsonWriter out;
  out.Add("benchmark", "scaling")
      .Add("routers", routers)
      .Add("max_workers", max_workers)
      .Add("probe_s", probe_s)
      .Add("probes_per_point", budget)
      .Add("slo_ms", ToMillis(slo))
      .Add("target_attainment", kTargetAttainment)
      .Add("transport", absl::GetFlag(FLAGS_scaling_transport))
      .Add("policy", absl::GetFlag(FLAGS_bench_policy))
      .Add("machine_cpus", cpus)
      .Add("worker_capacity_qps", capacity)
      .Add("max_qps_1", base)
      .Add("max_qps", last.max_qps)
      // The baseline: the ideal linear curve at the largest fleet.
      .Add("ideal_qps", last.workers * base)
      .Add("ratio_vs_ideal", base > 0 ? last.max_qps / (last.workers * base) : 0)
      .Add("linear_until_workers", linear_until);
  if (first_nonlinear != nullptr) {
    // Where the curve leaves linear, and what one query cost the router there.
    out.Add("nonlinear_from_workers", first_nonlinear->workers)
        .Add("nonlinear_router_cpu_us_per_query", first_nonlinear->at_max.router_cpu_us_per_query)
        .Add(
            "nonlinear_limit",
            first_nonlinear->max_qps > 0
                ? Limit(first_nonlinear->at_max,
                        base > 0 ? first_nonlinear->max_qps / (first_nonlinear->workers * base) : 0,
                        cpus)
                : "none passed");
  }
  const std::string json = out.AddArray("points", rows).ToString();
  if (!out_dir.empty()) {
    std::ofstream(out_dir + "/scaling.csv") << csv.str();
    std::ofstream(out_dir + "/scaling.json") << json << "\n";
  }
  if (args.json) std::printf("%s\n", json.c_str());
  return base > 0 ? 0 : 1;
}

RegisterBenchmark reg_scaling(
    "scaling",
    "highest rate at >= 0.999 attainment for 1, 2, 4, ... emulated workers behind one router "
    "(or --routers shards) vs the ideal linear curve, with the router's CPU per query",
    [](const BenchmarkArgs& args) {
      // Usage errors before anything starts (exit 2, no scratch directory).
      // Upper bounds too: an infinite --probe_s overflowed nanoseconds, and
      // every worker and router is a process of this machine.
      const double probe_s = absl::GetFlag(FLAGS_probe_s);
      const double slo_ms = absl::GetFlag(FLAGS_scaling_slo_ms);
      if (!ParseTransport(absl::GetFlag(FLAGS_scaling_transport)).ok() ||
          absl::GetFlag(FLAGS_max_workers) < 1 || absl::GetFlag(FLAGS_max_workers) > 4096 ||
          !(probe_s > 0 && probe_s <= 3600) || absl::GetFlag(FLAGS_probes) < 1 ||
          absl::GetFlag(FLAGS_probes) > 100 || absl::GetFlag(FLAGS_routers) < 1 ||
          absl::GetFlag(FLAGS_routers) > 64 || !(slo_ms > 0 && slo_ms <= 3600e3)) {
        std::fprintf(stderr,
                     "scaling: need --max_workers in [1, 4096], --probe_s in (0, 3600], --probes "
                     "in [1, 100], --routers in [1, 64], --scaling_slo_ms in (0, 3.6e6] and "
                     "--scaling_transport unary|stream\n");
        return 2;
      }
      const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
      std::error_code ec;
      if (!out_dir.empty() && !std::filesystem::create_directories(out_dir, ec) && ec) {
        std::fprintf(stderr, "scaling: --out_dir %s: %s\n", out_dir.c_str(), ec.message().c_str());
        return 2;
      }
      return InScratchDir("scaling", [&](const std::string& w) { return MeasureScaling(args, w); });
    });

}  // namespace
}  // namespace superserve::bench::scaling_benchmark
