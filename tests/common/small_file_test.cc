#include "common/small_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("small-file-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SmallFileTest, ReadsARegularFileAndOneBehindASymlink) {
  std::ofstream(dir_ / "a.json") << "{\"x\": 1}";
  fs::create_symlink(dir_ / "a.json", dir_ / "link.json");
  for (const char* name : {"a.json", "link.json"}) {
    auto text = ReadSmallFile((dir_ / name).string(), 100);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "{\"x\": 1}");
  }
  EXPECT_TRUE(CheckRegularFile((dir_ / "link.json").string()).ok());
}

TEST_F(SmallFileTest, RefusesAFileLargerThanItsBound) {
  std::ofstream(dir_ / "big") << std::string(101, 'x');
  auto text = ReadSmallFile((dir_ / "big").string(), 100);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("101 bytes, more than the 100"));
}

// A FIFO would block the reader forever, a device never ends: both are
// refused at once (this test would hang, not fail, without the check).
TEST_F(SmallFileTest, RefusesFifosDevicesAndDirectoriesWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", dir_ / "zero");
  struct Case {
    std::string path;
    std::string kind;
  };
  for (const Case& c : {Case{(dir_ / "fifo").string(), "a FIFO"},
                        Case{(dir_ / "zero").string(), "a character device"},
                        Case{dir_.string(), "a directory"}}) {
    auto text = ReadSmallFile(c.path, 1 << 20);
    ASSERT_FALSE(text.ok()) << c.path;
    EXPECT_THAT(text.status().message(), HasSubstr(c.path));
    EXPECT_THAT(text.status().message(), HasSubstr("is " + c.kind + ", not a regular file"));
    EXPECT_FALSE(CheckRegularFile(c.path).ok()) << c.path;
  }
}

TEST_F(SmallFileTest, AMissingFileIsNotFoundAndALoopSaysSo) {
  auto missing = ReadSmallFile((dir_ / "nope").string(), 100);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  fs::create_symlink(dir_ / "loopB", dir_ / "loopA");
  fs::create_symlink(dir_ / "loopA", dir_ / "loopB");
  auto loop = ReadSmallFile((dir_ / "loopA").string(), 100);
  ASSERT_FALSE(loop.ok());
  EXPECT_THAT(loop.status().message(), HasSubstr("symbolic links"));
}

}  // namespace
}  // namespace superserve
