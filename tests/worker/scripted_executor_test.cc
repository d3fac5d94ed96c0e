// The torch executor serving hostile TorchScript packages (family
// "torchscript", docs/export.md): a module that meets the forward signature
// but returns logits the profile does not describe is refused at load naming
// its file, and a module whose forward fails on a batch answers that batch
// with INTERNAL naming its file (the input was checked against the profile:
// the failure is the module's, not the client's).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <random>

#include "common/model_repository.h"
#include "superserve/v1/tensor.pb.h"
#include "worker/torch_executor.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// forward's contract, then `body` (TorchScript, indented 4 spaces).
std::string Forward(const std::string& body) {
  return "def forward(self, x: Tensor, subnet_id: int, depths: List[int], "
         "expand_ratios: List[float], width_multipliers: List[float]) -> Tensor:\n" +
         body;
}

// A package `name` under a fresh folder: one subnet, batch sizes {1, 2},
// input [1, 4, 4], 10 classes, module.pt compiled from `forward_source`.
std::string WritePackage(const std::string& name, const std::string& forward_source,
                         const std::function<void(torch::jit::Module&)>& add_weights = nullptr) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("scripted_executor_test_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  torch::jit::Module m("Hostile");
  if (add_weights) add_weights(m);
  m.define(forward_source);
  m.save((dir / "module.pt").string());
  std::ofstream(dir / "manifest.json") << R"({"name": ")" << name << R"(", "version": 1,
    "kind": "static", "family": "torchscript", "architecture": {},
    "input": {"dtype": "float32", "shape": [1, 4, 4]}, "default_slo_ms": 100,
    "checkpoint": "module.pt"})";
  std::ofstream(dir / "profile.json") << R"({"model": ")" << name << R"(",
    "family": "torchscript", "batch_sizes": [1, 2], "input_shape": [1, 4, 4],
    "num_classes": 10, "subnets": [{"id": 0, "accuracy": 50.0,
      "control": {"subnet_id": 0, "depths": [0], "expand_ratios": [], "width_multipliers": [1.0]},
      "latency_us": [100, 200]}]})";
  return dir.string();
}

ModelEntry Package(const std::string& name, const std::string& forward_source,
                   const std::function<void(torch::jit::Module&)>& add_weights = nullptr) {
  auto entry = LoadModelDirectory(WritePackage(name, forward_source, add_weights));
  EXPECT_TRUE(entry.ok()) << entry.status();
  return entry.ok() ? *entry : ModelEntry{};
}

v1::Tensor Ones() {
  v1::Tensor t;
  EncodeTensor(MakeFloatTensor({1, 4, 4}, std::vector<float>(16, 1.f)), &t);
  return t;
}

TEST(ScriptedExecutorTest, AWellBehavedModuleServes) {
  ModelEntry model = Package("good", Forward("    return x.reshape([x.size(0), 16])[:, :10]\n"));
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->Load(model).ok());
  v1::Tensor in = Ones();
  auto out = (*executor)->Run(model.name, model.profile.subnets[0].control, {&in});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].num_elements(), 10);
}

// Placement's footprint (docs/engine.md): the bytes of the module's
// parameters and buffers, measured at load, and nothing once unloaded.
TEST(ScriptedExecutorTest, TheFootprintIsTheModulesParametersAndBuffers) {
  ModelEntry model = Package(
      "weighted", Forward("    return x.reshape([x.size(0), 16]).matmul(self.w) + self.b\n"),
      [](torch::jit::Module& m) {
        m.register_parameter("w", torch::zeros({16, 10}), /*is_buffer=*/false);
        m.register_buffer("b", torch::zeros({10}));
      });
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  EXPECT_EQ((*executor)->ResidentBytes(model.name), 0) << "not loaded yet";
  ASSERT_TRUE((*executor)->Load(model).ok());
  EXPECT_EQ((*executor)->ResidentBytes(model.name), (16 * 10 + 10) * 4);
  ASSERT_TRUE((*executor)->Unload(model.name).ok());
  EXPECT_EQ((*executor)->ResidentBytes(model.name), 0);
}

TEST(ScriptedExecutorTest, LogitsOfAnotherClassCountAreRefusedAtLoadNamingTheFile) {
  // 3 logits where the profile (and the router's metadata) says 10 classes:
  // it used to load and answer every query with 3 numbers.
  for (const char* body : {"    return torch.zeros([x.size(0), 3])\n",
                           "    return torch.zeros([x.size(0), 0])\n"}) {
    ModelEntry model = Package("fewclasses", Forward(body));
    auto executor = MakeTorchExecutor(1);
    ASSERT_TRUE(executor.ok());
    absl::Status st = (*executor)->Load(model);
    ASSERT_FALSE(st.ok()) << body;
    EXPECT_THAT(std::string(st.message()), HasSubstr("module.pt"));
    EXPECT_THAT(std::string(st.message()), HasSubstr("[1, 10]"));
    EXPECT_THAT(std::string(st.message()), HasSubstr("num_classes"));
  }
}

TEST(ScriptedExecutorTest, OneDimensionalOrComplexLogitsAreRefusedWithTheirShape) {
  struct Case {
    const char* body;
    const char* named;
  };
  for (const Case& c :
       {Case{"    return torch.zeros([x.size(0)])\n", "shape [1]"},
        // 9: c10::ScalarType::ComplexFloat (the C++ compiler has no torch.complex64).
        Case{"    return torch.zeros([x.size(0), 10], dtype=9)\n", "ComplexFloat"}}) {
    ModelEntry model = Package("badlogits", Forward(c.body));
    auto executor = MakeTorchExecutor(1);
    ASSERT_TRUE(executor.ok());
    absl::Status st = (*executor)->Load(model);
    ASSERT_FALSE(st.ok()) << c.body;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.named));
    EXPECT_THAT(std::string(st.message()), HasSubstr("module.pt"));
  }
}

TEST(ScriptedExecutorTest, AForwardThatFailsOnABatchIsInternalNamingTheModule) {
  // Passes the warm-up (zeros) and fails on real inputs.
  ModelEntry model = Package(
      "throws", Forward("    if bool(x.abs().sum() > 0):\n"
                        "        assert False, \"hostile: refuses non-zero input\"\n"
                        "    return torch.zeros([x.size(0), 10])\n"));
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->Load(model).ok());
  v1::Tensor in = Ones();
  auto out = (*executor)->Run(model.name, model.profile.subnets[0].control, {&in});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("module.pt"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("hostile: refuses non-zero input"));
}

TEST(ScriptedExecutorTest, RowsOtherThanTheBatchOnRealInputsAreInternal) {
  ModelEntry model = Package("wrongrows", Forward("    if bool(x.abs().sum() > 0):\n"
                                                  "        return torch.zeros([1, 10])\n"
                                                  "    return torch.zeros([x.size(0), 10])\n"));
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->Load(model).ok());
  v1::Tensor in = Ones();
  auto out = (*executor)->Run(model.name, model.profile.subnets[0].control, {&in, &in});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("shape [1, 10] for a batch of 2"));
}

// A TorchScript archive whose code does not compile (here a syntax error;
// likewise an op the worker does not register) made torch::jit::load or the
// lazy compile throw torch::jit::ErrorReport, which is no c10::Error: it
// escaped Load and aborted the worker. Now the load is refused naming the
// file and the compiler's message.
TEST(ScriptedExecutorTest, AnArchiveWhoseCodeDoesNotCompileIsRefusedNotAnAbort) {
  const std::string dir =
      WritePackage("badcode", Forward("    return torch.zeros([x.size(0), 10])\n"));
  const std::string path = dir + "/module.pt";
  {
    // Rewrite the archive with forward's source broken.
    caffe2::serialize::PyTorchStreamReader reader(path);
    std::vector<std::pair<std::string, std::string>> records;
    for (const std::string& name : reader.getAllRecords()) {
      auto [data, size] = reader.getRecord(name);
      std::string bytes(static_cast<const char*>(data.get()), size);
      if (name.rfind("code/", 0) == 0 && name.size() > 3 &&
          name.compare(name.size() - 3, 3, ".py") == 0) {
        const size_t at = bytes.find("def forward");
        if (at != std::string::npos) bytes.replace(at, 11, "def forward(((( not python");
      }
      records.emplace_back(name, std::move(bytes));
    }
    fs::remove(path);
    caffe2::serialize::PyTorchStreamWriter writer(path);
    for (const auto& [name, bytes] : records) {
      if (name == "version" || name == ".data/version") continue;  // the writer adds its own
      writer.writeRecord(name, bytes.data(), bytes.size());
    }
    writer.writeEndOfFile();
  }
  auto model = LoadModelDirectory(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  absl::Status st = (*executor)->Load(*model);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("module.pt"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("not a loadable TorchScript module"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("not python"));  // the compiler's report
}

// A package of a family the torch executor does not build (the emulated test
// package, sent to a torch worker) is refused naming the family; it used to
// be read as an OfaResNet and refused for "no supernet.pt / checkpoint.pt".
TEST(ScriptedExecutorTest, AFamilyTheTorchExecutorDoesNotBuildIsRefusedByName) {
  auto model = LoadModelDirectory(std::string(SUPERSERVE_TEST_SOURCE_DIR) +
                                  "/tests/router/testdata/emulated_repo/emu");
  ASSERT_TRUE(model.ok()) << model.status();
  auto executor = MakeTorchExecutor(1);
  ASSERT_TRUE(executor.ok());
  absl::Status st = (*executor)->Load(*model);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("family \"emulated\" is not one the torch"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("--emulate"));
}

}  // namespace
}  // namespace superserve
