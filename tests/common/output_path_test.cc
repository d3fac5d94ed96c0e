// The checks tools make before a long run that their output can be written.
#include "common/output_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace superserve {
namespace {

namespace fs = std::filesystem;

std::string Scratch() {
  const fs::path dir = fs::path(::testing::TempDir()) / ("output_path_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

TEST(OutputPath, AFileInAnExistingFolderIsWritable) {
  const std::string dir = Scratch();
  EXPECT_TRUE(CheckOutputFile("--output", dir + "/p.json").ok());
  std::ofstream(dir + "/exists.json") << "{}";
  EXPECT_TRUE(CheckOutputFile("--output", dir + "/exists.json").ok());
  fs::remove_all(dir);
}

TEST(OutputPath, MissingFoldersDirectoriesAndFilesAsFoldersAreRefusedNamingTheFlag) {
  const std::string dir = Scratch();
  std::ofstream(dir + "/file") << "x";
  struct Case {
    std::string path;
    std::string why;
  };
  for (const Case& c : {Case{dir + "/missing/p.json", "does not exist"},
                        Case{dir, "is a directory"},
                        Case{dir + "/file/p.json", "is not a folder"},
                        Case{"", "is empty"}}) {
    absl::Status st = CheckOutputFile("--output", c.path);
    ASSERT_FALSE(st.ok()) << c.path;
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("--output"), std::string::npos) << st;
    EXPECT_NE(st.message().find(c.why), std::string::npos) << st;
  }
  fs::remove_all(dir);
}

TEST(OutputPath, OutputDirectoriesAreCreatedOrRefused) {
  const std::string dir = Scratch();
  EXPECT_TRUE(MakeOutputDirectory("--output_dir", dir + "/a/b").ok());
  EXPECT_TRUE(fs::is_directory(dir + "/a/b"));
  std::ofstream(dir + "/file") << "x";
  absl::Status st = MakeOutputDirectory("--output_dir", dir + "/file/sub");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--output_dir"), std::string::npos) << st;
  EXPECT_FALSE(MakeOutputDirectory("--output_dir", dir + "/file").ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace superserve
