#include "router/client/load_generator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "common/progress.h"
#include "common/tensor_codec.h"

namespace superserve {

absl::StatusOr<LabelledRequests> MakeImageRequests(const LabeledImages& images,
                                                   const std::string& model,
                                                   const std::vector<int64_t>& shape, float mean,
                                                   float std_dev, int64_t limit) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (elements != images.images.item_size()) {
    return absl::InvalidArgumentError(absl::StrCat("input shape ", ShapeString(shape), " holds ",
                                                   elements, " values; images have ",
                                                   images.images.item_size()));
  }
  if (std_dev <= 0) return absl::InvalidArgumentError("input std must be > 0");
  const int64_t count = images.images.num_items();
  int64_t n = limit > 0 ? std::min(limit, count) : count;
  LabelledRequests out;
  std::vector<float> values(elements);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* px = images.images.data.data() + i * elements;
    for (int64_t j = 0; j < elements; ++j) values[j] = (px[j] / 255.f - mean) / std_dev;
    auto req = std::make_shared<v1::InferRequest>();
    req->set_model(model);
    EncodeTensor(MakeFloatTensor(shape, values), req->mutable_input());
    out.requests.push_back(std::move(req));
    out.labels.push_back(images.labels.data[i]);
  }
  return out;
}

absl::StatusOr<LabelledRequests> MakeApplicationRequests(const LabeledImages& images,
                                                         const std::string& model,
                                                         const std::vector<int64_t>& shape,
                                                         const ImageApplication& app,
                                                         int64_t limit) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (elements != images.images.item_size()) {
    return absl::InvalidArgumentError(absl::StrCat("input shape ", ShapeString(shape), " holds ",
                                                   elements, " values; images have ",
                                                   images.images.item_size()));
  }
  std::vector<int64_t> picked = ApplicationImages(app, images.labels.data);
  if (limit > 0 && static_cast<int64_t>(picked.size()) > limit) picked.resize(limit);
  if (picked.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("application ", app.name, " has no images"));
  }
  LabelledRequests out;
  std::vector<float> values(elements);
  for (int64_t i : picked) {
    ApplicationInput(app, i,
                     absl::MakeConstSpan(images.images.data.data() + i * elements, elements),
                     values.data());
    auto req = std::make_shared<v1::InferRequest>();
    req->set_model(model);
    req->set_application(app.name);
    EncodeTensor(MakeFloatTensor(shape, values), req->mutable_input());
    out.requests.push_back(std::move(req));
    out.labels.push_back(images.labels.data[i]);
  }
  return out;
}

int32_t ArgMax(const v1::Tensor& t) {
  if (t.dtype() != v1::DTYPE_FLOAT32 || t.data().size() < 4) return -1;
  const float* v = reinterpret_cast<const float*>(t.data().data());
  size_t n = t.data().size() / 4;
  return static_cast<int32_t>(std::max_element(v, v + n) - v);
}

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

absl::StatusOr<std::vector<QueryRecord>> ReplayTrace(InferenceClient& client,
                                                     const std::vector<TraceArrival>& trace,
                                                     const LabelledRequests& inputs,
                                                     const ReplayOptions& options) {
  return ReplayTrace(
      client, trace, [&inputs](const TraceArrival&) { return &inputs; }, options);
}

absl::StatusOr<std::vector<QueryRecord>> ReplayTrace(InferenceClient& client,
                                                     const std::vector<TraceArrival>& trace,
                                                     const InputsForRow& inputs_for,
                                                     const ReplayOptions& options) {
  InferenceClient* one[] = {&client};
  return ReplayTrace(absl::MakeConstSpan(one), trace, inputs_for, options);
}

absl::StatusOr<std::vector<QueryRecord>> ReplayTrace(absl::Span<InferenceClient* const> clients,
                                                     const std::vector<TraceArrival>& trace,
                                                     const InputsForRow& inputs_for,
                                                     const ReplayOptions& options) {
  if (clients.empty()) return absl::InvalidArgumentError("replay: no client");
  // A NaN or infinite scale made every send time garbage (the replay waited
  // for ever), and an SLO past a day is one the router clamps (past int64 it
  // wrapped negative: every OK answer counted late).
  if (!std::isfinite(options.time_scale) || options.time_scale < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("replay: time_scale must be a finite number >= 0, got ", options.time_scale));
  }
  if (options.default_slo <= 0 || options.default_slo > kMaxQueryTimeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("replay: default SLO must be in (0, ", kMaxQueryTimeout / kNanosPerMicro,
                     "] us (a day: the router's bound on a deadline), got ",
                     options.default_slo / kNanosPerMicro, " us"));
  }
  size_t n = trace.size();
  if (options.max_queries > 0) n = std::min(n, static_cast<size_t>(options.max_queries));
  std::vector<const LabelledRequests*> row_inputs(n);
  Nanos max_slo = options.default_slo;
  for (size_t i = 0; i < n; ++i) {
    row_inputs[i] = inputs_for(trace[i]);
    if (row_inputs[i] == nullptr || row_inputs[i]->requests.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("replay: no inputs for row ", i, " (model \"",
                                                     trace[i].model, "\", application \"",
                                                     trace[i].application, "\")"));
    }
    if (trace[i].slo < 0 || trace[i].slo > kMaxQueryTimeout) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replay: row ", i, "'s SLO must be in (0, ", kMaxQueryTimeout / kNanosPerMicro,
          "] us (0: the default), got ", trace[i].slo / kNanosPerMicro, " us"));
    }
    // Scaled, a send time must stay within int64 nanoseconds (the trace
    // reader's bound): in double, so that the check itself cannot wrap.
    const double scaled_us = ToMicros(trace[i].arrival) * options.time_scale;
    if (trace[i].arrival < 0 || scaled_us > kMaxTraceArrivalUs) {
      return absl::InvalidArgumentError(
          absl::StrCat("replay: row ", i, ": arrival ", ToMicros(trace[i].arrival),
                       " us * time_scale ", options.time_scale, " = ", scaled_us,
                       " us, outside [0, ", kMaxTraceArrivalUs, "] us (int64 nanoseconds)"));
    }
    max_slo = std::max(max_slo, trace[i].slo > 0 ? trace[i].slo : options.default_slo);
  }
  // Shared with the callbacks, so that a call still out when the replay gives
  // up writes into live memory, and is then ignored.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<QueryRecord> records;
    size_t done = 0;
    bool abandoned = false;
  };
  auto state = std::make_shared<State>();
  state->records.resize(n);
  const Clock* clock = RealClock::Get();
  std::unique_ptr<ProgressBar> bar;
  if (options.progress) bar = std::make_unique<ProgressBar>("replay", static_cast<int64_t>(n));
  auto answered = [&state] {
    std::lock_guard<std::mutex> lock(state->mu);
    return state->done;
  };
  const Nanos start = clock->Now();
  // Sender s sends rows s, s + S, s + 2S, ... through clients[s], each at its
  // own arrival time: one sending thread (one connection) caps a replay at
  // what it can issue, which a fast GPU worker outruns (docs/gpu.md).
  const size_t senders = clients.size();
  auto send_rows = [&](size_t s) {
    InferenceClient& client = *clients[s];
    for (size_t i = s; i < n; i += senders) {
      const TraceArrival& a = trace[i];
      const Nanos target = SaturatingAdd(start, static_cast<Nanos>(a.arrival * options.time_scale));
      Nanos now = clock->Now();
      // Sleep only when the next send is far enough ahead (the kernel's timer
      // slack, ~50 us, makes the wake-up land near the target); sends due
      // within kEarly go out at once, in one burst. No spinning: on a small
      // machine a yield loop here keeps a runnable thread beside the router
      // and workers it is measuring.
      constexpr Nanos kEarly = Micros(100);
      if (target - now > kEarly) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(target - now - Micros(50)));
      }
      const LabelledRequests& inputs = *row_inputs[i];
      const size_t input = i % inputs.requests.size();
      const Nanos slo = a.slo > 0 ? a.slo : options.default_slo;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        QueryRecord& r = state->records[i];
        r.slo = slo;
        r.sent = clock->Now() - start;
        r.label = inputs.labels[input];
        r.input = static_cast<int64_t>(input);
        r.model = a.model;
        r.application = a.application;
      }
      std::shared_ptr<const v1::InferRequest> req = inputs.requests[input];
      if (!a.application.empty() && req->application() != a.application) {
        auto copy = std::make_shared<v1::InferRequest>(*req);
        copy->set_application(a.application);
        req = std::move(copy);
      }
      client.InferAsync(std::move(req), slo, [state, i, n](InferenceClient::Result res) {
        std::lock_guard<std::mutex> lock(state->mu);
        if (state->abandoned) return;
        QueryRecord& r = state->records[i];
        r.answered = true;
        r.latency = res.latency;
        r.code = res.status.code();
        if (res.status.ok()) {
          const auto& resp = res.response;
          r.subnet_id = resp.served_by().subnet_id();
          r.accuracy = resp.served_by().accuracy();
          r.exit = resp.served_by().exit();
          r.exit_threshold = resp.served_by().exit_threshold();
          r.worker = resp.served_by().worker();
          r.batch_size = resp.batch_size();
          r.queue_us = resp.queue_us();
          r.exec_us = resp.exec_us();
          r.predicted = ArgMax(resp.output());
          r.in_slo = r.latency <= r.slo;
        }
        if (++state->done == n) state->cv.notify_all();
      });
      if (s == 0 && bar && (i % (64 * senders) == 0)) {
        bar->Set(static_cast<int64_t>(i), absl::StrCat(answered(), " answered"));
      }
    }
  };
  {
    std::vector<std::thread> others;
    for (size_t s = 1; s < senders; ++s) others.emplace_back(send_rows, s);
    send_rows(0);
    for (std::thread& t : others) t.join();
  }
  // gRPC ends every call by its deadline, but past a client's capacity the
  // answers (most of them DEADLINE_EXCEEDED) can trail the last send by more
  // than the SLO: wait while they keep coming, and give up only after
  // drain_timeout without a single one (a wedged channel).
  std::vector<QueryRecord> records;
  size_t missing = 0;
  {
    std::unique_lock<std::mutex> lock(state->mu);
    state->cv.wait_for(lock, std::chrono::nanoseconds(max_slo), [&] { return state->done == n; });
    size_t seen = state->done;
    while (state->done != n) {
      state->cv.wait_for(lock, std::chrono::nanoseconds(options.drain_timeout),
                         [&] { return state->done == n; });
      if (state->done == seen) break;  // no answer within drain_timeout
      seen = state->done;
    }
    state->abandoned = true;
    missing = n - state->done;
    records = std::move(state->records);
  }
  if (bar) bar->Finish(absl::StrCat(n - missing, " answered"));
  if (missing > 0) {
    // Kept as records that were never answered (status UNANSWERED, not in
    // the SLO): the summary counts them as misses instead of losing them.
    std::fprintf(stderr,
                 "replay: %zu of %zu queries unanswered %.1f s after the last answer; counted "
                 "as misses\n",
                 missing, n, ToSeconds(options.drain_timeout));
  }
  return records;
}

ReplaySummary Summarize(const std::vector<QueryRecord>& records) {
  ReplaySummary s;
  s.queries = static_cast<int64_t>(records.size());
  std::vector<double> latencies;
  double acc_sum = 0;
  int64_t correct = 0;
  Nanos first = 0, last = 0;
  for (const auto& r : records) {
    if (r.code == absl::StatusCode::kOk) latencies.push_back(ToMillis(r.latency));
    if (!r.in_slo) continue;
    ++s.ok;
    acc_sum += r.accuracy;
    if (r.predicted >= 0 && r.predicted == r.label) ++correct;
  }
  if (!records.empty()) {
    first = records.front().sent;
    for (const auto& r : records) last = std::max(last, r.sent + r.latency);
  }
  if (s.queries > 0) s.slo_attainment = static_cast<double>(s.ok) / s.queries;
  if (s.ok > 0) {
    s.mean_accuracy = acc_sum / s.ok;
    s.measured_accuracy = 100.0 * static_cast<double>(correct) / s.ok;
  }
  s.p50_ms = Percentile(latencies, 0.50);
  s.p99_ms = Percentile(latencies, 0.99);
  if (last > first) s.throughput_qps = s.ok / ToSeconds(last - first);
  return s;
}

std::vector<std::string> SummarizeGroupsJson(const std::vector<QueryRecord>& records) {
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::vector<QueryRecord>> groups;
  for (const auto& r : records) {
    auto key = std::make_pair(r.model, r.application);
    auto [it, added] = groups.try_emplace(key);
    if (added) order.push_back(key);
    it->second.push_back(r);
  }
  std::vector<std::string> out;
  for (const auto& key : order) {
    ReplaySummary s = Summarize(groups[key]);
    out.push_back(JsonWriter()
                      .Add("model", key.first)
                      .Add("application", key.second)
                      .Add("queries", s.queries)
                      .Add("ok", s.ok)
                      .Add("slo_attainment", s.slo_attainment)
                      .Add("measured_accuracy", s.measured_accuracy)
                      .Add("p50_ms", s.p50_ms)
                      .Add("p99_ms", s.p99_ms)
                      .ToString());
  }
  return out;
}

std::string ReplaySummary::ToJson() const {
  return JsonWriter()
      .Add("queries", queries)
      .Add("ok", ok)
      .Add("slo_attainment", slo_attainment)
      .Add("mean_accuracy", mean_accuracy)
      .Add("measured_accuracy", measured_accuracy)
      .Add("p50_ms", p50_ms)
      .Add("p99_ms", p99_ms)
      .Add("throughput_qps", throughput_qps)
      .ToString();
}

absl::Status WriteRecordsCsv(const std::string& path, const std::vector<QueryRecord>& records) {
  std::ofstream out(path);
  if (!out) return absl::UnavailableError(absl::StrCat(path, ": cannot write"));
  out << "sent_us,slo_us,latency_us,status,in_slo,subnet,accuracy,batch_size,queue_us,exec_us,"
         "label,predicted,correct,worker,model,application,exit,exit_threshold\n";
  for (const auto& r : records) {
    out << r.sent / kNanosPerMicro << ',' << r.slo / kNanosPerMicro << ','
        << r.latency / kNanosPerMicro << ','
        << (r.answered ? absl::StatusCodeToString(r.code) : std::string("UNANSWERED")) << ','
        << (r.in_slo ? 1 : 0) << ',' << r.subnet_id << ',' << r.accuracy << ',' << r.batch_size
        << ',' << r.queue_us << ',' << r.exec_us << ',' << r.label << ',' << r.predicted << ','
        << (r.predicted >= 0 && r.predicted == r.label ? 1 : 0) << ',' << r.worker << ','
        << r.model << ',' << r.application << ',' << r.exit << ',' << r.exit_threshold << '\n';
  }
  return out ? absl::OkStatus() : absl::DataLossError(absl::StrCat(path, ": write failed"));
}

}  // namespace superserve
