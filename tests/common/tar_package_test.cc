// Tar model packages: archives GNU tar writes parse; every unsafe or
// malformed member is refused naming it; unpacking lands the files in a
// folder named after the manifest's model.
#include "common/tar_package.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/model_repository.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// One ustar member header + content, padded.
std::string Member(const std::string& name, const std::string& content, char type = '0',
                   bool corrupt_checksum = false) {
  std::string h(512, '\0');
  h.replace(0, std::min<size_t>(name.size(), 100), name.substr(0, 100));
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[108], 8, "%07o", 0);
  std::snprintf(&h[116], 8, "%07o", 0);
  std::snprintf(&h[124], 12, "%011o", static_cast<unsigned>(content.size()));
  std::snprintf(&h[136], 12, "%011o", 0);
  h[156] = type;
  h.replace(257, 6, std::string("ustar\0", 6));
  h.replace(263, 2, "00");
  h.replace(148, 8, "        ");
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  if (corrupt_checksum) ++sum;
  std::snprintf(&h[148], 8, "%06o", sum);
  h[155] = ' ';
  std::string padded = content;
  padded.resize((content.size() + 511) / 512 * 512, '\0');
  return h + padded;
}
std::string End() { return std::string(1024, '\0'); }

TEST(TarPackageTest, ParsesFilesAtTheTopOrInOneFolder) {
  auto flat = ParseTarPackage(Member("manifest.json", "{}") + Member("profile.json", "[1]") + End());
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_EQ(flat->size(), 2u);
  EXPECT_EQ((*flat)[1].name, "profile.json");
  EXPECT_EQ((*flat)[1].content, "[1]");
  auto foldered = ParseTarPackage(Member("./fmnist/", "", '5') + Member("./fmnist/a.pt", "xyz") +
                                  Member("fmnist/b.json", std::string(700, 'b')) + End());
  ASSERT_TRUE(foldered.ok()) << foldered.status();
  ASSERT_EQ(foldered->size(), 2u);
  EXPECT_EQ((*foldered)[0].name, "a.pt");
  EXPECT_EQ((*foldered)[1].content.size(), 700u);
}

TEST(TarPackageTest, EveryUnsafeOrMalformedMemberIsRefusedNamingIt) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"symlink", Member("link", "", '2') + End(), "member \"link\": type '2'"},
      {"hard link", Member("hard", "", '1') + End(), "links and special files are refused"},
      {"absolute", Member("/etc/passwd", "x") + End(), "absolute path"},
      {"dot-dot", Member("fmnist/../../x", "x") + End(), "\"..\" in the path"},
      {"nested", Member("a/b/c.json", "x") + End(), "nested more than one folder"},
      {"two folders", Member("a/x", "1") + Member("b/y", "2") + End(), "a second folder"},
      {"twice", Member("x", "1") + Member("a/x", "2") + End(), "listed twice"},
      {"checksum", Member("x", "1", '0', true) + End(), "checksum mismatch"},
      {"truncated content", Member("big", std::string(2000, 'z')).substr(0, 1024),
       "run past the end"},
      {"truncated header", Member("x", "1") + std::string(100, 'q'), "truncated at byte 1024"},
      {"empty", End(), "no files"},
      {"not tar", std::string(1024, 'A'), "no valid checksum"},
  };
  for (const Case& c : cases) {
    auto r = ParseTarPackage(c.bytes);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.says)) << c.what;
  }
  std::string many;
  for (size_t i = 0; i <= kMaxTarMembers; ++i) many += Member("f" + std::to_string(i), "x");
  EXPECT_THAT(std::string(ParseTarPackage(many + End()).status().message()),
              HasSubstr("more than 64 files"));
}

TEST(TarPackageTest, AnArchiveGnuTarWroteUnpacksIntoAValidPackage) {
  const std::string src = std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/tests/router/testdata/emulated_repo";
  const fs::path work = fs::temp_directory_path() / ("superserve-tar-" + std::to_string(::getpid()));
  fs::create_directories(work);
  const std::string tar = (work / "emu.tar").string();
  const std::string cmd = "tar -cf '" + tar + "' -C '" + src + "' emu";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto dir = UnpackTarPackage(tar, (work / "scratch").string());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(fs::path(*dir).filename(), "emu");
  auto entry = LoadModelDirectory(*dir);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(entry->name, "emu");
  EXPECT_EQ(entry->profile.subnets.size(), 4u);
  // Without a manifest there is no name to unpack under.
  const std::string bare = (work / "bare.tar").string();
  std::ofstream(bare, std::ios::binary) << Member("profile.json", "{}") << End();
  auto refused = UnpackTarPackage(bare, (work / "scratch").string());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("no manifest.json"));
  fs::remove_all(work);
}

}  // namespace
}  // namespace superserve
