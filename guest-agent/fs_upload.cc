#include "guest-agent/fs_upload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "guest-agent/fs_ops.h"

namespace berth::agent::fs {
namespace {

std::string RandomSuffix() {
  uint64_t bits = 0;
  if (getrandom(&bits, sizeof(bits), 0) != sizeof(bits)) {
    bits = static_cast<uint64_t>(getpid()) ^ static_cast<uint64_t>(time(nullptr));
  }
  return fmt::format("{:016x}", bits);
}

std::string TempPath(const std::string& dir) {
  return (dir == "/" ? "" : dir) + "/.berth-upload-" + RandomSuffix();
}

}  // namespace

AtomicUpload::AtomicUpload(AtomicUpload&& other) noexcept
    : target_(std::move(other.target_)),
      dir_(std::move(other.dir_)),
      temp_name_(std::exchange(other.temp_name_, {})),
      fd_(std::move(other.fd_)),
      mode_(other.mode_),
      overwrite_(other.overwrite_),
      done_(std::exchange(other.done_, true)),
      written_(other.written_) {}

AtomicUpload::~AtomicUpload() { Abort(); }

Result<AtomicUpload> AtomicUpload::Begin(const std::string& target, std::optional<mode_t> mode,
                                         bool overwrite) {
  if (target == "/") return Fail(ErrorCode::kFailedPrecondition, "/ is a directory");
  AtomicUpload up;
  up.target_ = target;
  up.overwrite_ = overwrite;
  auto slash = target.rfind('/');
  up.dir_ = slash == 0 ? "/" : target.substr(0, slash);
  if (auto made = MakeDirs(up.dir_, 0755); !made) return Fail(made.error());

  struct stat st {};
  if (stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Fail(ErrorCode::kFailedPrecondition, fmt::format("{} is a directory", target));
    }
    if (!overwrite) {
      return Fail(ErrorCode::kAlreadyExists, fmt::format("{} exists (overwrite=0)", target));
    }
    up.mode_ = mode.value_or(st.st_mode & 07777);
  } else if (errno != ENOENT) {
    return Fail(ErrnoError(errno, "stat " + target));
  } else {
    up.mode_ = mode.value_or(0644);
  }

  up.fd_.reset(open(up.dir_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (!up.fd_) {
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      return Fail(ErrnoError(errno, "create a file in " + up.dir_));
    }
    // No O_TMPFILE on this file system: a named temporary in the same directory.
    for (int attempt = 0; attempt < 8 && !up.fd_; ++attempt) {
      up.temp_name_ = TempPath(up.dir_);
      up.fd_.reset(open(up.temp_name_.c_str(),
                        O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!up.fd_ && errno != EEXIST) {
        int err = errno;
        up.temp_name_.clear();
        return Fail(ErrnoError(err, "create a file in " + up.dir_));
      }
    }
    if (!up.fd_) {
      up.temp_name_.clear();
      return Fail(ErrorCode::kInternal, "could not pick a temporary file name");
    }
  }
  return up;
}

Status AtomicUpload::Write(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd_.get(), data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail(ErrnoError(errno, "write " + target_));
    }
    data.remove_prefix(static_cast<size_t>(n));
    written_ += static_cast<uint64_t>(n);
  }
  return {};
}

Result<bool> AtomicUpload::Commit() {
  if (done_ || !fd_) return Fail(ErrorCode::kInternal, "upload already finished");
  if (fchmod(fd_.get(), mode_) != 0) return Fail(ErrnoError(errno, "chmod " + target_));
  if (fsync(fd_.get()) != 0) return Fail(ErrnoError(errno, "fsync " + target_));
  struct stat st {};
  bool existed = lstat(target_.c_str(), &st) == 0;

  std::string staged = temp_name_;
  if (staged.empty()) {
    // Give the anonymous file a name: straight at the target when it must not be replaced
    // (link() fails if the target exists: the no-overwrite check is atomic), else a
    // temporary name that is then renamed over the target.
    std::string proc = fmt::format("/proc/self/fd/{}", fd_.get());
    if (!overwrite_) {
      if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, target_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
        if (errno == EEXIST) {
          return Fail(ErrorCode::kAlreadyExists, fmt::format("{} exists (overwrite=0)", target_));
        }
        return Fail(ErrnoError(errno, "link " + target_));
      }
      done_ = true;
      fd_.reset();
      return false;
    }
    for (int attempt = 0; attempt < 8; ++attempt) {
      staged = TempPath(dir_);
      if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, staged.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      if (errno != EEXIST) return Fail(ErrnoError(errno, "link " + target_));
      staged.clear();
    }
    if (staged.empty()) return Fail(ErrorCode::kInternal, "could not pick a temporary file name");
    temp_name_ = staged;  // from here Abort() removes it
  }
  int rc = overwrite_ ? rename(staged.c_str(), target_.c_str())
                      : renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target_.c_str(),
                                  RENAME_NOREPLACE);
  if (rc != 0) {
    int err = errno;
    if (err == EEXIST) {
      return Fail(ErrorCode::kAlreadyExists, fmt::format("{} exists (overwrite=0)", target_));
    }
    return Fail(ErrnoError(err, "rename over " + target_));
  }
  temp_name_.clear();
  done_ = true;
  fd_.reset();
  // The new directory entry is durable once the directory is.
  UniqueFd dir(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir) fsync(dir.get());
  return existed;
}

void AtomicUpload::Abort() {
  if (done_) return;
  done_ = true;
  fd_.reset();
  if (!temp_name_.empty()) unlink(temp_name_.c_str());
  temp_name_.clear();
}

}  // namespace berth::agent::fs
