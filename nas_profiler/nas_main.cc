// superserve-nas: trains the Fashion-MNIST supernet, calibrates SubnetNorm per
// subnet, searches the accuracy-latency Pareto frontier, evaluates subnets and
// re-profiles latencies. See docs/nas.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <iostream>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/init.h"
#include "common/json_writer.h"
#include "common/output_path.h"
#include "common/small_file.h"
#include "common/progress.h"
#include "models/ofa_resnet.h"
#include "nas_profiler/nas_configs.h"
#include "nas_profiler/search.h"
#include "nas_profiler/supernet_trainer.h"

ABSL_FLAG(std::string, config, "",
          "Supernet configuration (train, probe): fmnist (the default), fmnist-s2, fmnist-s2w, "
          "fmnist-s2x, fmnist-s2y, fmnist-ss0 or tiny. With train --init_checkpoint and with "
          "search: adopt this configuration's elastic choices (same network, e.g. a wider width "
          "range); empty keeps the checkpoint's.");
ABSL_FLAG(std::string, data_dir, superserve::kFashionMnistDir,
          "Folder with the Fashion-MNIST *-ubyte.gz files.");
ABSL_FLAG(std::string, checkpoint, "", "Checkpoint to write (train) or read (other subcommands).");
ABSL_FLAG(int, epochs, 10, "Training epochs.");
ABSL_FLAG(double, warmup_epochs, 1.0, "Epochs of linear learning-rate warm-up (0 to fine-tune).");
ABSL_FLAG(std::string, init_checkpoint, "",
          "train: start from this trained supernet instead of a random initialisation "
          "(--config then only widens/narrows its elastic choices).");
ABSL_FLAG(int, batch_size, 128, "Training batch size.");
ABSL_FLAG(double, learning_rate, 0.1, "Peak SGD learning rate (warm-up 1 epoch, cosine decay).");
ABSL_FLAG(double, weight_decay, 5e-5, "Weight decay of conv/linear weights.");
ABSL_FLAG(int, random_subnets, 2, "Random subnets per step besides the largest and smallest.");
ABSL_FLAG(bool, distill, true, "In-place distillation from the largest subnet.");
ABSL_FLAG(bool, augment, true, "Random crop (padding 2) and horizontal flip.");
ABSL_FLAG(int64_t, max_steps, -1, "Stop training after this many steps (-1: all epochs).");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the split, the initialisation, the order and the search.");
ABSL_FLAG(int, threads, 1,
          "Intra-op threads for training and calibration (1 is fastest on a shared 2-core box).");
ABSL_FLAG(int, validation_size, 5000, "Training images kept aside for the search's validation.");
ABSL_FLAG(std::string, profile, "", "ModelProfile JSON to read (eval, calibrate, reprofile).");
ABSL_FLAG(std::string, output_dir, "",
          "search: model folder to write (profile.json + checkpoint.pt).");
ABSL_FLAG(std::string, output, "",
          "calibrate: checkpoint to write; reprofile: profile to write (default: --profile).");
ABSL_FLAG(std::string, model_name, "fmnist", "search: the profile's model name.");
ABSL_FLAG(int, subnet, -1, "eval: the profile subnet id to measure.");
ABSL_FLAG(int, candidates, 400, "search: random architectures sampled (plus smallest/largest).");
ABSL_FLAG(int, evolution_rounds, 2, "search: rounds mutating the frontier.");
ABSL_FLAG(int, mutations_per_round, 100, "search: new candidates per evolution round.");
ABSL_FLAG(bool, fit_latency, true,
          "search: rank candidates by a latency model fitted to all their timings (false: "
          "each by its own timing).");
ABSL_FLAG(bool, fit_accuracy, true,
          "search: rank candidates by an accuracy model (ridge regression on the architecture's "
          "choices) fitted to all their validation accuracies, once there are twice as many "
          "candidates as features (false: each by its own measurement).");
ABSL_FLAG(bool, monotone_accuracy, false,
          "search: constrain the accuracy model so that a larger choice never predicts a lower "
          "accuracy (non-negative weights: nothing is predicted above the largest architecture). "
          "Off by default: the bundled model was searched without it (docs/nas.md has what it "
          "gave).");
ABSL_FLAG(int, screen_factor, 10,
          "search: with both fitted models, each evolution round proposes this many times "
          "--mutations_per_round mutations and measures those predicted furthest above the "
          "frontier (1: measure every proposal).");
ABSL_FLAG(std::string, candidates_csv, "",
          "search: also write every candidate (validation accuracy, measured and ranking "
          "latency, cost, frontier membership) to this CSV.");
ABSL_FLAG(std::string, previous_candidates, "",
          "search: a --candidates_csv of an earlier search of the same checkpoint with the same "
          "settings; its candidates join the pool unmeasured (continue with --candidates 0 and "
          "more --evolution_rounds).");
ABSL_FLAG(bool, retime_previous, false,
          "search: re-measure the --previous_candidates' latencies on this machine first.");
ABSL_FLAG(int, max_subnets, 160, "search: at most this many Pareto subnets (thinned evenly).");
ABSL_FLAG(int, calibration_images, 2000,
          "Training images (the first of the training split) that calibrate SubnetNorm.");
ABSL_FLAG(int, search_calibration_images, 1000,
          "search: training images that calibrate each candidate while screening.");
ABSL_FLAG(int, workers, 2,
          "search: threads measuring candidates/test accuracy in parallel (1 intra-op each).");
ABSL_FLAG(int, warmup, 2, "Latency: untimed runs per batch size (search, reprofile, probe).");
ABSL_FLAG(int, repeats, 7,
          "Latency: timed runs per batch size, the median is kept (search, reprofile, probe).");
ABSL_FLAG(bool, json, false, "Print one JSON object as the last line.");

namespace superserve::nas {
namespace {

constexpr char kUsage[] =
    "superserve-nas SUBCOMMAND [flags]\n"
    "  train      train the supernet (sandwich rule + in-place distillation)\n"
    "  calibrate  calibrate SubnetNorm statistics of a checkpoint's slots\n"
    "  search     sample/evolve subnets, Pareto frontier, profile, write profile + checkpoint\n"
    "  eval       test accuracy of one subnet: --checkpoint C --profile P --subnet ID --json\n"
    "  reprofile  re-measure a profile's latencies on this machine (< 3 minutes)\n"
    "  probe      seconds per training step and smallest/largest latency of --config";

void Log(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "superserve-nas: %s\n", std::string(status.message()).c_str());
  return 1;
}

std::string ConfigName() {
  const std::string name = absl::GetFlag(FLAGS_config);
  return name.empty() ? "fmnist" : name;
}

// The flags' ranges, and the file or folder a subcommand writes at its end,
// checked before any data is read. Used to surface late or not at all:
// --threads=100000 started that many threads, calibrate
// --calibration_images=-1 aborted (uncaught c10::Error), a NaN or infinite
// --weight_decay / --warmup_epochs trained into NaN weights and saved them,
// and an unwritable --checkpoint was found after the training.
absl::Status CheckFlags(const std::string& cmd) {
  const auto range = [](absl::string_view flag, int64_t v, int64_t lo, int64_t hi) {
    return v >= lo && v <= hi ? absl::OkStatus()
                              : absl::InvalidArgumentError(absl::StrCat(
                                    "--", flag, "=", v, " must be in [", lo, ", ", hi, "]"));
  };
  const auto finite = [](absl::string_view flag, double v, double lo, bool open) {
    const bool ok = std::isfinite(v) && (open ? v > lo : v >= lo);
    return ok ? absl::OkStatus()
              : absl::InvalidArgumentError(absl::StrCat("--", flag, "=", v, " must be a finite number ",
                                                        open ? "> " : ">= ", lo));
  };
  for (const absl::Status& st : {
           range("threads", absl::GetFlag(FLAGS_threads), 1, 1024),
           range("batch_size", absl::GetFlag(FLAGS_batch_size), 1, 65536),
           range("random_subnets", absl::GetFlag(FLAGS_random_subnets), 0, 1000),
           range("calibration_images", absl::GetFlag(FLAGS_calibration_images), 1, 1000000),
           range("search_calibration_images", absl::GetFlag(FLAGS_search_calibration_images), 1,
                 1000000),
           range("warmup", absl::GetFlag(FLAGS_warmup), 0, 100000),
           range("repeats", absl::GetFlag(FLAGS_repeats), 1, 100000),
           finite("learning_rate", absl::GetFlag(FLAGS_learning_rate), 0, /*open=*/true),
           finite("weight_decay", absl::GetFlag(FLAGS_weight_decay), 0, /*open=*/false),
           finite("warmup_epochs", absl::GetFlag(FLAGS_warmup_epochs), 0, /*open=*/false),
       }) {
    if (!st.ok()) return st;
  }
  if (cmd == "train" && !absl::GetFlag(FLAGS_checkpoint).empty()) {
    return CheckOutputFile("--checkpoint", absl::GetFlag(FLAGS_checkpoint));
  }
  if (cmd == "search" && !absl::GetFlag(FLAGS_output_dir).empty()) {
    return MakeOutputDirectory("--output_dir", absl::GetFlag(FLAGS_output_dir));
  }
  if ((cmd == "calibrate" || cmd == "reprofile") && !absl::GetFlag(FLAGS_output).empty()) {
    return CheckOutputFile("--output", absl::GetFlag(FLAGS_output));
  }
  return absl::OkStatus();
}

int Train() {
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  if (checkpoint.empty()) return Fail(absl::InvalidArgumentError("train needs --checkpoint"));
  auto config = NamedConfig(ConfigName());
  if (!config.ok()) return Fail(config.status());
  SetTorchThreads(absl::GetFlag(FLAGS_threads));
  auto splits = LoadFashionMnistSplits(absl::GetFlag(FLAGS_data_dir),
                                       absl::GetFlag(FLAGS_validation_size),
                                       absl::GetFlag(FLAGS_seed), /*load_test=*/false);
  if (!splits.ok()) return Fail(splits.status());
  const std::string init = absl::GetFlag(FLAGS_init_checkpoint);
  auto model = init.empty() ? models::OfaResNet::Create(*config, absl::GetFlag(FLAGS_seed))
                            : models::OfaResNet::Load(init);
  if (!model.ok()) return Fail(model.status());
  if (!init.empty() && !absl::GetFlag(FLAGS_config).empty()) {
    if (auto s = (*model)->SetElasticChoices(*config); !s.ok()) return Fail(s);
    Log(absl::StrCat("fine-tuning with the elastic choices of ", ConfigName()));
  }
  TrainOptions options;
  options.epochs = absl::GetFlag(FLAGS_epochs);
  options.warmup_epochs = absl::GetFlag(FLAGS_warmup_epochs);
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  options.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  options.random_subnets = absl::GetFlag(FLAGS_random_subnets);
  options.distill = absl::GetFlag(FLAGS_distill);
  options.augment = absl::GetFlag(FLAGS_augment);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.checkpoint_path = checkpoint;
  options.log = Log;
  Log(absl::StrCat("training ", init.empty() ? ConfigName() : init, " on ", splits->train.size(),
                   " images (", splits->validation.size(), " kept for validation)"));
  auto report = TrainSupernet(**model, splits->train, options);
  if (!report.ok()) return Fail(report.status());
  Log(absl::StrCat("trained ", report->steps, " steps in ", report->seconds, " s"));
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.Add("steps", report->steps)
        .Add("epochs", report->epochs_done)
        .Add("seconds", report->seconds)
        .Add("seconds_per_step", report->seconds / std::max<int64_t>(1, report->steps))
        .Add("final_loss", report->largest_losses.empty() ? 0.0 : report->largest_losses.back());
    std::cout << json.ToString() << std::endl;
  }
  return 0;
}

absl::Status WriteCandidatesCsv(const SearchResult& result, const std::string& path) {
  std::ofstream out(path);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  std::vector<bool> on_frontier(result.candidates.size(), false);
  for (int64_t i : result.frontier) on_frontier[static_cast<size_t>(i)] = true;
  out << "candidate,validation_accuracy,measured_us,ranking_us,macs,activations,conv_layers,"
         "pareto,depths,width_multipliers,expand_ratios,ranking_accuracy\n";
  auto join = [](const auto& v) { return absl::StrJoin(v, " "); };
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    const CandidateResult& c = result.candidates[i];
    out << i << ',' << c.validation_accuracy << ',' << ToMicros(c.search_latency) << ','
        << c.ranking_latency_us << ',' << c.cost.macs << ',' << c.cost.activations << ','
        << c.cost.conv_layers << ',' << (on_frontier[i] ? 1 : 0) << ','
        << join(c.architecture.depths) << ',' << join(c.architecture.width_multipliers) << ','
        << join(c.architecture.expand_ratios) << ',' << c.ranking_accuracy << '\n';
  }
  return out.good() ? absl::OkStatus() : absl::InternalError(absl::StrCat("writing ", path));
}

// Parses a space-separated list of numbers into `out`; the error names `what`.
template <typename T>
absl::Status ParseList(absl::string_view text, absl::string_view what, std::vector<T>& out) {
  for (absl::string_view v : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    T value{};
    bool ok = false;
    if constexpr (std::is_integral_v<T>) {
      ok = absl::SimpleAtoi(v, &value);
    } else {
      ok = absl::SimpleAtof(v, &value);
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat(what, " '", v, "'"));
    out.push_back(value);
  }
  return absl::OkStatus();
}

// Reads WriteCandidatesCsv's format back (the columns search needs).
absl::StatusOr<std::vector<CandidateResult>> ReadCandidatesCsv(const std::string& path) {
  // A regular file only: /dev/zero used to be read as one endless line, and a
  // FIFO blocked the search.
  if (auto st = CheckRegularFile(path); !st.ok()) return st;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  std::getline(in, line);
  if (line.rfind("candidate,validation_accuracy,measured_us,", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a --candidates_csv file (header '", line, "')"));
  }
  std::vector<CandidateResult> result;
  for (int row = 2; std::getline(in, line); ++row) {
    if (line.empty()) continue;
    std::vector<std::string> f = absl::StrSplit(line, ',');
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", row, ": ", what));
    };
    // 11 fields before ranking_accuracy was added; it is recomputed anyway.
    if (f.size() != 11 && f.size() != 12) {
      return bad(absl::StrCat(f.size(), " fields, want 12"));
    }
    CandidateResult c;
    double measured_us = 0;
    if (!absl::SimpleAtod(f[1], &c.validation_accuracy) || !absl::SimpleAtod(f[2], &measured_us)) {
      return bad("accuracy/latency is not a number");
    }
    // Converted to nanoseconds below: NaN, inf or 1e300 overflowed (UB).
    if (!(measured_us >= 0 && measured_us <= 3.6e9) || !std::isfinite(c.validation_accuracy)) {
      return bad("accuracy must be finite and latency in [0, 3.6e9] us");
    }
    c.search_latency = static_cast<Nanos>(measured_us * 1000.0);
    if (auto s = ParseList(f[8], "depth", c.architecture.depths); !s.ok()) return bad(s.message());
    if (auto s = ParseList(f[9], "width multiplier", c.architecture.width_multipliers); !s.ok()) {
      return bad(s.message());
    }
    if (auto s = ParseList(f[10], "expand ratio", c.architecture.expand_ratios); !s.ok()) {
      return bad(s.message());
    }
    result.push_back(std::move(c));
  }
  return result;
}

std::string MachineDescription() {
  std::string cpu = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  char host[256] = "unknown-host";
  gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return absl::StrCat(host, " (", cpu, "), 1 intra-op thread, ", date);
}

absl::StatusOr<std::unique_ptr<models::OfaResNet>> LoadCheckpoint() {
  const std::string path = absl::GetFlag(FLAGS_checkpoint);
  if (path.empty()) return absl::InvalidArgumentError("--checkpoint is required");
  return models::OfaResNet::Load(path);
}

absl::StatusOr<ModelProfile> LoadProfile() {
  const std::string path = absl::GetFlag(FLAGS_profile);
  if (path.empty()) return absl::InvalidArgumentError("--profile is required");
  return ModelProfile::LoadFile(path);
}

int Search() {
  const std::string output_dir = absl::GetFlag(FLAGS_output_dir);
  if (output_dir.empty()) return Fail(absl::InvalidArgumentError("search needs --output_dir"));
  std::filesystem::create_directories(output_dir);
  auto model = LoadCheckpoint();
  if (!model.ok()) return Fail(model.status());
  if (!absl::GetFlag(FLAGS_config).empty()) {
    auto config = NamedConfig(ConfigName());
    if (!config.ok()) return Fail(config.status());
    if (auto s = (*model)->SetElasticChoices(*config); !s.ok()) return Fail(s);
    Log(absl::StrCat("searching the elastic choices of ", ConfigName()));
  }
  SetTorchThreads(absl::GetFlag(FLAGS_threads));
  auto splits = LoadFashionMnistSplits(absl::GetFlag(FLAGS_data_dir),
                                       absl::GetFlag(FLAGS_validation_size),
                                       absl::GetFlag(FLAGS_seed));
  if (!splits.ok()) return Fail(splits.status());
  SearchOptions options;
  options.num_candidates = absl::GetFlag(FLAGS_candidates);
  options.evolution_rounds = absl::GetFlag(FLAGS_evolution_rounds);
  options.mutations_per_round = absl::GetFlag(FLAGS_mutations_per_round);
  options.max_subnets = static_cast<size_t>(absl::GetFlag(FLAGS_max_subnets));
  options.calibration_images = absl::GetFlag(FLAGS_calibration_images);
  options.search_calibration_images = absl::GetFlag(FLAGS_search_calibration_images);
  options.profile_warmup = absl::GetFlag(FLAGS_warmup);
  options.profile_repeats = absl::GetFlag(FLAGS_repeats);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.fit_latency = absl::GetFlag(FLAGS_fit_latency);
  options.fit_accuracy = absl::GetFlag(FLAGS_fit_accuracy);
  options.monotone_accuracy = absl::GetFlag(FLAGS_monotone_accuracy);
  options.screen_factor = absl::GetFlag(FLAGS_screen_factor);
  if (const std::string previous = absl::GetFlag(FLAGS_previous_candidates); !previous.empty()) {
    auto read = ReadCandidatesCsv(previous);
    if (!read.ok()) return Fail(read.status());
    options.previous = *std::move(read);
    options.retime_previous = absl::GetFlag(FLAGS_retime_previous);
  }
  options.workers = std::max(1, absl::GetFlag(FLAGS_workers));
  options.model_name = absl::GetFlag(FLAGS_model_name);
  options.measured_on = MachineDescription();
  options.log = Log;
  const std::string candidates_csv = absl::GetFlag(FLAGS_candidates_csv);
  if (!candidates_csv.empty()) {
    options.on_round = [&candidates_csv](const SearchResult& so_far) {
      if (auto s = WriteCandidatesCsv(so_far, candidates_csv); !s.ok()) Log(std::string(s.message()));
    };
  }
  const std::string checkpoint = output_dir + "/checkpoint.pt";
  const std::string profile = output_dir + "/profile.json";
  auto result = SearchAndProfile(**model, *splits, options, checkpoint, profile);
  if (!result.ok()) return Fail(result.status());
  const ModelProfile& p = result->profile;
  const int b16 = p.BatchIndex(16);
  if (const std::string csv = absl::GetFlag(FLAGS_candidates_csv); !csv.empty()) {
    if (auto s = WriteCandidatesCsv(*result, csv); !s.ok()) return Fail(s);
    Log(absl::StrCat("wrote ", csv));
  }
  Log(absl::StrCat("wrote ", profile, " and ", checkpoint, ": ", p.subnets.size(),
                   " Pareto subnets of ", result->candidates.size(), " candidates; candidates ",
                   result->seconds_candidates, " s, final ", result->seconds_final, " s"));
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.Add("candidates", static_cast<int64_t>(result->candidates.size()))
        .Add("pareto_subnets", static_cast<int64_t>(p.subnets.size()))
        .Add("smallest_test_accuracy", p.subnets.front().accuracy)
        .Add("largest_test_accuracy", p.subnets.back().accuracy)
        .Add("seconds_candidates", result->seconds_candidates)
        .Add("seconds_final", result->seconds_final);
    if (b16 >= 0) {
      json.Add("latency_ratio_b16", static_cast<double>(p.subnets.back().latency[b16]) /
                                        static_cast<double>(p.subnets.front().latency[b16]));
    }
    std::cout << json.ToString() << std::endl;
  }
  return 0;
}

int Eval() {
  auto model = LoadCheckpoint();
  if (!model.ok()) return Fail(model.status());
  auto profile = LoadProfile();
  if (!profile.ok()) return Fail(profile.status());
  const int id = absl::GetFlag(FLAGS_subnet);
  // Any slot, a dominated one (left out of the serving choices) too.
  const std::vector<SubnetProfile> every = profile->EverySubnet();
  const auto subnet = std::find_if(every.begin(), every.end(),
                                   [id](const SubnetProfile& s) { return s.id == id; });
  if (subnet == every.end()) {
    return Fail(absl::NotFoundError(absl::StrCat("subnet ", id, " is not in the profile")));
  }
  // The profile's accuracies were measured with one thread and this batch
  // size; the same settings make the result reproduce exactly.
  SetTorchThreads(1);
  auto test = LoadFashionMnist("t10k", absl::GetFlag(FLAGS_data_dir));
  if (!test.ok()) return Fail(test.status());
  auto test_set = ImageDataset::FromLabeledImages(*test);
  if (!test_set.ok()) return Fail(test_set.status());
  ControlTuple control = subnet->control;
  control.subnet_id = id;
  auto result = EvaluateSubnet(**model, control, *test_set, kEvalBatchSize);
  if (!result.ok()) return Fail(result.status());
  const double profiled = subnet->accuracy;
  Log(absl::StrFormat("subnet %d: test accuracy %.2f%% (%d/%d), profile says %.2f%%", id,
                      result->accuracy_percent, result->correct, result->total, profiled));
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.Add("subnet", id)
        .Add("test_accuracy", result->accuracy_percent)
        .Add("correct", result->correct)
        .Add("total", result->total)
        .Add("profile_accuracy", profiled)
        .Add("matches_profile", result->accuracy_percent == profiled);
    std::cout << json.ToString() << std::endl;
  }
  return 0;
}

int Calibrate() {
  auto model = LoadCheckpoint();
  if (!model.ok()) return Fail(model.status());
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) return Fail(absl::InvalidArgumentError("calibrate needs --output"));
  SetTorchThreads(absl::GetFlag(FLAGS_threads));
  auto splits = LoadFashionMnistSplits(absl::GetFlag(FLAGS_data_dir),
                                       absl::GetFlag(FLAGS_validation_size),
                                       absl::GetFlag(FLAGS_seed), /*load_test=*/false);
  if (!splits.ok()) return Fail(splits.status());
  const ImageDataset calibration = splits->train.Prefix(absl::GetFlag(FLAGS_calibration_images));
  ModelProfile profile;
  if (!absl::GetFlag(FLAGS_profile).empty()) {
    auto loaded = LoadProfile();
    if (!loaded.ok()) return Fail(loaded.status());
    profile = *std::move(loaded);
  } else {
    // Recalibrate the checkpoint's own slots.
    for (int slot = 0; slot < (*model)->NumSlots(); ++slot) {
      SubnetProfile subnet;
      subnet.id = slot;
      subnet.control = *(*model)->SlotArchitecture(slot);
      profile.subnets.push_back(std::move(subnet));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  if (auto s = CalibrateProfileSlots(**model, profile, calibration); !s.ok()) return Fail(s);
  if (auto s = (*model)->Save(output); !s.ok()) return Fail(s);
  const size_t slots = profile.EverySubnet().size();
  Log(absl::StrCat("calibrated ", slots, " slots on ", calibration.size(),
                   " images in ", SecondsSince(start), " s; wrote ", output));
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.Add("slots", static_cast<int64_t>(slots))
        .Add("seconds", SecondsSince(start));
    std::cout << json.ToString() << std::endl;
  }
  return 0;
}

int Reprofile() {
  auto model = LoadCheckpoint();
  if (!model.ok()) return Fail(model.status());
  auto profile = LoadProfile();
  if (!profile.ok()) return Fail(profile.status());
  std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) output = absl::GetFlag(FLAGS_profile);
  SetTorchThreads(1);  // the worker's setting
  const auto start = std::chrono::steady_clock::now();
  auto raised = ProfileLatencies(**model, *profile, absl::GetFlag(FLAGS_warmup),
                                 absl::GetFlag(FLAGS_repeats));
  if (!raised.ok()) return Fail(raised.status());
  profile->measured_on = MachineDescription();
  if (auto s = profile->SaveFile(output); !s.ok()) return Fail(s);
  const double seconds = SecondsSince(start);
  Log(absl::StrCat("re-profiled ", profile->subnets.size(), " subnets in ", seconds,
                   " s; wrote ", output));
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.Add("subnets", static_cast<int64_t>(profile->subnets.size()))
        .Add("seconds", seconds)
        .Add("raised_entries", *raised);
    std::cout << json.ToString() << std::endl;
  }
  return 0;
}

// Cost of a configuration before committing to it: seconds per training
// step and the smallest/largest latency at batch 16 (random weights).
int Probe() {
  auto config = NamedConfig(ConfigName());
  if (!config.ok()) return Fail(config.status());
  SetTorchThreads(absl::GetFlag(FLAGS_threads));
  auto splits = LoadFashionMnistSplits(absl::GetFlag(FLAGS_data_dir),
                                       absl::GetFlag(FLAGS_validation_size),
                                       absl::GetFlag(FLAGS_seed), /*load_test=*/false);
  if (!splits.ok()) return Fail(splits.status());
  auto model = models::OfaResNet::Create(*config, absl::GetFlag(FLAGS_seed));
  if (!model.ok()) return Fail(model.status());
  TrainOptions options;
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.random_subnets = absl::GetFlag(FLAGS_random_subnets);
  options.max_steps = std::max<int64_t>(1, absl::GetFlag(FLAGS_max_steps));
  auto report = TrainSupernet(**model, splits->train, options);
  if (!report.ok()) return Fail(report.status());
  ControlTuple smallest = models::SmallestArchitecture(*config);
  ControlTuple largest = models::LargestArchitecture(*config);
  smallest.subnet_id = 0;
  largest.subnet_id = 1;
  if (auto s = (*model)->SetSlots({smallest, largest}); !s.ok()) return Fail(s);
  SetTorchThreads(1);
  auto small_latency = MeasureLatency(**model, smallest, {1, 16, 64}, absl::GetFlag(FLAGS_warmup),
                                      absl::GetFlag(FLAGS_repeats));
  auto large_latency = MeasureLatency(**model, largest, {1, 16, 64}, absl::GetFlag(FLAGS_warmup),
                                      absl::GetFlag(FLAGS_repeats));
  if (!small_latency.ok()) return Fail(small_latency.status());
  if (!large_latency.ok()) return Fail(large_latency.status());
  JsonWriter json;
  json.Add("config", ConfigName())
      .Add("seconds_per_step", report->seconds / report->steps)
      .Add("smallest_us_b1", ToMicros((*small_latency)[0]))
      .Add("largest_us_b1", ToMicros((*large_latency)[0]))
      .Add("smallest_us_b16", ToMicros((*small_latency)[1]))
      .Add("largest_us_b16", ToMicros((*large_latency)[1]))
      .Add("smallest_us_b64", ToMicros((*small_latency)[2]))
      .Add("largest_us_b64", ToMicros((*large_latency)[2]))
      .Add("ratio_b16", static_cast<double>((*large_latency)[1]) / (*small_latency)[1]);
  std::cout << json.ToString() << std::endl;
  return 0;
}

}  // namespace
}  // namespace superserve::nas

int main(int argc, char** argv) {
  std::vector<std::string> args = superserve::InitMain(argc, argv, superserve::nas::kUsage);
  if (args.size() != 2) {
    std::fprintf(stderr, "%s\n", superserve::nas::kUsage);
    return 2;
  }
  const std::string& command = args[1];
  if (auto st = superserve::nas::CheckFlags(command); !st.ok()) {
    std::fprintf(stderr, "superserve-nas: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  if (command == "train") return superserve::nas::Train();
  if (command == "search") return superserve::nas::Search();
  if (command == "eval") return superserve::nas::Eval();
  if (command == "calibrate") return superserve::nas::Calibrate();
  if (command == "reprofile") return superserve::nas::Reprofile();
  if (command == "probe") return superserve::nas::Probe();
  std::fprintf(stderr, "unknown subcommand '%s'\n%s\n", command.c_str(), superserve::nas::kUsage);
  return 2;
}
