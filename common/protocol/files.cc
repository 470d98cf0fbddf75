#include "common/protocol/files.h"

#include <limits.h>
#include <time.h>

#include <charconv>
#include <cstdio>

#include <fmt/format.h>

namespace berth::protocol {
namespace {

Error Malformed(std::string_view what) {
  return Error{ErrorCode::kInvalidArgument, fmt::format("malformed {}", what)};
}

// nlohmann throws on type mismatches; the wire is untrusted, so every read goes through here.
template <class T>
bool Read(const nlohmann::json& json, const char* key, T& out) {
  auto it = json.find(key);
  if (it == json.end()) return false;
  try {
    out = it->get<T>();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

nlohmann::json ToJson(const FileInfo& info) {
  nlohmann::json out = {{"name", info.name},   {"path", info.path},
                        {"type", info.type},   {"size", info.size},
                        {"mode", FormatMode(info.mode)},
                        {"mtime", FormatTime(info.mtime_ns)},
                        {"uid", info.uid},     {"gid", info.gid},
                        {"owner", info.owner}, {"group", info.group}};
  if (info.link_target) out["link_target"] = *info.link_target;
  return out;
}

Result<FileInfo> FileInfoFromJson(const nlohmann::json& json) {
  if (!json.is_object()) return Fail(Malformed("file info"));
  FileInfo info;
  std::string mode, mtime;
  if (!Read(json, "path", info.path) || !Read(json, "type", info.type) ||
      !Read(json, "size", info.size) || !Read(json, "mode", mode) ||
      !Read(json, "mtime", mtime)) {
    return Fail(Malformed("file info"));
  }
  Read(json, "name", info.name);
  Read(json, "uid", info.uid);
  Read(json, "gid", info.gid);
  Read(json, "owner", info.owner);
  Read(json, "group", info.group);
  std::string target;
  if (Read(json, "link_target", target)) info.link_target = std::move(target);
  auto parsed_mode = ParseMode(mode);
  if (!parsed_mode) return Fail(parsed_mode.error());
  info.mode = *parsed_mode;
  auto parsed_time = ParseTime(mtime);
  if (!parsed_time) return Fail(parsed_time.error());
  info.mtime_ns = *parsed_time;
  return info;
}

nlohmann::json ToJson(const DirListing& listing) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : listing.entries) entries.push_back(ToJson(e));
  nlohmann::json out = {{"path", listing.path}, {"entries", std::move(entries)}};
  if (listing.truncated) out["truncated"] = true;
  return out;
}

Result<DirListing> DirListingFromJson(const nlohmann::json& json) {
  DirListing listing;
  if (!json.is_object() || !Read(json, "path", listing.path)) return Fail(Malformed("listing"));
  auto it = json.find("entries");
  if (it == json.end() || !it->is_array()) return Fail(Malformed("listing"));
  for (const auto& e : *it) {
    auto info = FileInfoFromJson(e);
    if (!info) return Fail(info.error());
    listing.entries.push_back(std::move(*info));
  }
  Read(json, "truncated", listing.truncated);
  return listing;
}

nlohmann::json ToJson(const WatchEvent& event) {
  nlohmann::json out = {{"type", event.type}};
  if (event.type == "keepalive") return out;
  if (event.type == "error") {
    out["message"] = event.message;
    if (!event.path.empty()) out["path"] = event.path;
    return out;
  }
  out["path"] = event.path;
  out["is_dir"] = event.is_dir;
  return out;
}

Result<WatchEvent> WatchEventFromJson(const nlohmann::json& json) {
  WatchEvent event;
  if (!json.is_object() || !Read(json, "type", event.type)) return Fail(Malformed("watch event"));
  Read(json, "path", event.path);
  Read(json, "is_dir", event.is_dir);
  Read(json, "message", event.message);
  return event;
}

nlohmann::json ToJson(const TarResult& result) {
  return {{"entries", result.entries}, {"bytes", result.bytes}};
}

Result<TarResult> TarResultFromJson(const nlohmann::json& json) {
  TarResult result;
  if (!json.is_object() || !Read(json, "entries", result.entries) ||
      !Read(json, "bytes", result.bytes)) {
    return Fail(Malformed("tar result"));
  }
  return result;
}

Result<std::string> NormalizePath(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("path must be absolute: '{}'", path));
  }
  if (path.find('\0') != std::string_view::npos) {
    return Fail(ErrorCode::kInvalidArgument, "path contains a NUL byte");
  }
  if (path.size() >= PATH_MAX) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("path longer than {} bytes", PATH_MAX - 1));
  }
  std::string out;
  out.reserve(path.size());
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("path may not contain '..': '{}'", path));
    }
    out.push_back('/');
    out.append(part);
  }
  if (out.empty()) out = "/";
  return out;
}

std::string FormatMode(uint32_t mode) { return fmt::format("{:04o}", mode & 07777); }

Result<uint32_t> ParseMode(std::string_view text) {
  if (text.starts_with("0o")) text.remove_prefix(2);
  uint32_t mode = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
  if (text.size() < 3 || text.size() > 4 || ec != std::errc() ||
      ptr != text.data() + text.size() || mode > 07777) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("mode must be octal like 0644, not '{}'", text));
  }
  return mode;
}

std::string FormatTime(int64_t ns) {
  int64_t secs = ns / 1'000'000'000;
  int64_t frac = ns % 1'000'000'000;
  if (frac < 0) {
    frac += 1'000'000'000;
    --secs;
  }
  time_t t = static_cast<time_t>(secs);
  struct tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

Result<int64_t> ParseTime(std::string_view text) {
  // Digits exactly where RFC 3339 has them: sscanf's %d alone takes signs and spaces too.
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd";
  bool shaped = text.size() > kShape.size();
  for (size_t i = 0; shaped && i < kShape.size(); ++i) {
    shaped = kShape[i] == 'd' ? text[i] >= '0' && text[i] <= '9' : text[i] == kShape[i];
  }
  if (!shaped) return Fail(ErrorCode::kInvalidArgument, fmt::format("bad time '{}'", text));
  std::string s(text);
  struct tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("bad time '{}'", text));
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("bad time '{}' (a field out of range)", text));
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t frac = 0;
  size_t pos = static_cast<size_t>(consumed);
  if (pos < s.size() && s[pos] == '.') {
    int digits = 0;
    for (++pos; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos) {
      if (digits++ < 9) frac = frac * 10 + (s[pos] - '0');
    }
    for (; digits < 9; ++digits) frac *= 10;
  }
  if (pos + 1 != s.size() || s[pos] != 'Z') {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("bad time '{}' (UTC 'Z' expected)", text));
  }
  // Nanoseconds in an int64_t reach from 1677 to 2262: a time outside is refused, not wrapped.
  int64_t ns = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(timegm(&tm)), int64_t{1'000'000'000}, &ns) ||
      __builtin_add_overflow(ns, frac, &ns)) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("bad time '{}' (out of range)", text));
  }
  return ns;
}

}  // namespace berth::protocol
