// Directory archives both ways, and archives that try to write outside their target.
#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>

#include "common/client/files.h"
#include "tests/integration/files_test_util.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_agent.h"

using namespace berth;
using berth::http::bhttp::verb;
using testing::DescribeTree;
using testing::WriteFile;

namespace {

constexpr std::string_view kScope = "/v1";

struct TarEntry {
  TarEntry(std::string n, unsigned t, std::string d = {}, std::string l = {}, std::string h = {})
      : name(std::move(n)), type(t), data(std::move(d)), symlink(std::move(l)), hardlink(std::move(h)) {}
  std::string name;
  unsigned type;  // AE_IFREG, AE_IFDIR, AE_IFLNK
  std::string data;
  std::string symlink;
  std::string hardlink;
};

// A tar built entry by entry, names exactly as given (libarchive's writer does not sanitise).
std::string MakeTar(const std::vector<TarEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  std::vector<char> buf(4 << 20);
  size_t used = 0;
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const auto& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    if (!e.hardlink.empty()) {
      archive_entry_set_hardlink(entry, e.hardlink.c_str());
      archive_entry_set_size(entry, 0);
    } else {
      archive_entry_set_filetype(entry, e.type);
      archive_entry_set_perm(entry, e.type == AE_IFDIR ? 0755 : 0644);
      archive_entry_set_size(entry, static_cast<la_int64_t>(e.data.size()));
      if (e.type == AE_IFLNK) archive_entry_set_symlink(entry, e.symlink.c_str());
    }
    REQUIRE(archive_write_header(a, entry) == ARCHIVE_OK);
    if (!e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}


}  // namespace

TEST_CASE("a directory round-trips through tar both ways", "[files][tar]") {
  testing::TestAgent agent;
  testing::WorldDir world;
  std::string src = world / "src";
  WriteFile(src + "/a.txt", "hello");
  WriteFile(src + "/bin/run.sh", "#!/bin/sh\necho hi\n", 0755);
  WriteFile(src + "/deep/er/still/file", testing::RandomBytes(300 * 1024, 3), 0600);
  WriteFile(src + "/big.bin", testing::RandomBytes(5 * 1024 * 1024 + 3, 4));
  std::filesystem::create_directories(src + "/empty");
  ::chmod((src + "/empty").c_str(), 0700);
  std::filesystem::create_symlink("a.txt", src + "/link");
  std::filesystem::create_symlink("/etc/hostname", src + "/abs-link");
  auto expected = DescribeTree(src);
  REQUIRE(expected.size() == 11);

  for (auto api : {agent.Client(), agent.TcpClient()}) {
    std::string remote = world / fmt::format("remote-{}/nested", api.endpoint().port);
    auto up = client::UploadTar(api, kScope, src, remote);
    REQUIRE(up);
    CHECK(up->entries == expected.size());
    CHECK(up->bytes == 5 + 18 + 300 * 1024 + 5 * 1024 * 1024 + 3);
    CHECK(DescribeTree(remote) == expected);

    std::string down = world / fmt::format("down-{}", api.endpoint().port);
    auto got = client::DownloadTar(api, kScope, remote, down);
    REQUIRE(got);
    CHECK(got->entries == expected.size());
    CHECK(DescribeTree(down) == expected);
  }

  // Tar of a file is refused before any byte is sent.
  auto api = agent.Client();
  auto of_file = api.Request(verb::get, client::FilesTarget(kScope, src + "/a.txt", {{"archive", "tar"}}));
  REQUIRE(of_file);
  CHECK(of_file->status == 409);
  auto missing = client::DownloadTar(api, kScope, world / "nope", world / "nope-down");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
}

TEST_CASE("malicious archives are refused and write nothing outside", "[files][tar]") {
  testing::TestAgent agent;
  auto api = agent.Client();
  testing::WorldDir world;
  testing::WorldDir outside;
  WriteFile(outside / "secret", "secret");
  std::string target = world / "target";

  struct Case {
    std::string label;
    std::vector<TarEntry> entries;
    std::string named;  // the entry the error must name
  };
  std::vector<Case> cases = {
      {"dotdot", {TarEntry("ok.txt", AE_IFREG, "fine"), TarEntry("../escape", AE_IFREG, "x")},
       "../escape"},
      {"absolute", {TarEntry(outside / "abs", AE_IFREG, "x")}, outside / "abs"},
      {"through symlink",
       {TarEntry("link", AE_IFLNK, "", outside.path().string()),
        TarEntry("link/passwd", AE_IFREG, "owned")},
       "link/passwd"},
      {"hard link to /etc/passwd", {TarEntry("hl", AE_IFREG, "", "", "/etc/passwd")}, "hl"},
      {"hard link up", {TarEntry("hl2", AE_IFREG, "", "", "../../secret")}, "hl2"},
  };
  for (const auto& c : cases) {
    SECTION(c.label) {
      std::string body = MakeTar(c.entries);
      auto res = api.Request(verb::put, client::FilesTarget(kScope, target, {{"archive", "tar"}}),
                             body, "application/x-tar");
      REQUIRE(res);
      CHECK(res->status == 400);
      CHECK(res->body.find(c.named) != std::string::npos);
      CHECK_FALSE(std::filesystem::exists(world / "escape"));
      CHECK_FALSE(std::filesystem::exists(outside / "abs"));
      CHECK_FALSE(std::filesystem::exists(outside / "passwd"));
      CHECK_FALSE(std::filesystem::exists(target + "/hl"));
      CHECK_FALSE(std::filesystem::exists(target + "/hl2"));
      CHECK(testing::ReadFile(outside / "secret") == "secret");
      std::vector<std::string> names;
      for (const auto& e : std::filesystem::directory_iterator(outside.path())) {
        names.push_back(e.path().filename().string());
      }
      CHECK(names == std::vector<std::string>{"secret"});
    }
  }

  SECTION("a well-formed archive through the Content-Type alone") {
    std::string body = MakeTar({TarEntry("d", AE_IFDIR), TarEntry("d/f", AE_IFREG, "data"),
                                TarEntry("d/h", AE_IFREG, "", "", "d/f")});
    auto res = api.Request(verb::put, client::FilesTarget(kScope, target), body,
                           "application/x-tar");
    REQUIRE(res);
    CHECK(res->status == 200);
    auto json = nlohmann::json::parse(res->body);
    CHECK(json["entries"] == 3);
    CHECK(json["bytes"] == 4);
    CHECK(testing::ReadFile(target + "/d/h") == "data");
  }

  SECTION("garbage is a 400, not a hang") {
    auto res = api.Request(verb::put, client::FilesTarget(kScope, target, {{"archive", "tar"}}),
                           std::string(10000, 'z'), "application/x-tar");
    REQUIRE(res);
    CHECK(res->status == 400);
  }
}
