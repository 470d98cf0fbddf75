// Owning handles for libarchive objects and the per-thread working directory the tar code
// needs: libarchive resolves archive paths against the current directory, and its secure
// extraction flags only make sense relative to it.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <string>

#include "common/error.h"
#include "common/unique.h"

namespace berth {

template <>
struct Deleter<archive> {
  void operator()(archive* a) const { archive_free(a); }
};
template <>
struct Deleter<archive_entry> {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

namespace tar {

// Makes this thread's file-system context (working directory, umask) private with
// unshare(CLONE_FS), changes into `dir`, and changes back on destruction. Without it, a chdir
// (or libarchive's umask() probe) on one thread would move every thread of the process.
class ScopedThreadCwd {
 public:
  ScopedThreadCwd() = default;
  ~ScopedThreadCwd();
  ScopedThreadCwd(const ScopedThreadCwd&) = delete;
  ScopedThreadCwd& operator=(const ScopedThreadCwd&) = delete;
  // Errno-based errors for `dir` (not_found, permission_denied, failed_precondition).
  Status Enter(const std::string& dir);

 private:
  UniqueFd old_cwd_;
};

// The error libarchive recorded on `a`, for the entry `name` (may be empty): disk-full,
// permission and I/O errors keep their errno meaning; anything else is a bad archive entry.
Error ArchiveError(archive* a, std::string_view name, std::string_view what);

}  // namespace tar
}  // namespace berth
