// Wire types of the files API, shared by berth-agent, berthd and the clients. Pure: JSON in and
// out, path validation, no I/O. `{path}` is an absolute guest path, percent-encoded in the URL.
//
//   GET    /v1/files/{path}                  file -> bytes (Range: bytes=a-b -> 206);
//                                            directory -> DirListing
//   GET    /v1/files/{path}?stat=1           -> FileInfo (lstat)
//   GET    /v1/files/{path}?archive=tar      directory -> tar stream (chunked)
//   GET    /v1/files/{path}?watch=1[&recursive=1]   directory -> NDJSON WatchEvent stream
//   PUT    /v1/files/{path}[?mode=0644][&overwrite=0]   body -> 201|200 FileInfo
//   PUT    /v1/files/{path}?archive=tar      tar body -> 200 TarResult
//   DELETE /v1/files/{path}[?recursive=1]    -> 200 {"path":..., "deleted":true}
//   POST   /v1/files/{path}?op=mkdir[&parents=1][&mode=0755]      -> 201|200 FileInfo
//   POST   /v1/files/{path}?op=move&to=/dest[&overwrite=1]        -> 200 FileInfo of dest
// Every call takes ?user=NAME (default: the agent's default user).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::protocol {

// The stat of one path (lstat: a symlink is reported as itself).
struct FileInfo {
  FileInfo() = default;
  std::string name;   // last path component ("/" for the root)
  std::string path;   // absolute, normalised
  std::string type;   // "file" | "dir" | "symlink" | "other"
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits incl. setuid/setgid/sticky; "0644" on the wire
  int64_t mtime_ns = 0;  // since the epoch; ISO 8601 UTC on the wire ("…T…Z", nanoseconds)
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string owner;  // user name, or the number when unknown
  std::string group;  // group name, or the number when unknown
  std::optional<std::string> link_target;  // symlinks only
};

nlohmann::json ToJson(const FileInfo& info);
Result<FileInfo> FileInfoFromJson(const nlohmann::json& json);

// A directory listing, sorted by name. Above the server's cap (10000) `truncated` is set.
struct DirListing {
  DirListing() = default;
  std::string path;
  std::vector<FileInfo> entries;
  bool truncated = false;
};

nlohmann::json ToJson(const DirListing& listing);
Result<DirListing> DirListingFromJson(const nlohmann::json& json);

// One line of a watch stream: "created" | "modified" | "deleted" | "moved_from" | "moved_to"
// with path and is_dir; "keepalive"; "error" with a message (the watch goes on, degraded, e.g.
// when the cap on watched directories is reached or the kernel queue overflowed).
struct WatchEvent {
  WatchEvent() = default;
  WatchEvent(std::string t, std::string p, bool d) : type(std::move(t)), path(std::move(p)), is_dir(d) {}
  std::string type;
  std::string path;
  bool is_dir = false;
  std::string message;  // "error" only
};

nlohmann::json ToJson(const WatchEvent& event);
Result<WatchEvent> WatchEventFromJson(const nlohmann::json& json);

// The answer of a tar upload: entries written and bytes of file data.
struct TarResult {
  TarResult() = default;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  // DownloadTar only (not on the wire): entries the host left out (FIFOs).
  uint64_t skipped = 0;
};

nlohmann::json ToJson(const TarResult& result);
Result<TarResult> TarResultFromJson(const nlohmann::json& json);

// Validates and normalises an absolute guest path: must start with '/', no NUL, at most
// PATH_MAX bytes, no ".." component (invalid_argument); duplicate slashes and "." components
// are dropped, a trailing slash too (except for "/").
Result<std::string> NormalizePath(std::string_view path);

// "0644" <-> 0644. Accepts 3 or 4 octal digits (an optional leading "0o"), at most 07777.
std::string FormatMode(uint32_t mode);
Result<uint32_t> ParseMode(std::string_view text);

// ISO 8601 UTC with nanoseconds ("2024-05-01T12:00:00.123456789Z") and back.
std::string FormatTime(int64_t ns_since_epoch);
Result<int64_t> ParseTime(std::string_view text);

}  // namespace berth::protocol
