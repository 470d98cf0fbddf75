#include "guest-agent/token.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace berth::agent {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr size_t kMaxTokenLength = 4096;

std::string Trim(std::string s) {
  auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && is_space(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return s.substr(i);
}

Result<std::string> Validate(std::string token, std::string_view source) {
  token = Trim(std::move(token));
  if (token.size() < kMinTokenLength) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("token from {} is shorter than {} characters", source,
                            kMinTokenLength));
  }
  return token;
}

}  // namespace

Result<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(ErrnoError(errno, "open token file " + path));
  std::string data(kMaxTokenLength + 1, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  if (data.size() > kMaxTokenLength) {
    return Fail(ErrorCode::kInvalidArgument, "token file " + path + " is too large");
  }
  return Validate(std::move(data), path);
}

Result<std::string> FindOemString(std::string_view raw, std::string_view key) {
  // Header: type (11), length, handle (2 bytes), string count; then NUL-terminated strings
  // after `length` bytes, ending with an extra NUL.
  if (raw.size() < 5 || static_cast<unsigned char>(raw[0]) != 11) {
    return Fail(ErrorCode::kNotFound, "no SMBIOS OEM strings");
  }
  size_t pos = static_cast<unsigned char>(raw[1]);
  while (pos < raw.size() && raw[pos] != '\0') {
    size_t end = raw.find('\0', pos);
    if (end == std::string_view::npos) end = raw.size();
    std::string_view entry = raw.substr(pos, end - pos);
    if (entry.size() > key.size() && entry.starts_with(key) && entry[key.size()] == '=') {
      return std::string(entry.substr(key.size() + 1));
    }
    pos = end + 1;
  }
  return Fail(ErrorCode::kNotFound, fmt::format("no OEM string '{}'", key));
}

Result<std::string> ReadFirmwareToken(std::chrono::milliseconds wait, const FirmwarePaths& paths) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  bool tried_modprobe = !paths.load_module;
  for (;;) {
    struct stat st {};
    if (::stat(paths.fw_cfg.c_str(), &st) == 0) return ReadTokenFile(paths.fw_cfg);
    std::ifstream oem(paths.smbios_oem, std::ios::binary);
    if (oem) {
      std::stringstream ss;
      ss << oem.rdbuf();
      auto token = FindOemString(ss.str(), "berth.token");
      if (token) return Validate(*token, "SMBIOS OEM string");
    }
    if (!tried_modprobe) {
      tried_modprobe = true;
      // The fw_cfg sysfs driver is a module in Debian's kernel; load it if nobody has yet.
      if (std::system("modprobe qemu_fw_cfg >/dev/null 2>&1") != 0) {
        // Not fatal: it may be built in, absent, or the SMBIOS fallback may be in use.
      }
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(ErrorCode::kNotFound,
                  fmt::format("no token in firmware: neither {} nor an SMBIOS OEM string "
                              "berth.token=…",
                              paths.fw_cfg));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<std::string> ChooseToken(const TokenSources& s) {
  bool any = s.source == "auto";
  if (!any && s.source != "file" && s.source != "env" && s.source != "firmware") {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("unknown token source '{}' (auto, file, env or firmware)", s.source));
  }
  if ((any || s.source == "file") && !s.file.empty()) return ReadTokenFile(s.file);
  if (s.source == "file") {
    return Fail(ErrorCode::kInvalidArgument, "--token-source file needs --token-file");
  }
  if ((any || s.source == "env") && s.env) {
    // As given: berthd compares it byte for byte.
    if (s.env->size() < kMinTokenLength) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("token from ${} is shorter than {} characters", kTokenEnv,
                              kMinTokenLength));
    }
    return *s.env;
  }
  if (s.source == "env") {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("${} is not set", kTokenEnv));
  }
  return ReadFirmwareToken(s.firmware_wait, s.firmware);
}

}  // namespace berth::agent
