#include "guest-agent/fs_ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

namespace berth::agent::fs {
namespace {

// Names only, read before sorting: bounds the memory of a listing of a huge directory.
constexpr size_t kMaxNamesRead = 200000;
// Deeper trees are refused by Remove rather than risking running out of descriptors.
constexpr int kMaxRemoveDepth = 256;

std::string UserName(uid_t uid) {
  std::vector<char> buf(4096);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return pw.pw_name;
  }
  return std::to_string(uid);
}

std::string GroupName(gid_t gid) {
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return gr.gr_name;
  }
  return std::to_string(gid);
}

// Name lookups repeat within a listing; NSS can be slow.
struct NameCache {
  std::map<uid_t, std::string> users;
  std::map<gid_t, std::string> groups;
  const std::string& User(uid_t uid) {
    auto it = users.find(uid);
    return it != users.end() ? it->second : users.emplace(uid, UserName(uid)).first->second;
  }
  const std::string& Group(gid_t gid) {
    auto it = groups.find(gid);
    return it != groups.end() ? it->second : groups.emplace(gid, GroupName(gid)).first->second;
  }
};

std::optional<std::string> ReadLinkAt(int dir_fd, const char* name) {
  std::string target(PATH_MAX, '\0');
  ssize_t n = readlinkat(dir_fd, name, target.data(), target.size());
  if (n < 0) return std::nullopt;
  target.resize(static_cast<size_t>(n));
  return target;
}

protocol::FileInfo Fill(const std::string& path, const struct stat& st, NameCache& names) {
  protocol::FileInfo info;
  info.path = path;
  auto slash = path.rfind('/');
  info.name = path == "/" ? "/" : path.substr(slash + 1);
  if (S_ISREG(st.st_mode)) {
    info.type = "file";
  } else if (S_ISDIR(st.st_mode)) {
    info.type = "dir";
  } else if (S_ISLNK(st.st_mode)) {
    info.type = "symlink";
  } else {
    info.type = "other";
  }
  info.size = static_cast<uint64_t>(st.st_size);
  info.mode = st.st_mode & 07777;
  info.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  info.uid = st.st_uid;
  info.gid = st.st_gid;
  info.owner = names.User(st.st_uid);
  info.group = names.Group(st.st_gid);
  return info;
}

std::string Join(const std::string& dir, std::string_view name) {
  return dir == "/" ? "/" + std::string(name) : dir + "/" + std::string(name);
}

std::string Parent(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Removes the entry `name` of `parent_fd`, recursing into real directories only.
Status RemoveAt(int parent_fd, const std::string& name, const std::string& shown, int depth) {
  if (depth > kMaxRemoveDepth) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{}: directory tree deeper than {} levels", shown, kMaxRemoveDepth));
  }
  int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {  // a file or a symlink: remove the entry itself
      if (unlinkat(parent_fd, name.c_str(), 0) != 0) return Fail(ErrnoError(errno, "unlink " + shown));
      return {};
    }
    return Fail(ErrnoError(errno, "open " + shown));
  }
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return Fail(ErrnoError(errno, "opendir " + shown));
  }
  Status status;
  for (;;) {
    errno = 0;
    dirent* entry = readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) status = Fail(ErrnoError(errno, "readdir " + shown));
      break;
    }
    std::string child = entry->d_name;
    if (child == "." || child == "..") continue;
    status = RemoveAt(dirfd(dir), child, Join(shown, child), depth + 1);
    if (!status) break;
  }
  closedir(dir);
  if (!status) return status;
  if (unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0) {
    return Fail(ErrnoError(errno, "rmdir " + shown));
  }
  return {};
}

}  // namespace

protocol::FileInfo InfoFromStat(const std::string& path, const struct stat& st) {
  NameCache names;
  auto info = Fill(path, st, names);
  if (S_ISLNK(st.st_mode)) info.link_target = ReadLinkAt(AT_FDCWD, path.c_str());
  return info;
}

Result<protocol::FileInfo> Stat(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Fail(ErrnoError(errno, "stat " + path));
  return InfoFromStat(path, st);
}

Result<OpenedPath> OpenForRead(const std::string& path) {
  OpenedPath out;
  out.fd.reset(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!out.fd) return Fail(ErrnoError(errno, "open " + path));
  if (fstat(out.fd.get(), &out.st) != 0) return Fail(ErrnoError(errno, "stat " + path));
  return out;
}

Result<protocol::DirListing> ListDir(UniqueFd dir_fd, const std::string& path, size_t cap) {
  protocol::DirListing listing;
  listing.path = path;
  DIR* dir = fdopendir(dir_fd.get());
  if (dir == nullptr) return Fail(ErrnoError(errno, "opendir " + path));
  dir_fd.release();
  std::unique_ptr<DIR, int (*)(DIR*)> closer(dir, closedir);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    dirent* entry = readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) return Fail(ErrnoError(errno, "readdir " + path));
      break;
    }
    std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() >= kMaxNamesRead) {
      listing.truncated = true;
      break;
    }
    names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  if (names.size() > cap) {
    names.resize(cap);
    listing.truncated = true;
  }
  NameCache cache;
  listing.entries.reserve(names.size());
  for (const auto& name : names) {
    struct stat st {};
    if (fstatat(dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
    auto info = Fill(Join(path, name), st, cache);
    if (S_ISLNK(st.st_mode)) info.link_target = ReadLinkAt(dirfd(dir), name.c_str());
    listing.entries.push_back(std::move(info));
  }
  return listing;
}

Result<size_t> ReadAt(int fd, char* buf, size_t size, uint64_t offset) {
  for (;;) {
    ssize_t n = pread(fd, buf, size, static_cast<off_t>(offset));
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Fail(ErrnoError(errno, "read"));
  }
}

Status MakeDirs(const std::string& path, mode_t mode) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return Fail(ErrnoError(ENOTDIR, "mkdir " + path));
  }
  if (errno != ENOENT) return Fail(ErrnoError(errno, "stat " + path));
  if (path != "/") {
    if (auto parent = MakeDirs(Parent(path), mode); !parent) return parent;
  }
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Fail(ErrnoError(errno, "mkdir " + path));
  }
  return {};
}

Result<bool> MakeDir(const std::string& path, bool parents, mode_t mode) {
  if (parents && path != "/") {
    if (auto made = MakeDirs(Parent(path), 0755); !made) return Fail(made.error());
  }
  if (mkdir(path.c_str(), mode) != 0) {
    int err = errno;
    struct stat st {};
    if (err == EEXIST && parents && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return false;
    }
    return Fail(ErrnoError(err, "mkdir " + path));
  }
  // mkdir's mode went through the umask; the caller asked for this one exactly.
  if (chmod(path.c_str(), mode) != 0) return Fail(ErrnoError(errno, "chmod " + path));
  return true;
}

Status Remove(const std::string& path, bool recursive) {
  if (path == "/") return Fail(ErrorCode::kInvalidArgument, "refusing to remove /");
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Fail(ErrnoError(errno, "remove " + path));
  if (!S_ISDIR(st.st_mode)) {
    if (unlink(path.c_str()) != 0) return Fail(ErrnoError(errno, "unlink " + path));
    return {};
  }
  if (!recursive) {
    if (rmdir(path.c_str()) != 0) {
      if (errno == ENOTEMPTY || errno == EEXIST) {
        return Fail(ErrorCode::kFailedPrecondition,
                    fmt::format("{} is a directory that is not empty (use recursive=1)", path));
      }
      return Fail(ErrnoError(errno, "rmdir " + path));
    }
    return {};
  }
  std::string parent = Parent(path);
  UniqueFd parent_fd(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent_fd) return Fail(ErrnoError(errno, "open " + parent));
  return RemoveAt(parent_fd.get(), path.substr(path.rfind('/') + 1), path, 0);
}

Status Move(const std::string& from, const std::string& to, bool overwrite) {
  if (from == "/" || to == "/") return Fail(ErrorCode::kInvalidArgument, "refusing to move /");
  int rc = overwrite ? rename(from.c_str(), to.c_str())
                     : renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
  if (rc == 0) return {};
  int err = errno;
  if (err == EXDEV) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("cannot move {} to {}: they are on different file systems (copy and "
                            "delete instead)",
                            from, to));
  }
  if (err == EEXIST || err == ENOTEMPTY) {
    return Fail(ErrorCode::kAlreadyExists,
                fmt::format("{} exists{}", to, overwrite ? " and is a non-empty directory"
                                                         : " (use overwrite=1)"));
  }
  return Fail(ErrnoError(err, fmt::format("move {} to {}", from, to)));
}

}  // namespace berth::agent::fs
