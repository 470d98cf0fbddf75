// The agent's diff (guest-agent/diff.h) on host directories: what it lists as added, changed
// and removed, what it leaves out, its bounds; dpkg's status file; and the wire types both
// sides check (common/protocol/diff.h).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "common/protocol/diff.h"
#include "guest-agent/diff.h"
#include "tests/support/temp_dir.h"

namespace berth::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Sets a file's mtime to `seconds` after the epoch (so two trees' copies can agree or not).
void Touch(const fs::path& path, int64_t seconds) {
  timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

DiffLimits Generous() {
  DiffLimits limits;
  limits.deadline = Clock::now() + std::chrono::seconds(30);
  return limits;
}

std::vector<std::string> Paths(const std::vector<protocol::FileChange>& list) {
  std::vector<std::string> out;
  for (const auto& c : list) out.push_back(c.path);
  return out;
}

TEST_CASE("diff tree: added, removed and changed files, by content when only the mtime differs", "[agent][diff]") {
  testing::TempDir dir("berth-diff");
  fs::path a = dir.path() / "a", b = dir.path() / "b";
  // Unchanged: same bytes, same mtime; and same bytes, another mtime (touched, not changed).
  for (const auto& root : {a, b}) {
    Write(root / "same.txt", "hello");
    Write(root / "touched.txt", "same bytes");
    Write(root / "edited.txt", "version 1");  // same size on both sides
    Write(root / "grown.txt", "short");
    Touch(root / "same.txt", 1000);
    Touch(root / "edited.txt", root == a ? 1000 : 2000);
  }
  Touch(a / "touched.txt", 1000);
  Touch(b / "touched.txt", 3000);
  Write(b / "edited.txt", "version 2");
  Touch(b / "edited.txt", 2000);
  Write(b / "grown.txt", "much longer now");
  Write(a / "gone.txt", "bye");
  Write(b / "new.txt", "12345");
  ::chmod((a / "same.txt").c_str(), 0644);
  ::chmod((b / "same.txt").c_str(), 0644);

  protocol::DiffResult result;
  auto limits = Generous();
  REQUIRE(DiffTree(a, b, "/workspace", limits, result));
  CHECK(result.paths == std::vector<std::string>{"/workspace"});
  CHECK(Paths(result.files.added) == std::vector<std::string>{"/workspace/new.txt"});
  CHECK(result.files.added[0].type == "file");
  CHECK(result.files.added[0].size == 5);
  CHECK(Paths(result.files.removed) == std::vector<std::string>{"/workspace/gone.txt"});
  CHECK(Paths(result.files.changed) == std::vector<std::string>{"/workspace/edited.txt", "/workspace/grown.txt"});
  CHECK(result.files.changed[1].size == 15);
  CHECK(result.files.counts.added == 1);
  CHECK(result.files.counts.changed == 2);
  CHECK(result.files.counts.removed == 1);
  CHECK_FALSE(result.files.truncated);
}

TEST_CASE("diff tree: a directory only on one side is one entry with what it holds counted", "[agent][diff]") {
  testing::TempDir dir("berth-diff");
  fs::path a = dir.path() / "a", b = dir.path() / "b";
  fs::create_directories(a);
  Write(b / "node_modules/left-pad/index.js", "0123456789");
  Write(b / "node_modules/left-pad/package.json", "{}");
  Write(b / "node_modules/.bin/x", "abc");
  Write(a / "old/deep/er/file", "1234");

  protocol::DiffResult result;
  auto limits = Generous();
  REQUIRE(DiffTree(a, b, "/home/agent", limits, result));
  REQUIRE(result.files.added.size() == 1);
  CHECK(result.files.added[0].path == "/home/agent/node_modules");
  CHECK(result.files.added[0].type == "dir");
  CHECK(result.files.added[0].entries == 5);  // left-pad, its 2 files, .bin, x
  CHECK(result.files.added[0].size == 15);
  REQUIRE(result.files.removed.size() == 1);
  CHECK(result.files.removed[0].path == "/home/agent/old");
  CHECK(result.files.removed[0].entries == 3);
  CHECK(result.files.removed[0].size == 4);
}

TEST_CASE("diff tree: links by their target, modes and types; links are never followed", "[agent][diff]") {
  testing::TempDir dir("berth-diff");
  fs::path a = dir.path() / "a", b = dir.path() / "b";
  fs::create_directories(a);
  fs::create_directories(b);
  fs::create_directory_symlink(dir.path(), a / "out");  // outside the tree: not walked
  fs::create_directory_symlink(dir.path(), b / "out");
  fs::create_symlink("one", a / "link");
  fs::create_symlink("two", b / "link");
  Write(a / "script.sh", "echo");
  Write(b / "script.sh", "echo");
  Touch(a / "script.sh", 1000);
  Touch(b / "script.sh", 1000);
  ::chmod((a / "script.sh").c_str(), 0644);
  ::chmod((b / "script.sh").c_str(), 0755);
  Write(a / "became-dir", "x");
  fs::create_directories(b / "became-dir");

  protocol::DiffResult result;
  auto limits = Generous();
  REQUIRE(DiffTree(a, b, "/w", limits, result));
  CHECK(Paths(result.files.changed) == std::vector<std::string>{"/w/became-dir", "/w/link", "/w/script.sh"});
  CHECK(result.files.changed[0].type == "dir");
  CHECK(result.files.changed[1].type == "symlink");
  CHECK(result.files.added.empty());
  CHECK(result.files.removed.empty());
}

TEST_CASE("diff tree: lists stop at max_entries while the counts go on; a missing tree is an empty one",
          "[agent][diff]") {
  testing::TempDir dir("berth-diff");
  fs::path b = dir.path() / "b";
  for (int i = 0; i < 25; ++i) Write(b / ("f" + std::to_string(100 + i)), "x");

  protocol::DiffResult result;
  auto limits = Generous();
  limits.max_entries = 10;
  REQUIRE(DiffTree(dir.path() / "missing", b, "/workspace", limits, result));
  CHECK(result.files.added.size() == 10);
  CHECK(result.files.counts.added == 25);
  CHECK(result.files.truncated);
  CHECK(result.files.added.front().path == "/workspace/f100");
  // And the other way round: everything removed.
  protocol::DiffResult back;
  auto again = Generous();
  REQUIRE(DiffTree(b, fs::path(), "/workspace", again, back));
  CHECK(back.files.counts.removed == 25);
  CHECK(back.files.added.empty());
}

TEST_CASE("diff tree: past its deadline the walk stops and says it was truncated", "[agent][diff]") {
  testing::TempDir dir("berth-diff");
  fs::path b = dir.path() / "b";
  for (int i = 0; i < 300; ++i) Write(b / ("d" + std::to_string(i % 7)) / ("f" + std::to_string(i)), "x");
  protocol::DiffResult result;
  DiffLimits limits;
  limits.deadline = Clock::now() - std::chrono::seconds(1);
  CHECK_FALSE(DiffTree(dir.path() / "a", b, "/workspace", limits, result));
  CHECK(result.files.truncated);
  CHECK(result.files.counts.added < 7);
}

TEST_CASE("diff tree: same size and another mtime past the content budget counts as changed", "[agent][diff]") {
  testing::TempDir dir("berth-diff");
  fs::path a = dir.path() / "a", b = dir.path() / "b";
  Write(a / "big", std::string(4096, 'x'));
  Write(b / "big", std::string(4096, 'x'));
  Touch(a / "big", 1000);
  Touch(b / "big", 2000);
  protocol::DiffResult result;
  auto limits = Generous();
  limits.content_bytes = 100;
  REQUIRE(DiffTree(a, b, "/w", limits, result));
  CHECK(Paths(result.files.changed) == std::vector<std::string>{"/w/big"});
}

constexpr std::string_view kStatusBefore = R"(Package: dpkg
Status: install ok installed
Architecture: amd64
Version: 1.21.22

Package: curl
Status: install ok installed
Architecture: amd64
Description: a tool
 with a continuation line
 Version: 0.0 (not a field)
Version: 7.88.1-10+deb12u5

Package: vim-tiny
Status: install ok installed
Architecture: amd64
Version: 2:9.0.1378-2

Package: oldlib
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libc6
Status: install ok installed
Architecture: i386
Version: 2.36-9
)";

constexpr std::string_view kStatusAfter = R"(Package: dpkg
Status: install ok installed
Architecture: amd64
Version: 1.21.22

Package: curl
Status: hold ok installed
Architecture: amd64
Version: 7.88.1-10+deb12u8

Package: cowsay
Status: install ok installed
Architecture: all
Version: 3.03+dfsg2-8

Package: libc6
Status: install ok installed
Architecture: i386
Version: 2.36-9
)";

TEST_CASE("dpkg status: installed packages by name with their version; foreign architectures named so",
          "[agent][diff]") {
  auto before = ParseDpkgStatus(kStatusBefore);
  CHECK(before == std::map<std::string, std::string>{{"curl", "7.88.1-10+deb12u5"},
                                                     {"dpkg", "1.21.22"},
                                                     {"libc6:i386", "2.36-9"},
                                                     {"vim-tiny", "2:9.0.1378-2"}});
  CHECK(ParseDpkgStatus("").empty());
  CHECK(ParseDpkgStatus("garbage\n\n\n:::\nPackage:\n").empty());
}

TEST_CASE("packages diff: installed, removed and another version", "[agent][diff]") {
  protocol::DiffResult result;
  DiffPackages(ParseDpkgStatus(kStatusBefore), ParseDpkgStatus(kStatusAfter), result);
  REQUIRE(result.packages.installed.size() == 1);
  CHECK(result.packages.installed[0].name == "cowsay");
  CHECK(result.packages.installed[0].to == "3.03+dfsg2-8");
  REQUIRE(result.packages.removed.size() == 1);
  CHECK(result.packages.removed[0].name == "vim-tiny");
  CHECK(result.packages.removed[0].from == "2:9.0.1378-2");
  REQUIRE(result.packages.changed.size() == 1);
  CHECK(result.packages.changed[0].name == "curl");
  CHECK(result.packages.changed[0].from == "7.88.1-10+deb12u5");
  CHECK(result.packages.changed[0].to == "7.88.1-10+deb12u8");
  // The wire form of each list.
  auto json = protocol::ToJson(result);
  CHECK(json["packages"]["installed"][0] == nlohmann::json{{"name", "cowsay"}, {"version", "3.03+dfsg2-8"}});
  CHECK(json["packages"]["removed"][0] == nlohmann::json{{"name", "vim-tiny"}, {"version", "2:9.0.1378-2"}});
  CHECK(json["packages"]["changed"][0] ==
        nlohmann::json{{"name", "curl"}, {"from", "7.88.1-10+deb12u5"}, {"to", "7.88.1-10+deb12u8"}});
}

TEST_CASE("diff wire: a result survives its JSON; a guest's answer past the bounds is refused by field",
          "[agent][diff][protocol]") {
  protocol::DiffResult r;
  r.paths = {"/workspace"};
  r.files.added.push_back({"/workspace/node_modules", "dir", 1234, 56});
  r.files.changed.push_back({"/workspace/a.txt", "file", 3, 0});
  r.files.counts = {1, 1, 0};
  r.files.truncated = true;
  r.packages.installed.push_back({"cowsay", "", "3.03"});
  r.took_ms = 42;
  auto back = protocol::DiffResultFromJson(protocol::ToJson(r));
  REQUIRE(back.has_value());
  CHECK(protocol::ToJson(*back) == protocol::ToJson(r));
  CHECK(back->files.added[0].entries == 56);

  auto refused = [](nlohmann::json j, std::string_view field) {
    auto parsed = protocol::DiffResultFromJson(j);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().code == ErrorCode::kInvalidArgument);
    INFO(parsed.error().message);
    CHECK(parsed.error().message.find(field) != std::string::npos);
  };
  refused({{"files", {{"added", {{{"path", "x"}, {"type", "file"}}}}}}}, "files.added[].path");
  refused({{"files", {{"added", {{{"path", "/" + std::string(5000, 'a')}, {"type", "file"}}}}}}}, "files.added[].path");
  refused({{"files", {{"changed", {{{"path", "/x"}, {"type", "socket"}}}}}}}, "files.changed[].type");
  refused({{"files", {{"removed", {{{"path", "/x"}, {"type", "file"}, {"size", -1}}}}}}}, "files.removed[].size");
  refused({{"files", {{"counts", {{"added", -5}}}}}}, "files.counts.added");
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i <= protocol::kMaxDiffEntries; ++i) many.push_back({{"name", "p"}, {"version", "1"}});
  refused({{"packages", {{"installed", many}}}}, "packages.installed");
  refused({{"packages", {{"changed", {{{"name", "p"}, {"from", "1"}}}}}}}, "packages.changed[].to");
  refused({{"took_ms", "soon"}}, "took_ms");
  refused(nlohmann::json::array(), "not a JSON object");
}

TEST_CASE("diff wire: the request's serials and bounds are checked", "[agent][diff][protocol]") {
  protocol::DiffRequest r;
  r.from = {"berth-from-root", "berth-from-data"};
  r.to = protocol::DiffDisks{"berth-to-root", "berth-to-data"};
  r.max_entries = 50;
  auto back = protocol::DiffRequestFromJson(protocol::ToJson(r));
  REQUIRE(back.has_value());
  CHECK(back->to->data == "berth-to-data");
  CHECK(back->max_entries == 50);
  auto bad = [](nlohmann::json j) { return !protocol::DiffRequestFromJson(j).has_value(); };
  CHECK(bad({{"from", {{"root", "../etc"}, {"data", "x"}}}}));
  CHECK(bad({{"from", {{"root", "berth-a-serial-that-is-too-long"}, {"data", "x"}}}}));
  CHECK(bad({{"from", {{"root", "a"}}}}));
  CHECK(bad({{"from", {{"root", "a"}, {"data", "b"}}}, {"max_entries", 0}}));
  CHECK(bad({{"from", {{"root", "a"}, {"data", "b"}}}, {"budget_ms", 10}}));
  CHECK(bad({{"from", {{"root", "a"}, {"data", "b"}}}, {"mount", "/"}}));
  CHECK_FALSE(bad({{"from", {{"root", "a"}, {"data", "b"}}}, {"to", nullptr}}));
}

}  // namespace
}  // namespace berth::agent
