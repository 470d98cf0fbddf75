// Where berth-agent gets its token: the file, the environment, the firmware (fw_cfg, then the
// SMBIOS OEM string), in that order, with the first configured source deciding. The firmware
// is stood in for by files in a temporary directory (FirmwarePaths).
#include <catch2/catch.hpp>

#include <fstream>

#include "guest-agent/token.h"
#include "tests/support/temp_dir.h"

namespace berth::agent {
namespace {

using namespace std::chrono_literals;

const std::string kFileToken = "file-token-0123456789";
const std::string kEnvToken = "env-token-0123456789";
const std::string kFwCfgToken = "fwcfg-token-0123456789";
const std::string kOemToken = "oem-token-0123456789";

// An SMBIOS type 11 structure as /sys/firmware/dmi/entries/11-0/raw holds it: type, length (5),
// handle, string count, then the NUL-terminated strings and one more NUL.
std::string OemStructure(const std::vector<std::string>& strings) {
  std::string raw = {11, 5, 0x2a, 0x00, static_cast<char>(strings.size())};
  for (const auto& s : strings) raw += s + '\0';
  raw += '\0';
  return raw;
}

void Write(const std::filesystem::path& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

// A firmware stand-in with either source present or absent, and no modprobe.
struct Firmware {
  testing::TempDir dir{"berth-token"};
  FirmwarePaths paths;
  Firmware(bool fw_cfg, bool oem) {
    paths.fw_cfg = (dir.path() / "fw_cfg_raw").string();
    paths.smbios_oem = (dir.path() / "oem_raw").string();
    paths.load_module = false;
    if (fw_cfg) Write(paths.fw_cfg, kFwCfgToken + "\n");
    if (oem) Write(paths.smbios_oem, OemStructure({"other=1", "berth.token=" + kOemToken}));
  }
};

TokenSources Sources(const Firmware& fw, std::string source) {
  TokenSources s;
  s.source = std::move(source);
  s.firmware = fw.paths;
  s.firmware_wait = 0ms;
  return s;
}

TEST_CASE("FindOemString finds berth.token among the OEM strings and nothing else",
          "[agent][token]") {
  auto raw = OemStructure({"berth.tokenx=no", "other=1", "berth.token=" + kOemToken, "z"});
  auto found = FindOemString(raw, "berth.token");
  REQUIRE(found);
  CHECK(*found == kOemToken);
  auto missing = FindOemString(OemStructure({"berth.tokenx=no", "berth.token"}), "berth.token");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
  // Not a type 11 structure, or cut short: not found, never a read past the end.
  std::string wrong_type = raw;
  wrong_type[0] = 1;
  CHECK_FALSE(FindOemString(wrong_type, "berth.token"));
  CHECK_FALSE(FindOemString(raw.substr(0, 4), "berth.token"));
  std::string unterminated = std::string{11, 5, 0, 0, 1} + "berth.token=" + kOemToken;
  auto cut = FindOemString(unterminated, "berth.token");
  REQUIRE(cut);
  CHECK(*cut == kOemToken);
  std::string length_past_end = {11, 100, 0, 0, 1};
  CHECK_FALSE(FindOemString(length_past_end, "berth.token"));
}

TEST_CASE("the firmware token: fw_cfg first, then the SMBIOS OEM string", "[agent][token]") {
  Firmware both(true, true);
  auto fw_cfg = ReadFirmwareToken(0ms, both.paths);
  REQUIRE(fw_cfg);
  CHECK(*fw_cfg == kFwCfgToken);  // trimmed

  Firmware oem_only(false, true);
  auto oem = ReadFirmwareToken(0ms, oem_only.paths);
  REQUIRE(oem);
  CHECK(*oem == kOemToken);

  Firmware short_oem(false, false);
  Write(short_oem.paths.smbios_oem, OemStructure({"berth.token=short"}));
  auto too_short = ReadFirmwareToken(0ms, short_oem.paths);
  REQUIRE_FALSE(too_short);
  CHECK(too_short.error().code == ErrorCode::kInvalidArgument);
  CHECK(too_short.error().message.find("SMBIOS OEM string") != std::string::npos);

  Firmware none(false, false);
  auto nothing = ReadFirmwareToken(0ms, none.paths);
  REQUIRE_FALSE(nothing);
  CHECK(nothing.error().code == ErrorCode::kNotFound);
  CHECK(nothing.error().message.find(none.paths.fw_cfg) != std::string::npos);
}

TEST_CASE("token sources: auto takes the file, then the environment, then the firmware",
          "[agent][token]") {
  Firmware fw(true, true);
  std::string file = (fw.dir.path() / "token").string();
  Write(file, "  " + kFileToken + "\n");

  auto s = Sources(fw, "auto");
  s.file = file;
  s.env = kEnvToken;
  auto all = ChooseToken(s);
  REQUIRE(all);
  CHECK(*all == kFileToken);

  s.file.clear();
  auto env = ChooseToken(s);
  REQUIRE(env);
  CHECK(*env == kEnvToken);

  s.env.reset();
  auto firmware = ChooseToken(s);
  REQUIRE(firmware);
  CHECK(*firmware == kFwCfgToken);

  Firmware oem_only(false, true);
  auto oem = ChooseToken(Sources(oem_only, "auto"));
  REQUIRE(oem);
  CHECK(*oem == kOemToken);
}

TEST_CASE("token sources: the first configured source decides, even when it fails",
          "[agent][token]") {
  Firmware fw(true, true);
  auto s = Sources(fw, "auto");
  s.file = (fw.dir.path() / "missing").string();
  s.env = kEnvToken;
  auto missing = ChooseToken(s);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("missing") != std::string::npos);

  s.file.clear();
  s.env = "short";
  auto too_short = ChooseToken(s);
  REQUIRE_FALSE(too_short);
  CHECK(too_short.error().code == ErrorCode::kInvalidArgument);
  CHECK(too_short.error().message.find("BERTH_AGENT_TOKEN") != std::string::npos);
}

TEST_CASE("token sources: an explicit source uses only that source", "[agent][token]") {
  Firmware fw(true, true);
  std::string file = (fw.dir.path() / "token").string();
  Write(file, kFileToken);
  auto s = Sources(fw, "firmware");
  s.file = file;
  s.env = kEnvToken;
  auto firmware = ChooseToken(s);
  REQUIRE(firmware);
  CHECK(*firmware == kFwCfgToken);

  s.source = "env";
  auto env = ChooseToken(s);
  REQUIRE(env);
  CHECK(*env == kEnvToken);
  s.env.reset();
  auto unset = ChooseToken(s);
  REQUIRE_FALSE(unset);
  CHECK(unset.error().message == "$BERTH_AGENT_TOKEN is not set");

  s.source = "file";
  auto from_file = ChooseToken(s);
  REQUIRE(from_file);
  CHECK(*from_file == kFileToken);
  s.file.clear();
  auto no_file = ChooseToken(s);
  REQUIRE_FALSE(no_file);
  CHECK(no_file.error().message == "--token-source file needs --token-file");

  s.source = "carrier-pigeon";
  auto unknown = ChooseToken(s);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace berth::agent
