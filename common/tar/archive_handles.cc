#include "common/tar/archive_handles.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <fmt/format.h>

namespace berth::tar {

Status ScopedThreadCwd::Enter(const std::string& dir) {
  if (::unshare(CLONE_FS) != 0) return Fail(ErrnoError(errno, "unshare(CLONE_FS)"));
  old_cwd_.reset(::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (::chdir(dir.c_str()) != 0) return Fail(ErrnoError(errno, fmt::format("chdir {}", dir)));
  return {};
}

ScopedThreadCwd::~ScopedThreadCwd() {
  if (old_cwd_.valid()) {
    if (::fchdir(old_cwd_.get()) != 0) ::chdir("/");
  }
}

Error ArchiveError(archive* a, std::string_view name, std::string_view what) {
  int err = archive_errno(a);
  const char* text = archive_error_string(a);
  std::string message = text != nullptr ? text : "unknown libarchive error";
  std::string where = name.empty() ? std::string(what) : fmt::format("{} '{}'", what, name);
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EACCES:
    case EPERM:
    case EROFS:
    case EIO:
      return ErrnoError(err, where);
    default:
      return Error{ErrorCode::kInvalidArgument, fmt::format("{}: {}", where, message)};
  }
}

}  // namespace berth::tar
