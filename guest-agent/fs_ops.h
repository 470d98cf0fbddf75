// Blocking file-system operations behind the files API. Each runs on a blocking-pool thread
// with the requesting user's fs credentials already switched (ScopedFsCredentials), so the
// kernel checks permissions, and owns new files, as that user. Paths are absolute and
// normalised (protocol::NormalizePath). Errors are errno-based (ErrnoError).
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "common/error.h"
#include "common/protocol/files.h"
#include "common/unique.h"

namespace berth::agent::fs {

// Directory listings stop at this many entries ("truncated": true).
inline constexpr size_t kMaxListEntries = 10000;

// The stat object for `st` found at `path` (link_target read for symlinks).
protocol::FileInfo InfoFromStat(const std::string& path, const struct stat& st);
// lstat(path) as a FileInfo.
Result<protocol::FileInfo> Stat(const std::string& path);

// open(path) for reading (symlinks followed, FIFOs never block) and its fstat.
struct OpenedPath {
  UniqueFd fd;
  struct stat st {};
};
Result<OpenedPath> OpenForRead(const std::string& path);

// The entries of the directory open at `dir_fd` (consumed), sorted by name, at most `cap`.
Result<protocol::DirListing> ListDir(UniqueFd dir_fd, const std::string& path,
                                     size_t cap = kMaxListEntries);

// pread of up to `size` bytes at `offset`; 0 at the end of the file.
Result<size_t> ReadAt(int fd, char* buf, size_t size, uint64_t offset);

// mkdir -p: creates `path` and its missing parents with `mode`; existing directories are fine.
Status MakeDirs(const std::string& path, mode_t mode);
// mkdir; with `parents` like MakeDirs but already_exists only when `path` is not a directory.
// Returns whether it was created. The mode is applied exactly (chmod), umask aside.
Result<bool> MakeDir(const std::string& path, bool parents, mode_t mode);

// Removes a file, symlink or empty directory; with `recursive` a whole tree, descending only
// through real directories (symlinks are removed, never followed). "/" is refused.
Status Remove(const std::string& path, bool recursive);

// rename(); without `overwrite` already_exists when `to` exists. Cross-device moves are
// refused with invalid_argument (no copy).
Status Move(const std::string& from, const std::string& to, bool overwrite);

}  // namespace berth::agent::fs
