// Token loading (common/secret.h): what gRPC metadata cannot carry is refused
// where the token is read, naming the file or variable and the byte's
// position but never the token; a directory is not "empty".
#include "common/secret.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "superserve-secret-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& content) {
    const std::string path = dir_ + "/token";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return path;
  }
  std::string dir_;
};

TEST_F(SecretFile, PrintableAsciiWithATrailingNewlineIsAccepted) {
  auto t = ReadSecretFile(Write("Ab0-_.~ +/=x\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "Ab0-_.~ +/=x");
}

TEST_F(SecretFile, BytesGrpcCannotSendAreRefusedNamingFileAndPosition) {
  struct Case {
    std::string content;
    std::string position;  // in the file, from 1
    std::string byte;
  };
  for (const Case& c : {Case{"secA\nsecB\n", "byte 5 ", "0x0a"},
                        Case{"  secA\x01secB", "byte 7 ", "0x01"},
                        Case{"secA\tsecB", "byte 5 ", "0x09"},
                        Case{"s\xc3\xa9" "cA", "byte 2 ", "0xc3"},
                        Case{"secA\x7f", "byte 5 ", "0x7f"}}) {
    const std::string path = Write(c.content);
    auto t = ReadSecretFile(path);
    ASSERT_FALSE(t.ok()) << "accepted a token with byte " << c.byte;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(path));
    EXPECT_THAT(t.status().message(), HasSubstr(c.position + "is " + c.byte));
    EXPECT_THAT(t.status().message(), HasSubstr("printable ASCII"));
    // Never any part of the token.
    EXPECT_THAT(t.status().message(), Not(HasSubstr("secA")));
    EXPECT_THAT(t.status().message(), Not(HasSubstr("secB")));
  }
}

TEST_F(SecretFile, ADirectoryIsSaidToBeOne) {
  auto t = ReadSecretFile(dir_);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr(dir_ + ": is a directory"));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("empty")));
}

TEST(SecretEnv, UnsetOrBlankIsNoTokenAndBadBytesAreRefusedNamingTheVariable) {
  constexpr char kVar[] = "SUPERSERVE_SECRET_TEST_TOKEN";
  unsetenv(kVar);
  auto none = ReadSecretEnv(kVar);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  setenv(kVar, " \n", 1);
  auto blank = ReadSecretEnv(kVar);
  ASSERT_TRUE(blank.ok());
  EXPECT_FALSE(blank->has_value());
  setenv(kVar, "tok3n\n", 1);
  auto good = ReadSecretEnv(kVar);
  ASSERT_TRUE(good.ok() && good->has_value());
  EXPECT_EQ(**good, "tok3n");
  setenv(kVar, "tok3n\nmore", 1);
  auto bad = ReadSecretEnv(kVar);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(std::string("environment variable ") + kVar));
  EXPECT_THAT(bad.status().message(), HasSubstr("byte 6 is 0x0a"));
  EXPECT_THAT(bad.status().message(), Not(HasSubstr("tok3n")));
  unsetenv(kVar);
}

TEST(CheckSecret, NamesTheSourceItIsGiven) {
  EXPECT_TRUE(CheckSecret("fine token", "--admin_token").ok());
  absl::Status s = CheckSecret(std::string("ab\0c", 4), "--admin_token");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("--admin_token: byte 3 is 0x00"));
}

}  // namespace
}  // namespace superserve
