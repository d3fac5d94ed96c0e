// Model packages (docs/packages.md): manifest parsing and validation, the
// manifest against the profile and the files, the bundled packages, and the
// older layout without a manifest. Every malformed package must be rejected
// with a message naming the file and the field.
#include "common/model_package.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/str_replace.h"
#include "common/model_repository.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kSource = SUPERSERVE_TEST_SOURCE_DIR;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "superserve-package-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A valid package "emu": the emulated test profile (4 subnets, input
// [1, 28, 28], 10 classes) plus a manifest and a checkpoint file.
constexpr const char* kManifest = R"({
  "name": "emu",
  "version": 1,
  "kind": "supernet",
  "family": "emulated",
  "architecture": {"subnets": 4},
  "input": {"dtype": "float32", "shape": [1, 28, 28]},
  "classes": ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"],
  "default_slo_ms": 50,
  "checkpoint": "weights.pt"
})";

std::string EmuProfile() {
  return ReadAll(kSource + "/tests/router/testdata/emulated_repo/emu/profile.json");
}

// The smallest zip archive: an end-of-central-directory record alone (no
// entries). The loader checks only that a .pt checkpoint is a whole archive.
const std::string kEmptyZip = std::string("PK\x05\x06", 4) + std::string(18, '\0');

struct Package {
  std::string dir_name = "emu";
  std::string manifest = kManifest;
  std::string profile = EmuProfile();
  bool with_profile = true;
  bool with_checkpoint = true;
  std::string checkpoint = kEmptyZip;
};

std::string WritePackage(const TempDir& tmp, const Package& p) {
  const fs::path dir = fs::path(tmp.path()) / p.dir_name;
  Write(dir / "manifest.json", p.manifest);
  if (p.with_profile) Write(dir / "profile.json", p.profile);
  if (p.with_checkpoint) Write(dir / "weights.pt", p.checkpoint);
  return dir.string();
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to) {
  std::string out = absl::StrReplaceAll(s, {{from, to}});
  EXPECT_NE(out, s) << "the test's edit \"" << from << "\" matched nothing";
  return out;
}

TEST(ModelPackage, ValidPackageLoadsWithItsManifest) {
  TempDir tmp;
  auto e = LoadModelDirectory(WritePackage(tmp, Package{}));
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->manifest.has_value());
  EXPECT_EQ(e->name, "emu");
  EXPECT_EQ(e->manifest->version, 1u);
  EXPECT_EQ(e->manifest->kind, ModelManifest::Kind::kSupernet);
  EXPECT_EQ(e->manifest->input_dtype, "float32");
  EXPECT_EQ(e->manifest->input_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(e->manifest->classes.size(), 10u);
  EXPECT_EQ(e->manifest->checkpoint, "weights.pt");
  EXPECT_DOUBLE_EQ(e->manifest->default_slo_ms, 50);
  EXPECT_THAT(e->manifest->architecture_json, HasSubstr("\"subnets\":4"));
  EXPECT_EQ(e->profile.subnets.size(), 4u);
}

// The bundled checkpoints (torch::save and torch.jit.save archives) are whole
// archives; their last byte cut off, they are not.
TEST(ModelPackage, BundledCheckpointsAreCompleteZipArchivesAndTheirTruncationsAreNot) {
  TempDir tmp;
  for (const std::string package : {"models/fmnist", "models/dynamic/fmnist-exit"}) {
    const std::string path = kSource + "/" + package + "/checkpoint.pt";
    EXPECT_TRUE(CheckZipArchive(path).ok()) << path << ": " << CheckZipArchive(path);
    const std::string whole = ReadAll(path);
    const fs::path cut = fs::path(tmp.path()) / "cut.pt";
    Write(cut, whole.substr(0, whole.size() - 1));
    EXPECT_FALSE(CheckZipArchive(cut.string()).ok()) << package;
  }
  auto e = LoadModelDirectory(kSource + "/models/fmnist");
  EXPECT_TRUE(e.ok()) << e.status();
}

// Little-endian bytes of `v`, `n` of them.
std::string Le(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return out;
}

// An archive over 4 GiB (zip64) keeps its directory's size and offset in a
// zip64 record that a locator before the end record points at.
std::string Zip64Tail(uint64_t directory_offset, bool with_locator) {
  const std::string record = Le(0x06064b50, 4) + Le(44, 8) + Le(45, 2) + Le(45, 2) + Le(0, 4) +
                             Le(0, 4) + Le(0, 8) + Le(0, 8) + Le(0, 8) + Le(directory_offset, 8);
  const std::string locator = Le(0x07064b50, 4) + Le(0, 4) + Le(0, 8) + Le(1, 4);
  const std::string end = Le(0x06054b50, 4) + Le(0, 2) + Le(0, 2) + Le(0xFFFF, 2) +
                          Le(0xFFFF, 2) + Le(0xFFFFFFFF, 4) + Le(0xFFFFFFFF, 4) + Le(0, 2);
  return record + (with_locator ? locator : "") + end;
}

TEST(ModelPackage, Zip64ArchivesAreReadThroughTheirZip64Record) {
  TempDir tmp;
  const fs::path path = fs::path(tmp.path()) / "big.pt";
  Write(path, Zip64Tail(0, true));
  EXPECT_TRUE(CheckZipArchive(path.string()).ok()) << CheckZipArchive(path.string());
  Write(path, Zip64Tail(0, false));
  EXPECT_THAT(std::string(CheckZipArchive(path.string()).message()),
              HasSubstr("zip64 locator is missing"));
  // The directory's 64-bit offset past the file's end: cut short.
  Write(path, Zip64Tail(uint64_t{5} << 32, true));
  EXPECT_THAT(std::string(CheckZipArchive(path.string()).message()),
              HasSubstr("central directory (0 bytes at byte 21474836480)"));
}

TEST(ModelPackage, CamelCaseJsonNamesAreAccepted) {
  auto m = ModelManifest::FromJson(Replace(kManifest, "default_slo_ms", "defaultSloMs"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->default_slo_ms, 50);
}

TEST(ModelPackage, OlderLayoutWithoutManifestStillLoads) {
  TempDir tmp;
  Write(fs::path(tmp.path()) / "emu" / "profile.json", EmuProfile());
  auto e = LoadModelDirectory(tmp.path() + "/emu");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->manifest.has_value());
  EXPECT_EQ(e->profile.model, "emu");
}

// What the router and the workers load (LoadModelDirectory) takes a profile
// of any form: sizes that are not powers of two, the linear form, a dipping
// measured table (raised) and a dominated subnet (left out), each adjustment
// in the profile's warnings for the binary to print.
TEST(ModelPackage, AProfileOfAnyFormLoadsWithItsWarnings) {
  TempDir tmp;
  Write(fs::path(tmp.path()) / "odd" / "profile.json", R"({
    "model": "odd", "batch_sizes": [1, 3, 6, 10],
    "subnets": [
      {"id": 0, "accuracy": 70, "alpha_us": 100, "beta_us": 400},
      {"id": 1, "accuracy": 80, "latency_us": [900, 1400, 1350, 2600]},
      {"id": 2, "accuracy": 75, "latency_us": [1000, 1500, 2000, 3000]}]})");
  auto e = LoadModelDirectory(tmp.path() + "/odd");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->profile.batch_sizes, (std::vector<int32_t>{1, 3, 6, 10}));
  ASSERT_EQ(e->profile.subnets.size(), 2u);
  EXPECT_EQ(e->profile.subnets[0].latency,
            (std::vector<Nanos>{Micros(500), Micros(700), Micros(1000), Micros(1400)}));
  EXPECT_EQ(e->profile.subnets[1].latency[2], Micros(1400));
  ASSERT_EQ(e->profile.warnings.size(), 2u);
  EXPECT_THAT(e->profile.warnings[0],
              HasSubstr("subnet id=1: latency_us[2] (batch 6) = 1350 is below batch 3's 1400"));
  EXPECT_THAT(e->profile.warnings[1],
              HasSubstr("subnet id=2 (accuracy 75%) is dominated by subnet id=1"));
}

// The bundled models are packages: their manifests agree with their profiles.
TEST(ModelPackage, BundledModelsArePackages) {
  for (const char* dir : {"/models/fmnist", "/models/dynamic/fmnist-exit",
                          "/tests/router/testdata/emulated_repo/emu"}) {
    auto e = LoadModelDirectory(kSource + dir);
    ASSERT_TRUE(e.ok()) << dir << ": " << e.status();
    ASSERT_TRUE(e->manifest.has_value()) << dir;
    EXPECT_EQ(e->manifest->name, e->profile.model) << dir;
  }
  auto exit = LoadModelDirectory(kSource + "/models/dynamic/fmnist-exit");
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->manifest->kind, ModelManifest::Kind::kDynamic);
}

// The repository scan finds a package by its manifest, and reports one
// without a profile instead of skipping it.
TEST(ModelPackage, RepositoryReportsAPackageWithoutProfile) {
  TempDir tmp;
  Package p;
  p.with_profile = false;
  WritePackage(tmp, p);
  auto all = LoadModelRepository(tmp.path());
  ASSERT_FALSE(all.ok());
  EXPECT_THAT(all.status().message(), HasSubstr("profile.json: missing"));
}

// A symlink loop or a dangling link in the repository is not a model folder;
// a FIFO or a device where a manifest or profile belongs is refused by name
// instead of blocking or filling memory.
TEST(ModelPackage, RepositorySkipsLoopsAndRefusesFilesThatAreNotFiles) {
  TempDir tmp;
  WritePackage(tmp, Package());
  fs::create_symlink("loopB", fs::path(tmp.path()) / "loopA");
  fs::create_symlink("loopA", fs::path(tmp.path()) / "loopB");
  fs::create_symlink("gone", fs::path(tmp.path()) / "dangling");
  auto all = LoadModelRepository(tmp.path());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 1u);

  for (const char* file : {"manifest.json", "profile.json"}) {
    TempDir t;
    const std::string dir = WritePackage(t, Package());
    fs::remove(fs::path(dir) / file);
    ASSERT_EQ(::mkfifo((fs::path(dir) / file).c_str(), 0600), 0);
    auto fifo = LoadModelDirectory(dir);
    ASSERT_FALSE(fifo.ok()) << file;
    EXPECT_THAT(fifo.status().message(), HasSubstr("is a FIFO, not a regular file")) << file;
    fs::remove(fs::path(dir) / file);
    fs::create_symlink("/dev/zero", fs::path(dir) / file);
    auto zero = LoadModelDirectory(dir);
    ASSERT_FALSE(zero.ok()) << file;
    EXPECT_THAT(zero.status().message(), HasSubstr("is a character device")) << file;
  }
}

struct Malformed {
  std::string kind;
  std::function<void(Package*)> edit;
  std::vector<std::string> expect;  // substrings of the error: the field and the problem
};

// At least ten kinds of broken package, each named in its error.
TEST(ModelPackage, MalformedPackagesAreRejectedNamingTheField) {
  const std::vector<Malformed> cases = {
      {"not JSON", [](Package* p) { p->manifest = "{\"name\": \"emu\","; },
       {"manifest.json", "not a valid manifest"}},
      {"unknown field (typo)",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"family\"", "\"famly\""); },
       {"manifest.json", "famly"}},
      {"wrong JSON type",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"version\": 1", "\"version\": \"one\""); },
       {"manifest.json", "version"}},
      {"name missing",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"name\": \"emu\",", ""); },
       {"field name", "missing"}},
      {"name with a slash",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"name\": \"emu\"", "\"name\": \"a/b\""); },
       {"field name", "a/b"}},
      {"name differs from the directory",
       [](Package* p) { p->dir_name = "other"; },
       {"field name", "directory", "other"}},
      // A second version in its own folder was refused without the rule.
      {"a new version in a folder named after the version",
       [](Package* p) {
         p->dir_name = "emu-v2";
         p->manifest = Replace(p->manifest, "\"version\": 1", "\"version\": 2");
       },
       {"field name: \"emu\" differs from the package directory's name \"emu-v2\"",
        "a package's folder is named after its model, a new version's too",
        "in a folder named emu (e.g. emu-v2/emu/, with a higher manifest version"}},
      {"version 0",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"version\": 1", "\"version\": 0"); },
       {"field version", "0"}},
      {"unknown kind",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"supernet\"", "\"hypernet\""); },
       {"field kind", "hypernet"}},
      {"family missing",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"family\": \"emulated\",", ""); },
       {"field family", "missing"}},
      {"input missing",
       [](Package* p) {
         p->manifest = Replace(
             p->manifest, "\"input\": {\"dtype\": \"float32\", \"shape\": [1, 28, 28]},", "");
       },
       {"field input", "missing"}},
      {"unknown dtype",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"float32\"", "\"float8\""); },
       {"field input.dtype", "float8"}},
      {"shape entry 0",
       [](Package* p) { p->manifest = Replace(p->manifest, "[1, 28, 28]", "[1, 0, 28]"); },
       {"field input.shape[1]", ">= 1"}},
      {"shape differs from the profile",
       [](Package* p) { p->manifest = Replace(p->manifest, "[1, 28, 28]", "[3, 28, 28]"); },
       {"field input.shape", "[3, 28, 28]", "[1, 28, 28]"}},
      {"duplicate class label",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"c9\"", "\"c8\""); },
       {"field classes[9]", "c8", "twice"}},
      {"class count differs from the profile",
       [](Package* p) { p->manifest = Replace(p->manifest, ", \"c9\"", ""); },
       {"field classes", "9 labels", "10 classes"}},
      {"default SLO not positive",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"default_slo_ms\": 50", "\"default_slo_ms\": -5"); },
       {"field default_slo_ms", "> 0"}},
      {"checkpoint escapes the package",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"weights.pt\"", "\"../weights.pt\""); },
       {"field checkpoint", "inside the package"}},
      {"checkpoint file missing", [](Package* p) { p->with_checkpoint = false; },
       {"field checkpoint", "weights.pt", "no such file"}},
      // A copy cut short (head -c 100000 checkpoint.pt) passed every check
      // and failed only when a worker loaded it.
      {"checkpoint truncated",
       [](Package* p) {
         p->checkpoint = ReadAll(kSource + "/models/fmnist/checkpoint.pt").substr(0, 100000);
       },
       {"field checkpoint", "\"weights.pt\"", "no end-of-central-directory record",
        "100000 bytes", "truncated"}},
      {"checkpoint not a zip archive", [](Package* p) { p->checkpoint = "not really torch"; },
       {"field checkpoint", "\"weights.pt\"", "not a LibTorch archive"}},
      {"checkpoint's central directory beyond the end of the file",
       [](Package* p) {
         // The end record of a 1000-entry archive whose entries were cut off:
         // 4000 directory bytes at byte 5000 of a 22-byte file.
         p->checkpoint =
             std::string("PK\x05\x06\0\0\0\0\xe8\x03\xe8\x03\xa0\x0f\0\0\x88\x13\0\0\0\0", 22);
       },
       {"field checkpoint", "\"weights.pt\"", "central directory (4000 bytes at byte 5000)",
        "22-byte file"}},
      {"family differs from the profile",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"emulated\"", "\"ofa_resnet\""); },
       {"field family", "ofa_resnet", "emulated"}},
      {"dynamic kind, profile without histograms",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"supernet\"", "\"dynamic\""); },
       {"field kind", "dynamic"}},
      {"static kind, profile with four subnets",
       [](Package* p) { p->manifest = Replace(p->manifest, "\"supernet\"", "\"static\""); },
       {"field kind", "4 subnets"}},
      {"profile missing", [](Package* p) { p->with_profile = false; },
       {"profile.json", "missing"}},
      {"profile breaks a profile rule (accuracy above 100 %)",
       [](Package* p) { p->profile = Replace(p->profile, "\"accuracy\": 90.0", "\"accuracy\": 190.0"); },
       {"profile.json", "accuracy"}},
      {"profile names another model",
       [](Package* p) { p->profile = Replace(p->profile, "\"model\": \"emu\"", "\"model\": \"emv\""); },
       {"field name", "emv"}},
  };
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    TempDir tmp;
    Package p;
    c.edit(&p);
    const std::string dir = WritePackage(tmp, p);
    auto e = LoadModelDirectory(dir);
    ASSERT_FALSE(e.ok()) << c.kind << ": accepted";
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << c.kind;
    const std::string msg(e.status().message());
    EXPECT_THAT(msg, HasSubstr("model package " + dir)) << c.kind;
    for (const auto& want : c.expect) EXPECT_THAT(msg, HasSubstr(want)) << c.kind;
  }
}

}  // namespace
}  // namespace superserve
