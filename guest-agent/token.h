// Where the agent's token comes from: a file, an environment variable, or the VM's firmware
// (a fw_cfg entry that libvirt fills from a host file, or an SMBIOS OEM string).
#pragma once

#include <chrono>
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

// fw_cfg first, then the SMBIOS OEM string "berth.token=". The fw_cfg module may load a moment
// after the agent starts, so this waits up to `wait` for either to appear.
Result<std::string> ReadFirmwareToken(std::chrono::milliseconds wait);

}  // namespace berth::agent
