// Model version digests (router and worker compare them) and secret files.
#include "common/model_digest.h"

#include <filesystem>
#include <fstream>

#include "common/secret.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "superserve-digest-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void Write(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
}

TEST(Sha256Test, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ModelDigestTest, ProfileAndCheckpointAreDigestedApart) {
  TempDir a, b;
  Write(fs::path(a.path()) / "profile.json", "{\"model\":\"m\"}");
  Write(fs::path(b.path()) / "profile.json", "{\"model\":\"m\"}");
  auto da = DigestModelDirectory(a.path());
  ASSERT_TRUE(da.ok()) << da.status();
  EXPECT_EQ(da->profile, Sha256Hex("{\"model\":\"m\"}"));
  EXPECT_EQ(da->checkpoint, "") << "a directory with only the profile has no checkpoint";

  Write(fs::path(b.path()) / "weights" / "w.bin", "0123");
  auto db = DigestModelDirectory(b.path());
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db->profile, da->profile);
  EXPECT_EQ(db->checkpoint.size(), 64u);

  Write(fs::path(b.path()) / "weights" / "w.bin", "0124");  // one byte differs
  auto changed = DigestModelDirectory(b.path());
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->checkpoint, db->checkpoint);

  Write(fs::path(a.path()) / "profile.json", "{\"model\":\"m\" }");
  auto other_profile = DigestModelDirectory(a.path());
  ASSERT_TRUE(other_profile.ok());
  EXPECT_NE(other_profile->profile, da->profile);
}

TEST(ModelDigestTest, MissingProfileIsAnError) {
  TempDir a;
  EXPECT_FALSE(DigestModelDirectory(a.path()).ok());
}

TEST(SecretTest, ReadsTrimmedAndRefusesEmptyOrMissingFiles) {
  TempDir d;
  Write(fs::path(d.path()) / "t", "  s3cret\n");
  auto t = ReadSecretFile(d.path() + "/t");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "s3cret");
  Write(fs::path(d.path()) / "empty", "\n");
  auto empty = ReadSecretFile(d.path() + "/empty");
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
  EXPECT_FALSE(ReadSecretFile(d.path() + "/missing").ok());
}

TEST(SecretTest, SameSecret) {
  EXPECT_TRUE(SameSecret("abc", "abc"));
  EXPECT_FALSE(SameSecret("abc", "abd"));
  EXPECT_FALSE(SameSecret("abc", "ab"));
  EXPECT_FALSE(SameSecret("ab", "abc"));
  EXPECT_FALSE(SameSecret("", "a"));
  EXPECT_TRUE(SameSecret("", ""));
}

}  // namespace
}  // namespace superserve
