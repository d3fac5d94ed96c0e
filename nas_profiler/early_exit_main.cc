// superserve-early-exit: trains the Fashion-MNIST early-exit model (a dynamic
// DNN), reports its per-exit accuracy, and measures each application's
// execution-time distribution into a ModelProfile with a `dynamic` block.
// `build` does all three and writes a model folder (models/dynamic/fmnist-exit).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/init.h"
#include "common/json_writer.h"
#include "common/logging.h"
#include "common/output_path.h"
#include "models/early_exit.h"
#include "nas_profiler/early_exit_trainer.h"
#include "nas_profiler/supernet_trainer.h"

ABSL_FLAG(std::string, data_dir, superserve::kFashionMnistDir,
          "Folder with the Fashion-MNIST *-ubyte.gz files.");
ABSL_FLAG(std::string, output_dir, "models/dynamic/fmnist-exit",
          "build: model folder to write (checkpoint.pt, profile.json, report.json).");
ABSL_FLAG(std::string, checkpoint, "", "eval/profile: checkpoint to read.");
ABSL_FLAG(std::string, output, "", "profile: profile JSON to write.");
ABSL_FLAG(std::string, model_name, "fmnist-exit", "The profile's model name.");
ABSL_FLAG(int, epochs, 3, "Training epochs.");
ABSL_FLAG(double, learning_rate, 2e-3, "Adam learning rate (cosine decay to 0).");
ABSL_FLAG(double, threshold, 0.9, "Softmax confidence needed to leave at an early exit.");
ABSL_FLAG(std::string, exit_thresholds, "0.6,0.7,0.8,0.9,0.95",
          "build/profile: exit thresholds to measure for load-adaptive exits (comma-separated; "
          "the model's own, --threshold for build, is the profile's default and is always "
          "measured); empty: the model's own only.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the initialisation, the order, the noise and the sampling.");
ABSL_FLAG(int, threads, 2, "Intra-op threads for training (profiling always uses 1, as workers).");
ABSL_FLAG(int, samples, 500, "profile: batch-1 timings per application.");
ABSL_FLAG(int, batches, 30, "profile: timed batches per batch size for the batch-time fit.");
ABSL_FLAG(int64_t, max_steps, -1, "Stop training after this many steps (-1: all epochs).");
ABSL_FLAG(std::string, device, "cpu",
          "eval/profile: where the network runs (cpu, cuda, cuda:N; cuda needs a CUDA LibTorch "
          "build, docs/gpu.md). Training stays on the CPU.");
ABSL_FLAG(bool, json, false, "Print one JSON object as the last line.");

namespace superserve::nas {
namespace {

constexpr char kUsage[] =
    "superserve-early-exit SUBCOMMAND [flags]\n"
    "  build    train, evaluate and profile; writes --output_dir (checkpoint.pt, profile.json,\n"
    "           report.json)  ~10-20 min on 2 cores\n"
    "  eval     per-exit accuracy and exit fractions of --checkpoint (clean test set and each\n"
    "           application)\n"
    "  profile  measure each application's execution-time distribution and fit the batch model\n"
    "           c0 + c1*k*max(l), evaluate the accuracy each exit's answers carry; writes\n"
    "           --output\n"
    "Applications (common/image_applications.h): easy (trouser, sandal, sneaker, bag, ankle\n"
    "boot), hard (t-shirt, pullover, coat, shirt), noisy (every class, Gaussian noise 0.4).";

void Log(const std::string& line) { SS_LOG(INFO) << line; }

JsonWriter EvalJson(const EarlyExitEval& e) {
  JsonWriter j;
  j.Add("application", e.application).Add("samples", e.samples);
  j.AddArray("exit_accuracy", e.exit_accuracy);
  j.AddArray("exit_fraction", e.exit_fraction);
  j.AddArray("accuracy_of_leavers", e.accuracy_of_leavers);
  j.Add("overall_accuracy", e.overall_accuracy).Add("last_exit_accuracy", e.last_exit_accuracy);
  return j;
}

void PrintEval(const std::vector<EarlyExitEval>& evals) {
  std::printf("%-8s %7s  %-26s %-22s %8s %9s\n", "app", "samples", "accuracy if all leave at",
              "share leaving at", "overall", "last only");
  for (const auto& e : evals) {
    std::string acc, share;
    for (size_t i = 0; i < e.exit_accuracy.size(); ++i) {
      absl::StrAppend(&acc, absl::StrFormat("%6.2f ", e.exit_accuracy[i]));
      absl::StrAppend(&share, absl::StrFormat("%5.3f ", e.exit_fraction[i]));
    }
    std::printf("%-8s %7lld  %-26s %-22s %8.2f %9.2f\n", e.application.c_str(),
                static_cast<long long>(e.samples), acc.c_str(), share.c_str(), e.overall_accuracy,
                e.last_exit_accuracy);
  }
}

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// The accuracy an answer from exit i carries: that of the evaluation's samples
// that left there, or where none did, of all of them forced out there.
std::vector<double> AnswerAccuracyPerExit(const EarlyExitEval& e) {
  std::vector<double> acc = e.accuracy_of_leavers;
  for (size_t i = 0; i < acc.size() && i < e.exit_fraction.size(); ++i) {
    if (e.exit_fraction[i] <= 0 && i < e.exit_accuracy.size()) acc[i] = e.exit_accuracy[i];
  }
  return acc;
}

// The thresholds to measure, increasing, rounded to 1e-6 (the model's own is
// a float), with the model's own among them.
absl::StatusOr<std::vector<double>> ThresholdsToMeasure(double own) {
  const auto round = [](double t) { return std::round(t * 1e6) / 1e6; };
  std::vector<double> out = {round(own)};
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_exit_thresholds), ',',
                                            absl::SkipWhitespace())) {
    double t = 0;
    if (!absl::SimpleAtod(s, &t) || !(t > 0 && t <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--exit_thresholds: \"", s, "\" must be a number in (0, 1]"));
    }
    out.push_back(round(t));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<ModelProfile> MeasureProfileAt(models::EarlyExitNet& net, const LabeledImages& test,
                                              const std::vector<EarlyExitEval>& evals,
                                              JsonWriter* report);

// The profile at the model's own threshold (MeasureProfileAt), and with more
// than one threshold to measure, per threshold the accuracy and each
// application's histogram (dynamic.thresholds); the batch model is the own
// threshold's fit.
absl::StatusOr<ModelProfile> MeasureProfile(models::EarlyExitNet& net, const LabeledImages& test,
                                            const std::vector<EarlyExitEval>& evals,
                                            JsonWriter* report) {
  const double own = net.config().exit_threshold;
  auto thresholds = ThresholdsToMeasure(own);
  if (!thresholds.ok()) return thresholds.status();
  auto p = MeasureProfileAt(net, test, evals, report);
  if (!p.ok() || thresholds->size() < 2) return p;
  const double own_rounded = std::round(own * 1e6) / 1e6;
  p->dynamic.default_threshold = own_rounded;
  std::vector<JsonWriter> items;
  for (double t : *thresholds) {
    ExitThresholdProfile tp;
    tp.threshold = t;
    if (t == own_rounded) {
      tp.applications = p->dynamic.applications;
      for (const EarlyExitEval& e : evals) {
        if (e.application == "all") tp.accuracy = e.overall_accuracy;
      }
    } else {
      net.set_exit_threshold(static_cast<float>(t));
      auto ev = EvaluateEarlyExit(net, test, kPixelMean, kPixelStd, FashionMnistApplications());
      if (!ev.ok()) return ev.status();
      auto at = MeasureProfileAt(net, test, *ev, nullptr);
      if (!at.ok()) return at.status();
      tp.applications = at->dynamic.applications;
      for (const EarlyExitEval& e : *ev) {
        if (e.application == "all") tp.accuracy = e.overall_accuracy;
      }
    }
    std::printf("threshold %.2f: accuracy %.2f %%\n", t, tp.accuracy);
    JsonWriter j;
    j.Add("threshold", t).Add("accuracy", tp.accuracy);
    items.push_back(std::move(j));
    p->dynamic.thresholds.push_back(std::move(tp));
  }
  net.set_exit_threshold(static_cast<float>(own));
  if (report != nullptr) report->AddArray("thresholds", items);
  return p;
}

absl::StatusOr<ModelProfile> MeasureProfileAt(models::EarlyExitNet& net, const LabeledImages& test,
                                              const std::vector<EarlyExitEval>& evals,
                                              JsonWriter* report) {
  SetTorchThreads(1);
  DynamicProfileOptions o;
  o.samples_per_application = absl::GetFlag(FLAGS_samples);
  o.batches_per_size = absl::GetFlag(FLAGS_batches);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.log = Log;
  auto rep = ProfileEarlyExit(net, test, kPixelMean, kPixelStd, FashionMnistApplications(), o);
  if (!rep.ok()) return rep.status();
  ModelProfile p;
  p.model = absl::GetFlag(FLAGS_model_name);
  p.family = "early_exit";
  p.batch_sizes = o.batch_sizes;
  p.input_shape = {1, 28, 28};
  p.num_classes = 10;
  p.measured_on = absl::StrCat(Hostname(), ", 1 intra-op thread, cpu, ",
                               std::thread::hardware_concurrency(), " hardware threads");
  p.input_mean = kPixelMean;
  p.input_std = kPixelStd;
  p.is_dynamic = true;
  p.dynamic = rep->profile;
  // Answers carry the accuracy of their exit: per application where the
  // evaluation has one, the clean test set's ("all") for the model.
  for (const EarlyExitEval& e : evals) {
    if (e.application == "all") p.dynamic.exit_accuracy = AnswerAccuracyPerExit(e);
    for (ApplicationHistogram& a : p.dynamic.applications) {
      if (a.application == e.application) {
        a.exit_accuracy = AnswerAccuracyPerExit(e);
        a.accuracy = e.overall_accuracy;
      }
    }
  }
  std::printf("batch model: %.1f us + %.4f * k * max(l); held-back error mean %.1f %%, max %.1f %% "
              "(%lld fitted, %lld held back)\n",
              rep->profile.batch_overhead_us, rep->profile.per_request_factor,
              rep->holdout_mean_abs_error_percent, rep->holdout_max_abs_error_percent,
              static_cast<long long>(rep->fit_batches), static_cast<long long>(rep->holdout_batches));
  std::vector<JsonWriter> apps;
  for (size_t a = 0; a < rep->latencies_us.size(); ++a) {
    std::vector<double> lat = rep->latencies_us[a];
    std::sort(lat.begin(), lat.end());
    std::vector<double> share(static_cast<size_t>(net.num_exits()), 0.0);
    for (int32_t e : rep->exits[a]) share[static_cast<size_t>(e)] += 1.0 / rep->exits[a].size();
    auto pct = [&](double q) { return lat[static_cast<size_t>(q * (lat.size() - 1))]; };
    std::printf("%-8s p10 %7.1f  p50 %7.1f  p90 %7.1f  p99 %7.1f us\n",
                FashionMnistApplications()[a].name.c_str(), pct(0.1), pct(0.5), pct(0.9), pct(0.99));
    JsonWriter j;
    j.Add("application", FashionMnistApplications()[a].name)
        .Add("p50_us", pct(0.5))
        .Add("p99_us", pct(0.99));
    j.AddArray("exit_share", share);
    apps.push_back(std::move(j));
  }
  if (report != nullptr) {
    JsonWriter fit;
    fit.Add("batch_overhead_us", rep->profile.batch_overhead_us)
        .Add("per_request_factor", rep->profile.per_request_factor)
        .Add("holdout_mean_abs_error_percent", rep->holdout_mean_abs_error_percent)
        .Add("holdout_max_abs_error_percent", rep->holdout_max_abs_error_percent)
        .Add("fit_batches", rep->fit_batches)
        .Add("holdout_batches", rep->holdout_batches);
    report->Add("batch_fit", fit);
    report->AddArray("timings", apps);
  }
  return p;
}

// The flags' ranges, and the output a run writes at its end, checked before
// the data set is read: a bad value used to surface after minutes of
// training or profiling, or not at all (--samples=0 divided by zero, an
// --output_dir that could not be created aborted on an uncaught filesystem
// error, --threads=100000 started that many threads).
absl::Status CheckFlags(const std::string& cmd) {
  const auto range = [](absl::string_view flag, int64_t v, int64_t lo, int64_t hi) {
    return v >= lo && v <= hi ? absl::OkStatus()
                              : absl::InvalidArgumentError(absl::StrCat(
                                    "--", flag, "=", v, " must be in [", lo, ", ", hi, "]"));
  };
  for (const absl::Status& st : {
           range("threads", absl::GetFlag(FLAGS_threads), 1, 1024),
           range("samples", absl::GetFlag(FLAGS_samples), 1, 1000000),
           range("batches", absl::GetFlag(FLAGS_batches), 1, 100000),
           range("epochs", absl::GetFlag(FLAGS_epochs), 0, 100000),
           range("max_steps", absl::GetFlag(FLAGS_max_steps), -1, int64_t{1} << 40),
       }) {
    if (!st.ok()) return st;
  }
  if (const double lr = absl::GetFlag(FLAGS_learning_rate); !(lr > 0) || !std::isfinite(lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate=", lr, " must be a finite number > 0"));
  }
  if (const double t = absl::GetFlag(FLAGS_threshold); !(t > 0 && t <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--threshold=", t, " must be in (0, 1]"));
  }
  if (cmd == "build" || cmd == "profile") {
    if (auto t = ThresholdsToMeasure(absl::GetFlag(FLAGS_threshold)); !t.ok()) return t.status();
  }
  if (cmd == "build") return MakeOutputDirectory("--output_dir", absl::GetFlag(FLAGS_output_dir));
  if (cmd == "profile") {
    if (absl::GetFlag(FLAGS_output).empty()) {
      return absl::InvalidArgumentError("profile needs --output");
    }
    if (auto st = CheckOutputFile("--output", absl::GetFlag(FLAGS_output)); !st.ok()) return st;
  }
  if (cmd != "build" && absl::GetFlag(FLAGS_checkpoint).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(cmd, " needs --checkpoint"));
  }
  return absl::OkStatus();
}

int Run(const std::string& cmd) {
  if (cmd != "build" && cmd != "eval" && cmd != "profile") {
    std::fprintf(stderr, "superserve-early-exit: unknown subcommand '%s'\n%s\n", cmd.c_str(), kUsage);
    return 2;
  }
  if (auto st = CheckFlags(cmd); !st.ok()) {
    std::fprintf(stderr, "superserve-early-exit: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  const std::string data = absl::GetFlag(FLAGS_data_dir);
  auto test = LoadFashionMnist("t10k", data);
  if (!test.ok()) {
    std::fprintf(stderr, "superserve-early-exit: %s\n", test.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<models::EarlyExitNet> net;
  JsonWriter report;
  if (cmd == "build") {
    auto train = LoadFashionMnist("train", data);
    if (!train.ok()) {
      std::fprintf(stderr, "superserve-early-exit: %s\n", train.status().ToString().c_str());
      return 1;
    }
    models::EarlyExitConfig config;
    config.exit_threshold = static_cast<float>(absl::GetFlag(FLAGS_threshold));
    auto created = models::EarlyExitNet::Create(config, absl::GetFlag(FLAGS_seed));
    if (!created.ok()) {
      std::fprintf(stderr, "superserve-early-exit: %s\n", created.status().ToString().c_str());
      return 2;
    }
    net = *std::move(created);
    SetTorchThreads(absl::GetFlag(FLAGS_threads));
    EarlyExitTrainOptions o;
    o.epochs = absl::GetFlag(FLAGS_epochs);
    o.learning_rate = absl::GetFlag(FLAGS_learning_rate);
    o.seed = absl::GetFlag(FLAGS_seed);
    o.max_steps = absl::GetFlag(FLAGS_max_steps);
    o.log = Log;
    if (auto st = TrainEarlyExit(*net, *train, kPixelMean, kPixelStd, o); !st.ok()) {
      std::fprintf(stderr, "superserve-early-exit: %s\n", st.ToString().c_str());
      return 1;
    }
  } else {
    auto loaded = models::EarlyExitNet::Load(absl::GetFlag(FLAGS_checkpoint));
    if (!loaded.ok()) {
      std::fprintf(stderr, "superserve-early-exit: %s\n", loaded.status().ToString().c_str());
      return 2;
    }
    net = *std::move(loaded);
    if (auto st = net->MoveTo(absl::GetFlag(FLAGS_device)); !st.ok()) {
      std::fprintf(stderr, "superserve-early-exit: --device: %s\n", st.ToString().c_str());
      return 2;
    }
  }
  // Every subcommand evaluates: the profile carries each exit's accuracy.
  auto evals = EvaluateEarlyExit(*net, *test, kPixelMean, kPixelStd, FashionMnistApplications());
  if (!evals.ok()) {
    std::fprintf(stderr, "superserve-early-exit: %s\n", evals.status().ToString().c_str());
    return 1;
  }
  PrintEval(*evals);
  std::vector<JsonWriter> items;
  for (const auto& e : *evals) items.push_back(EvalJson(e));
  report.Add("threshold", static_cast<double>(net->config().exit_threshold));
  report.AddArray("accuracy", items);
  if (cmd == "build" || cmd == "profile") {
    auto profile = MeasureProfile(*net, *test, *evals, &report);
    if (!profile.ok()) {
      std::fprintf(stderr, "superserve-early-exit: %s\n", profile.status().ToString().c_str());
      return 1;
    }
    std::string out = absl::GetFlag(FLAGS_output);
    if (cmd == "build") {
      const std::string dir = absl::GetFlag(FLAGS_output_dir);
      if (auto st = MakeOutputDirectory("--output_dir", dir); !st.ok()) {
        std::fprintf(stderr, "superserve-early-exit: %s\n", std::string(st.message()).c_str());
        return 1;
      }
      if (auto st = net->Save(dir + "/checkpoint.pt"); !st.ok()) {
        std::fprintf(stderr, "superserve-early-exit: %s\n", st.ToString().c_str());
        return 1;
      }
      out = dir + "/profile.json";
    }
    if (out.empty()) {
      std::fprintf(stderr, "superserve-early-exit: profile needs --output\n");
      return 2;
    }
    if (auto st = profile->SaveFile(out); !st.ok()) {
      std::fprintf(stderr, "superserve-early-exit: %s\n", st.ToString().c_str());
      return 1;
    }
    std::printf("wrote %s\n", out.c_str());
    if (cmd == "build") {
      std::ofstream(absl::GetFlag(FLAGS_output_dir) + "/report.json") << report.ToString() << "\n";
    }
  }
  if (absl::GetFlag(FLAGS_json)) std::printf("%s\n", report.ToString().c_str());
  return 0;
}

}  // namespace
}  // namespace superserve::nas

int main(int argc, char** argv) {
  auto args = superserve::InitMain(argc, argv, superserve::nas::kUsage);
  if (args.size() < 2) {
    std::fprintf(stderr, "%s\n", superserve::nas::kUsage);
    return 2;
  }
  return superserve::nas::Run(args[1]);
}
