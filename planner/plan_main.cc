// superserve-plan --profile FILE --rate R --slo-ms S [--method M] [--json]:
// Harpagon's cost planner; see --help and docs/planning.md.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/init.h"
#include "common/json_writer.h"
#include "planner/application_file.h"
#include "planner/application_planner.h"

ABSL_FLAG(std::string, profile, "",
          "A ModelProfile JSON (one module: one subnet of it) or an application file (a DAG of "
          "modules, docs/planning.md). Required.");
ABSL_FLAG(double, rate, -1, "Application requests per second (required, >= 0).");
ABSL_FLAG(double, slo_ms, -1, "End-to-end latency objective in milliseconds (required, > 0).");
ABSL_FLAG(std::string, method, "harpagon",
          "s1 (round-robin, two tuples), s2 (batch-aware, two tuples), s3 (any tuples), s4 (+ "
          "dummy requests) or harpagon (s4 + latency reassignment; the full method).");
ABSL_FLAG(int32_t, subnet, -1,
          "For a ModelProfile: the subnet id to plan (-1 = the most accurate). An application "
          "file's modules may name their own.");
ABSL_FLAG(bool, json, false, "End with one JSON object on the last line.");

namespace superserve {
namespace {

JsonWriter ConfigJson(const std::string& module, const MachineGroup& g) {
  JsonWriter j;
  j.Add("module", module)
      .Add("rate", g.rate)
      .Add("machines", g.machines)
      .Add("batch", g.config.batch)
      .Add("duration_ms", g.config.duration_s * 1e3)
      .Add("worst_latency_ms", g.worst_latency_s * 1e3);
  return j;
}

int Run() {
  const std::string path = absl::GetFlag(FLAGS_profile);
  const double rate = absl::GetFlag(FLAGS_rate);
  const double slo_ms = absl::GetFlag(FLAGS_slo_ms);
  if (path.empty()) {
    std::fprintf(stderr, "superserve-plan: --profile FILE is required (see --help)\n");
    return 2;
  }
  if (!std::isfinite(rate) || rate < 0) {
    std::fprintf(stderr, "superserve-plan: --rate must be a finite number >= 0 (see --help)\n");
    return 2;
  }
  if (!std::isfinite(slo_ms) || slo_ms <= 0) {
    std::fprintf(stderr, "superserve-plan: --slo-ms must be a finite number > 0 (see --help)\n");
    return 2;
  }
  auto method = ParsePlanMethod(absl::GetFlag(FLAGS_method));
  if (!method.ok()) {
    std::fprintf(stderr, "superserve-plan: --method: %s\n",
                 std::string(method.status().message()).c_str());
    return 2;
  }
  auto app = LoadApplicationFile(path, absl::GetFlag(FLAGS_subnet));
  if (!app.ok()) {
    std::fprintf(stderr, "superserve-plan: %s\n", std::string(app.status().message()).c_str());
    return 1;
  }
  for (const std::string& w : app->warnings) {
    std::fprintf(stderr, "superserve-plan: warning: %s\n", w.c_str());
  }
  auto plan = PlanApplication(*app, rate, slo_ms / 1e3, *method);
  if (!plan.ok()) {
    std::fprintf(stderr, "superserve-plan: %s\n", std::string(plan.status().message()).c_str());
    return 1;
  }

  std::printf(
      "%s: method %s, %g req/s, objective %g ms, cost %.4g machines (%d workers), "
      "worst-case latency %.1f ms\n",
      app->name.c_str(), PlanMethodName(*method), rate, slo_ms, plan->cost, plan->workers,
      plan->latency_s * 1e3);
  std::printf("%-14s %10s %10s %10s %10s %8s %7s %10s\n", "module", "rate", "budget_ms", "T_i",
              "n_i", "b_i", "d_ms", "worst_ms");
  std::vector<JsonWriter> configs, modules;
  for (const PlannedModule& m : plan->modules) {
    std::vector<JsonWriter> module_configs;
    bool first = true;
    for (const MachineGroup& g : m.plan.Tuples()) {
      std::printf("%-14s %10s %10s %10.4g %10.4g %8d %7.1f %10.1f\n", first ? m.name.c_str() : "",
                  first ? absl::StrFormat("%.4g", m.rate).c_str() : "",
                  first ? absl::StrFormat("%.1f", m.plan.budget_s * 1e3).c_str() : "", g.rate,
                  g.machines, g.config.batch, g.config.duration_s * 1e3, g.worst_latency_s * 1e3);
      first = false;
      configs.push_back(ConfigJson(m.name, g));
      module_configs.push_back(ConfigJson(m.name, g));
    }
    if (m.plan.dummy_rate > 0) {
      std::printf("%-14s   (%.4g req/s of it dummy requests)\n", "", m.plan.dummy_rate);
    }
    JsonWriter mj;
    mj.Add("name", m.name)
        .Add("rate", m.rate)
        .Add("budget_ms", m.plan.budget_s * 1e3)
        .Add("worst_latency_ms", m.plan.worst_latency_s * 1e3)
        .Add("cost", m.plan.cost)
        .Add("workers", m.plan.workers())
        .Add("dummy_rate", m.plan.dummy_rate)
        .AddArray("configs", module_configs);
    modules.push_back(mj);
  }
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter j;
    j.Add("application", app->name)
        .Add("method", PlanMethodName(*method))
        .Add("rate", rate)
        .Add("slo_ms", slo_ms)
        .Add("cost", plan->cost)
        .Add("workers", plan->workers)
        .Add("latency_ms", plan->latency_s * 1e3)
        .Add("split_iterations", plan->split_iterations)
        .Add("reassignments", plan->reassignments)
        .AddArray("configs", configs)
        .AddArray("modules", modules);
    std::printf("%s\n", j.ToString().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace superserve

int main(int argc, char** argv) {
  auto args = superserve::InitMain(
      argc, argv,
      "superserve-plan --profile FILE --rate R --slo-ms S [--method s1|s2|s3|s4|harpagon] "
      "[--json]\n\nHarpagon's cost planner: the configurations T_i (n_i x b_i) (request rate, "
      "machines, batch size) per module that serve R req/s within S ms worst case at the least "
      "cost (machines, frame-rate proportional), with batch-aware dispatch, multi-tuple "
      "configurations, dummy requests and latency splitting. FILE is a ModelProfile (one subnet "
      "is one module) or an application DAG file (docs/planning.md). With --json the last line "
      "is one JSON object: cost, workers, configs [{module, rate, machines, batch, ...}], "
      "modules.");
  if (args.size() > 1) {
    std::fprintf(stderr, "superserve-plan: unexpected argument \"%s\" (see --help)\n",
                 args[1].c_str());
    return 2;
  }
  return superserve::Run();
}
