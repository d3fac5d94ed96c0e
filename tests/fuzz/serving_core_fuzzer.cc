// libFuzzer target: the serving core and every policy, on profiles, clients
// and workers nobody wrote by hand. The input picks one to three models
// sharing the workers, each a profile (a supernet's or a dynamic model's;
// only what the profile validation accepts is served) and a policy by name,
// the core's options, and then a run of operations on a simulated clock:
// queries with any deadline and application tag, for a served model or not;
// workers joining for some of the models, answering (correctly, with
// missing/foreign ids, failed, refused for a closed window, with wild
// telemetry), vanishing, heartbeating; clients cancelling; a model being
// replaced, closed or attached to a worker; time passing. With placement
// (issue 43): models with a footprint and a load time, workers with a
// memory budget (or none), loads reported done, failed or stale, with or
// without a measured footprint, in any order with the rest.
//
// Checked on every input:
//   - every accepted query gets exactly one answer (never two, none lost),
//     and after Shutdown nothing is pending;
//   - every batch the core sends is well formed: queries, one input each, no
//     query twice or in two batches at once, no more than the profiled batch
//     size it names, a subnet of the profile (supernets), to the worker it
//     was sent on;
//   - a query is answered OK only while a worker's result for its batch is
//     handed in, naming a batch size and (supernets) a subnet of the
//     profile; every error answer has a message, and none is the core's
//     answer to a policy that returned an impossible dispatch;
//   - Tick() never asks to be called in the past;
//   - placement: no batch goes to a budgeted worker that does not hold its
//     model (loaded and reported), and no eviction unloads a model with a
//     batch still on that worker.
// ASan and UBSan (the fuzz build's) catch overflow in the policies'
// arithmetic on extreme latencies and deadlines.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/model_profile.h"
#include "policies/policy_factory.h"
#include "serving/serving_core.h"
#include "superserve/v1/profile.pb.h"
#include "tests/baselines_registered.h"  // every selectable policy: the baselines too
#include "tests/fuzz/fuzz_check.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

using testing::FakeChannel;

// Set while a worker's batch result is being handed to the core: the only
// time a query may be answered OK.
bool g_in_batch_result = false;

// What a worker reports it measured at load: often nothing (0), sometimes
// more or less than the profile says, sometimes nonsense (negative).
int64_t AnyFootprint(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<int64_t>(-3, 300);
}

class Handle final : public QueryHandle {
 public:
  explicit Handle(const ModelProfile* profile) : profile_(profile) {}
  void Deliver(QueryAnswer a) override {
    FUZZ_CHECK(answers == 0);  // exactly one answer
    ++answers;
    if (!a.status.ok()) {
      FUZZ_CHECK(!a.status.message().empty());  // the error says what was wrong
      // The core fails a queue whose policy returned an impossible dispatch
      // (serving/model_scheduler.cc): a policy bug, never expected.
      FUZZ_CHECK(a.status.message().find("returned an invalid dispatch") == std::string::npos);
      return;
    }
    // OK only from a worker's result, for a batch of a served model.
    FUZZ_CHECK(g_in_batch_result);
    FUZZ_CHECK(profile_ != nullptr);
    FUZZ_CHECK(a.batch_size >= 1 && a.batch_size <= profile_->max_batch());
    if (!profile_->is_dynamic) FUZZ_CHECK(profile_->SubnetIndex(a.subnet_id) >= 0);
  }
  int answers = 0;

 private:
  const ModelProfile* profile_;
};

// A latency in [1 us, ~4 s], spread over the orders of magnitude.
Nanos AnyLatency(FuzzedDataProvider& in) {
  const int decade = in.ConsumeIntegralInRange<int>(0, 6);  // 1 us .. 1 s
  Nanos unit = Micros(1);
  for (int i = 0; i < decade; ++i) unit *= 10;
  return unit * in.ConsumeIntegralInRange<int64_t>(1, 4);
}

// A profile the validation accepts, or nullopt.
std::optional<ModelProfile> AnyProfile(FuzzedDataProvider& in, bool dynamic) {
  ModelProfile p;
  p.model = "m";
  p.input_shape = {1};
  p.num_classes = 2;
  // Batch sizes: powers of two, strictly increasing; dynamic ones start at 1.
  const int top = in.ConsumeIntegralInRange<int>(0, 9);  // up to 512
  for (int e = 0; e <= top; ++e) {
    if ((dynamic && e == 0) || e == top || in.ConsumeBool()) p.batch_sizes.push_back(1 << e);
  }
  if (dynamic) {
    p.is_dynamic = true;
    p.dynamic.batch_overhead_us = in.ConsumeIntegralInRange<int>(0, 20000);
    p.dynamic.per_request_factor = in.ConsumeFloatingPointInRange<double>(0.001, 4.0);
    const int apps = in.ConsumeIntegralInRange<int>(1, 4);
    for (int a = 0; a < apps; ++a) {
      ApplicationHistogram h;
      h.application = "app" + std::to_string(a);
      const int bins = in.ConsumeIntegralInRange<int>(1, 6);
      double edge = in.ConsumeFloatingPointInRange<double>(0, 1000);
      h.bin_edges_us.push_back(edge);
      for (int b = 0; b < bins; ++b) {
        edge += in.ConsumeFloatingPointInRange<double>(0.5, 50000);
        h.bin_edges_us.push_back(edge);
        h.counts.push_back(in.ConsumeIntegralInRange<int>(0, 100));
      }
      if (in.ConsumeBool()) h.counts.back() += 1;  // sum > 0 usually
      p.dynamic.applications.push_back(std::move(h));
    }
  } else {
    const int subnets = in.ConsumeIntegralInRange<int>(1, 6);
    for (int s = 0; s < subnets; ++s) {
      SubnetProfile sn;
      sn.id = in.ConsumeIntegralInRange<int32_t>(0, 8);  // duplicates are refused
      sn.accuracy = in.ConsumeFloatingPointInRange<double>(0, 100);
      Nanos l = AnyLatency(in);
      for (size_t b = 0; b < p.batch_sizes.size(); ++b) {
        if (b > 0 && in.ConsumeBool()) l += AnyLatency(in);  // flat or rising
        sn.latency.push_back(l);
      }
      p.subnets.push_back(std::move(sn));
    }
  }
  v1::ModelProfile proto;
  p.ToProto(&proto);
  auto valid = ModelProfile::FromProto(proto);
  if (!valid.ok()) {
    FUZZ_CHECK(!valid.status().message().empty());
    return std::nullopt;
  }
  return *std::move(valid);
}

// One served model: its profile and the policy name it is served with.
struct Served {
  std::string name;
  ModelProfile profile;
  std::string policy;
};

const Served* Find(const std::vector<Served>& models, const std::string& name) {
  for (const Served& m : models) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

void CheckBatch(const BatchPlan& b, const FakeChannel& c, const std::vector<Served>& models,
                std::unordered_set<QueryId>* on_workers) {
  FUZZ_CHECK(!b.queries.empty());
  FUZZ_CHECK(b.inputs.size() == b.queries.size());
  FUZZ_CHECK(b.worker == c.id);
  const Served* m = Find(models, b.model);
  FUZZ_CHECK(m != nullptr);
  const ModelProfile& p = m->profile;
  FUZZ_CHECK(b.batch_size >= static_cast<int32_t>(b.queries.size()));
  FUZZ_CHECK(p.BatchIndex(b.batch_size) >= 0);
  if (!p.is_dynamic) {
    FUZZ_CHECK(b.subnet_index >= 0 && b.subnet_index < static_cast<int32_t>(p.subnets.size()));
    FUZZ_CHECK(b.subnet_id == p.subnets[b.subnet_index].id);
  }
  for (QueryId id : b.queries) FUZZ_CHECK(on_workers->insert(id).second);
}

absl::StatusOr<std::unique_ptr<Policy>> MakeChecked(const Served& m) {
  auto policy = MakePolicy(m.policy, m.profile, PolicyConfig());
  FUZZ_CHECK(policy.ok() || !policy.status().message().empty());
  return policy;
}

void Run(FuzzedDataProvider& in) {
  // One to three models sharing the workers (Symphony's many-model case, the
  // cross-model order), each a supernet or a dynamic model with its policy.
  std::vector<Served> models;
  const int num_models = in.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < num_models; ++i) {
    const bool dynamic = in.ConsumeIntegralInRange<int>(0, 3) == 0;
    std::optional<ModelProfile> profile = AnyProfile(in, dynamic);
    if (!profile) return;
    Served m;
    m.name = "m" + std::to_string(i);
    profile->model = m.name;
    m.profile = *std::move(profile);
    const std::vector<std::string> names = dynamic ? DynamicPolicyNames() : PolicyNames();
    m.policy = names[in.ConsumeIntegralInRange<size_t>(0, names.size() - 1)];
    models.push_back(std::move(m));
  }
  const bool placed = in.ConsumeBool();
  if (placed) {
    for (Served& m : models) {
      m.profile.memory_bytes = in.ConsumeIntegralInRange<int64_t>(0, 120);
      m.profile.load_time = in.ConsumeBool() ? 0 : AnyLatency(in);
    }
  }
  std::set<std::string> removed;  // replaced at least once: unloads may follow batches
  std::vector<std::unique_ptr<Policy>> first;
  for (const Served& m : models) {
    auto policy = MakeChecked(m);
    if (!policy.ok()) return;
    first.push_back(*std::move(policy));
  }
  auto any_model = [&]() -> std::string {
    const size_t i = in.ConsumeIntegralInRange<size_t>(0, models.size());
    return i < models.size() ? models[i].name : "other";  // sometimes one not served
  };

  SimulatedClock clock(Seconds(1));
  ServingOptions o;
  o.log_lifecycle = false;
  o.lookahead = in.ConsumeIntegralInRange<int32_t>(1, 3);
  o.max_queue = in.ConsumeIntegralInRange<size_t>(1, 64);
  o.heartbeat_interval = Millis(in.ConsumeIntegralInRange<int>(1, 50));
  o.missed_heartbeats = in.ConsumeIntegralInRange<int32_t>(0, 3);
  o.batch_grace = Millis(in.ConsumeIntegralInRange<int>(0, 100));
  o.max_applications = in.ConsumeIntegralInRange<size_t>(0, 4);
  o.overload.shed = in.ConsumeBool();
  o.per_worker_speed = in.ConsumeBool();

  // Handles outlive the core (it may answer from its destructor).
  std::vector<std::unique_ptr<Handle>> handles;
  std::vector<std::shared_ptr<FakeChannel>> workers;
  std::unordered_set<QueryId> on_workers;  // ids in batches not yet answered
  std::unordered_set<uint64_t> checked;    // batch ids CheckBatch has seen
  {
    ServingCore core(o, &clock);
    for (size_t i = 0; i < models.size(); ++i) {
      FUZZ_CHECK(core.AddModel(models[i].profile, std::move(first[i])).ok());
    }
    int steps = 0;
    while (in.remaining_bytes() > 0 && steps++ < 2000) {
      const int op = in.ConsumeIntegralInRange<int>(0, 99);
      if (op < 35) {
        const std::string model = any_model();
        const Served* m = Find(models, model);
        handles.push_back(std::make_unique<Handle>(m != nullptr ? &m->profile : nullptr));
        QueryRequest r;
        r.model = model;
        const std::string app =
            in.ConsumeBool() ? "app" + std::to_string(in.ConsumeIntegralInRange<int>(0, 5)) : "";
        r.application = app;
        // Deadlines in the past, at once, within a few latencies, or far
        // away (a day).
        const Nanos near = std::max<Nanos>(
            Millis(1), 3 * (m == nullptr || m->profile.is_dynamic
                                ? Millis(50)
                                : m->profile.subnets[0].latency.back()));
        switch (in.ConsumeIntegralInRange<int>(0, 3)) {
          case 0: r.deadline = clock.Now() - in.ConsumeIntegralInRange<Nanos>(0, Seconds(1)); break;
          case 1: r.deadline = clock.Now(); break;
          case 2: r.deadline = clock.Now() + in.ConsumeIntegralInRange<Nanos>(0, near); break;
          default: r.deadline = clock.Now() + Seconds(86400); break;
        }
        core.Submit(handles.back().get(), r);
      } else if (op < 40) {
        if (workers.size() >= 16) continue;
        auto c = std::make_shared<FakeChannel>();
        WorkerRegistration reg;
        reg.name = "w";
        reg.emulated = in.ConsumeBool();
        const int serves = in.ConsumeIntegralInRange<int>(1, 3);
        for (int k = 0; k < serves; ++k) reg.models.push_back(any_model());
        if (placed && in.ConsumeIntegralInRange<int>(0, 3) > 0) {
          reg.memory_bytes = in.ConsumeIntegralInRange<int64_t>(1, 250);
          c->budgeted = true;
        }
        auto id = core.RegisterWorker(reg, c);
        if (id.ok()) {
          c->id = *id;
          workers.push_back(c);
        }
      } else if (op < 70 && !workers.empty()) {
        FakeChannel& c = *workers[in.ConsumeIntegralInRange<size_t>(0, workers.size() - 1)];
        if (c.sent.empty()) continue;
        BatchPlan b = std::move(c.sent.front());
        c.sent.pop_front();
        for (QueryId id : b.queries) on_workers.erase(id);
        const Served* m = Find(models, b.model);
        BatchOutcome out;
        out.batch_id = b.batch_id;
        out.exec = in.ConsumeIntegralInRange<Nanos>(0, Seconds(2));
        out.worker_queue = in.ConsumeIntegralInRange<Nanos>(0, Millis(10));
        for (QueryId id : b.queries) {
          out.outputs.emplace_back(id, nullptr);
          if (m != nullptr && m->profile.is_dynamic) {
            QueryTelemetry t;
            t.id = id;
            t.exec = in.ConsumeIntegralInRange<Nanos>(-Millis(1), Seconds(2));
            t.exit = in.ConsumeIntegralInRange<int32_t>(-2, 8);
            out.query_times.push_back(t);
          }
        }
        switch (in.ConsumeIntegralInRange<int>(0, 7)) {
          case 0: out.outputs.emplace_back(in.ConsumeIntegral<QueryId>(), nullptr); break;
          case 1:
            if (!out.outputs.empty()) out.outputs.pop_back();
            break;
          case 2: out.status = absl::InternalError("boom"); break;
          case 3: out.status = absl::DeadlineExceededError("window closed"); break;
          case 4: out.batch_id = in.ConsumeIntegral<uint64_t>(); break;  // a batch it never had
          default: break;
        }
        if (!out.status.ok()) out.outputs.clear();
        // Time passes while the batch runs.
        FUZZ_CHECK(clock.Advance(std::min<Nanos>(out.exec, Millis(50))).ok());
        g_in_batch_result = true;
        core.OnBatchResult(c.id, std::move(out));
        g_in_batch_result = false;
      } else if (op < 73 && !workers.empty() && placed && in.ConsumeBool()) {
        // A worker reports a load: done, failed, or about a model it was
        // not loading (stale; the core ignores it).
        FakeChannel& c = *workers[in.ConsumeIntegralInRange<size_t>(0, workers.size() - 1)];
        const int kind = in.ConsumeIntegralInRange<int>(0, 3);
        if (kind == 3 || c.loading.empty()) {
          const std::string model = any_model();
          if (c.loading.count(model) == 0) {
            core.OnModelLoaded(c.id, model,
                               in.ConsumeBool() ? absl::OkStatus() : absl::InternalError("no"),
                               AnyFootprint(in));
          }
          continue;
        }
        const std::string model = *c.loading.begin();
        if (kind == 0) {
          c.loading.erase(model);
          core.OnModelLoaded(c.id, model, absl::ResourceExhaustedError("out of memory"),
                             AnyFootprint(in));
        } else {
          FUZZ_CHECK(c.FinishLoad(model));
          core.OnModelLoaded(c.id, model, absl::OkStatus(), AnyFootprint(in));
        }
      } else if (op < 73 && !workers.empty()) {
        const size_t i = in.ConsumeIntegralInRange<size_t>(0, workers.size() - 1);
        for (const BatchPlan& b : workers[i]->sent) {
          for (QueryId id : b.queries) on_workers.erase(id);
        }
        workers[i]->sent.clear();
        core.OnWorkerGone(workers[i]->id, absl::UnavailableError("gone"));
        workers.erase(workers.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (op < 78 && !handles.empty()) {
        core.OnCancelled(handles[in.ConsumeIntegralInRange<size_t>(0, handles.size() - 1)].get());
      } else if (op < 80) {
        const Served& m = models[in.ConsumeIntegralInRange<size_t>(0, models.size() - 1)];
        switch (in.ConsumeIntegralInRange<int>(0, 2)) {
          case 0:
            // The model is replaced (a new version) while queries are queued
            // or on workers.
            removed.insert(m.name);
            if (core.RemoveModel(m.name).ok()) {
              auto again = MakeChecked(m);
              FUZZ_CHECK(again.ok());
              FUZZ_CHECK(core.AddModel(m.profile, *std::move(again)).ok());
            }
            break;
          case 1: (void)core.CloseModel(m.name); break;  // drains; later arrivals refused
          default:
            if (!workers.empty()) {
              (void)core.AttachWorker(
                  workers[in.ConsumeIntegralInRange<size_t>(0, workers.size() - 1)]->id, m.name);
            }
            break;
        }
      } else if (op < 95) {
        FUZZ_CHECK(clock.Advance(in.ConsumeIntegralInRange<Nanos>(0, Millis(20))).ok());
        // Loads finish while time passes (as often as batches are answered):
        // models become resident, so later loads must evict.
        if (placed && in.ConsumeBool()) {
          for (const auto& c : workers) {
            if (c->loading.empty()) continue;
            const std::string model = *c->loading.begin();
            FUZZ_CHECK(c->FinishLoad(model));
            core.OnModelLoaded(c->id, model, absl::OkStatus(), AnyFootprint(in));
            break;
          }
        }
        const Nanos next = core.Tick();
        FUZZ_CHECK(next >= clock.Now());
      } else if (!workers.empty()) {
        core.OnHeartbeat(workers[in.ConsumeIntegralInRange<size_t>(0, workers.size() - 1)]->id);
      }
      // A worker the core closed (dead: silent, or hung past its batch's
      // deadline) is gone; its batches' queries were put back.
      for (size_t i = workers.size(); i-- > 0;) {
        if (!workers[i]->closed) continue;
        for (const BatchPlan& b : workers[i]->sent) {
          for (QueryId id : b.queries) on_workers.erase(id);
        }
        workers.erase(workers.begin() + static_cast<std::ptrdiff_t>(i));
      }
      // What the core sent since the last step.
      for (const auto& c : workers) {
        FUZZ_CHECK(c->sent_not_resident == 0);
        for (const auto& [model, n] : c->unloaded_in_flight_of) {
          FUZZ_CHECK(n == 0 || removed.count(model) > 0);
        }
        for (const BatchPlan& b : c->sent) {
          if (checked.insert(b.batch_id).second) CheckBatch(b, *c, models, &on_workers);
        }
      }
    }
    core.Shutdown();
    const ServingStats s = core.Stats();
    FUZZ_CHECK(s.pending == 0);
    FUZZ_CHECK(s.accepted == s.answered);
  }
  for (const auto& h : handles) FUZZ_CHECK(h->answers == 1);
}

}  // namespace
}  // namespace superserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The core warns about every foreign id and unknown batch: at thousands of
  // inputs a second that is all the output would be. Errors still print.
  static const bool quiet = (superserve::SetLogLevel(superserve::LogLevel::kError), true);
  (void)quiet;
  FuzzedDataProvider in(data, size);
  superserve::Run(in);
  return 0;
}
