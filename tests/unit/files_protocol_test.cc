// Pure parts of the files API: path normalisation, modes, times, JSON, tar entry names.
#include <catch2/catch.hpp>

#include "common/protocol/files.h"
#include "common/tar/tar_extract.h"

using namespace berth;
using namespace berth::protocol;

TEST_CASE("paths are normalised, '..' and relative paths refused", "[files]") {
  CHECK(NormalizePath("/").value() == "/");
  CHECK(NormalizePath("//a///b/./c/").value() == "/a/b/c");
  CHECK(NormalizePath("/./").value() == "/");
  CHECK(NormalizePath("/a/.hidden/..x").value() == "/a/.hidden/..x");
  CHECK_FALSE(NormalizePath("/a/../b"));
  CHECK_FALSE(NormalizePath("/.."));
  CHECK_FALSE(NormalizePath("a/b"));
  CHECK_FALSE(NormalizePath(""));
  CHECK_FALSE(NormalizePath(std::string("/a\0b", 4)));
  CHECK_FALSE(NormalizePath("/" + std::string(5000, 'x')));
  CHECK(NormalizePath("/a/../b").error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("modes and times", "[files]") {
  CHECK(FormatMode(0644) == "0644");
  CHECK(FormatMode(041755) == "1755");
  CHECK(ParseMode("0644").value() == 0644);
  CHECK(ParseMode("755").value() == 0755);
  CHECK(ParseMode("0o600").value() == 0600);
  CHECK_FALSE(ParseMode("0999"));
  CHECK_FALSE(ParseMode("17777"));
  CHECK_FALSE(ParseMode("rw"));
  CHECK(FormatTime(0) == "1970-01-01T00:00:00.000000000Z");
  int64_t t = 1714564800123456789;
  CHECK(ParseTime(FormatTime(t)).value() == t);
  CHECK(ParseTime("2024-05-01T12:00:00Z").value() == 1714564800LL * 1'000'000'000);
  CHECK_FALSE(ParseTime("2024-05-01 12:00"));
}

// Found by the fuzz corpus under UBSan: a guest's mtime of year -999 overflowed the multiply.
TEST_CASE("file times: signs, spaces, fields out of range and years int64 ns cannot hold are refused",
          "[files]") {
  CHECK(ParseTime("1970-01-01T00:00:00Z").value() == 0);
  CHECK(ParseTime("1969-12-31T23:59:59.5Z").value() == -500'000'000);
  CHECK(ParseTime("2262-04-11T23:47:16Z").value() == 9'223'372'036'000'000'000);
  CHECK_FALSE(ParseTime("-999-01-01T00:00:00Z"));   // what the fuzzer sent
  CHECK_FALSE(ParseTime("+2024-05-01T12:00:00Z"));
  CHECK_FALSE(ParseTime(" 2024-05-01T12:00:00Z"));
  CHECK_FALSE(ParseTime("2024- 5-01T12:00:00Z"));
  CHECK_FALSE(ParseTime("2024-13-01T12:00:00Z"));
  CHECK_FALSE(ParseTime("2024-05-00T12:00:00Z"));
  CHECK_FALSE(ParseTime("2024-05-01T24:00:00Z"));
  CHECK_FALSE(ParseTime("2263-01-01T00:00:00Z"));   // past int64 nanoseconds
  CHECK_FALSE(ParseTime("1000-01-01T00:00:00Z"));
  CHECK_FALSE(ParseTime("2024-05-01T12:00:00"));     // no Z
}

TEST_CASE("file info JSON round-trips", "[files]") {
  FileInfo info;
  info.name = "x";
  info.path = "/a/x";
  info.type = "symlink";
  info.size = 3;
  info.mode = 0777;
  info.mtime_ns = 1714564800000000001;
  info.uid = 1000;
  info.gid = 1000;
  info.owner = "agent";
  info.group = "agent";
  info.link_target = "y";
  auto json = ToJson(info);
  CHECK(json["mode"] == "0777");
  auto back = FileInfoFromJson(json);
  REQUIRE(back);
  CHECK(back->link_target == "y");
  CHECK(back->mtime_ns == info.mtime_ns);
  CHECK(back->owner == "agent");
  CHECK_FALSE(FileInfoFromJson(nlohmann::json{{"path", 1}}));
  CHECK_FALSE(FileInfoFromJson(nlohmann::json::array()));

  WatchEvent ev("created", "/a/b", true);
  auto ev_back = WatchEventFromJson(ToJson(ev));
  REQUIRE(ev_back);
  CHECK(ev_back->is_dir);
  CHECK(ToJson(WatchEvent("keepalive", "", false)).dump() == R"({"type":"keepalive"})");
}

TEST_CASE("tar entry names", "[files][tar]") {
  CHECK(tar::SafeEntryName("./a//b/").value() == "a/b");
  CHECK(tar::SafeEntryName(".").value() == "");
  CHECK(tar::SafeEntryName("a/./b").value() == "a/b");
  CHECK_FALSE(tar::SafeEntryName("../x"));
  CHECK_FALSE(tar::SafeEntryName("a/../../x"));
  CHECK_FALSE(tar::SafeEntryName("/etc/passwd"));
  CHECK(tar::SafeEntryName("..a/b..").value() == "..a/b..");
}
