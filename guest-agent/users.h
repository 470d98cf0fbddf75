// Who a request runs as. The agent runs as root in the guest and switches to the requested
// user for processes and file operations; run unprivileged (tests), it can only act as itself.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace berth::agent {

struct UserInfo {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::string shell;
  std::vector<gid_t> groups;  // supplementary groups, the primary one included
};

// Looks up a user by name or numeric uid. not_found for an unknown user; permission_denied
// when the agent is not root and the user is not the agent's own.
Result<UserInfo> ResolveUser(const std::string& name_or_uid);

// Per-thread file-system credentials (setfsuid/setfsgid and the thread's supplementary
// groups), so that file operations are checked, and new files owned, as `user`. Restores the
// previous credentials on destruction. Use only on threads that run nothing else meanwhile.
class ScopedFsCredentials {
 public:
  explicit ScopedFsCredentials(const UserInfo& user);
  ~ScopedFsCredentials();
  ScopedFsCredentials(const ScopedFsCredentials&) = delete;
  ScopedFsCredentials& operator=(const ScopedFsCredentials&) = delete;
  // False when switching failed (then nothing was changed).
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
  bool switched_ = false;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
  std::vector<gid_t> old_groups_;
};

}  // namespace berth::agent
