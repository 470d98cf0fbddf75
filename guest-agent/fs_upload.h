// An atomic file upload: data goes to an anonymous temporary file (O_TMPFILE) in the target's
// directory, which is linked over the target only once complete and fsync'ed. A reader never
// sees a half-written file; an aborted upload leaves nothing behind, not even after a crash.
// File systems without O_TMPFILE get a named ".berth-upload-XXXXXXXX" removed on abort.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "common/unique.h"

namespace berth::agent::fs {

class AtomicUpload {
 public:
  AtomicUpload() = default;
  AtomicUpload(AtomicUpload&& other) noexcept;
  AtomicUpload& operator=(AtomicUpload&&) = delete;
  ~AtomicUpload();

  // Blocking, with the user's fs credentials: creates missing parent directories (0755),
  // checks the target (a directory there is failed_precondition; an existing file with
  // !overwrite already_exists) and opens the temporary file. The final mode is `mode`, else
  // the existing file's, else 0644.
  static Result<AtomicUpload> Begin(const std::string& target, std::optional<mode_t> mode,
                                    bool overwrite);
  // Blocking; any thread (the descriptor is open already). Disk full is no_space.
  Status Write(std::string_view data);
  // Blocking, with the user's fs credentials: fsync, then puts the file in place (atomically
  // replacing, or failing with already_exists without overwrite). Returns whether a file was
  // replaced.
  Result<bool> Commit();
  // Drops the temporary file. Called by the destructor unless committed.
  void Abort();

  const std::string& target() const { return target_; }
  uint64_t written() const { return written_; }

 private:
  std::string target_;
  std::string dir_;
  std::string temp_name_;  // empty with O_TMPFILE
  UniqueFd fd_;
  mode_t mode_ = 0644;
  bool overwrite_ = true;
  bool done_ = false;
  uint64_t written_ = 0;
};

}  // namespace berth::agent::fs
