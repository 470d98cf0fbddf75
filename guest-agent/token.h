// Where the agent's token comes from: a file, an environment variable, or the VM's firmware
// (a fw_cfg entry that libvirt fills from a host file, or an SMBIOS OEM string).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/error.h"

namespace berth::agent {

inline constexpr char kFwCfgTokenPath[] = "/sys/firmware/qemu_fw_cfg/by_name/opt/berth/token/raw";
inline constexpr char kSmbiosOemPath[] = "/sys/firmware/dmi/entries/11-0/raw";
inline constexpr char kTokenEnv[] = "BERTH_AGENT_TOKEN";

// Reads a token file; surrounding whitespace is trimmed. Tokens shorter than 16 characters are
// refused: a guessable token is worse than none.
Result<std::string> ReadTokenFile(const std::string& path);

// Parses an SMBIOS type 11 (OEM strings) structure and returns the value of "key=value".
Result<std::string> FindOemString(std::string_view raw, std::string_view key);

// Where the firmware's token is: the real sysfs files, or a test's own.
struct FirmwarePaths {
  std::string fw_cfg = kFwCfgTokenPath;
  std::string smbios_oem = kSmbiosOemPath;
  bool load_module = true;  // modprobe qemu_fw_cfg once when neither file is there yet
};

// fw_cfg first, then the SMBIOS OEM string "berth.token=". The fw_cfg module may load a moment
// after the agent starts, so this waits up to `wait` for either to appear. Blocks the caller.
Result<std::string> ReadFirmwareToken(std::chrono::milliseconds wait,
                                      const FirmwarePaths& paths = {});

// What the agent was told about its token: its flags and environment.
struct TokenSources {
  std::string source = "auto";     // --token-source: auto | file | env | firmware
  std::string file;                // --token-file, "" when not given
  std::optional<std::string> env;  // $BERTH_AGENT_TOKEN when set
  FirmwarePaths firmware;
  std::chrono::milliseconds firmware_wait{30000};  // the fw_cfg module may load late in boot
};

// The token from the first source that `source` allows and that is configured, in this
// order: the file (when given), the environment variable (when set), the firmware (fw_cfg,
// then SMBIOS). The first configured source decides: a file that cannot be read or a token
// that is too short is an error, never a reason to try the next source. Blocks up to
// `firmware_wait` when it reads the firmware.
Result<std::string> ChooseToken(const TokenSources& sources);

}  // namespace berth::agent
