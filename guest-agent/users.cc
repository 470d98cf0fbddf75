#include "guest-agent/users.h"

#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>

#include <fmt/format.h>

namespace berth::agent {

Result<UserInfo> ResolveUser(const std::string& name_or_uid) {
  if (name_or_uid.empty()) return Fail(ErrorCode::kInvalidArgument, "empty user name");
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  uid_t numeric = 0;
  auto [ptr, ec] =
      std::from_chars(name_or_uid.data(), name_or_uid.data() + name_or_uid.size(), numeric);
  bool is_number = ec == std::errc() && ptr == name_or_uid.data() + name_or_uid.size();
  int rc = is_number ? getpwuid_r(numeric, &pw, buf.data(), buf.size(), &found)
                     : getpwnam_r(name_or_uid.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return Fail(ErrorCode::kNotFound, fmt::format("no such user: {}", name_or_uid));
  }
  UserInfo user{pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir, pw.pw_shell, {}};
  if (geteuid() != 0 && user.uid != geteuid()) {
    return Fail(ErrorCode::kPermissionDenied,
                fmt::format("the agent is not root and cannot act as {}", user.name));
  }
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(user.name.c_str(), user.gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    getgrouplist(user.name.c_str(), user.gid, groups.data(), &count);
  }
  groups.resize(static_cast<size_t>(count));
  user.groups = std::move(groups);
  return user;
}

ScopedFsCredentials::ScopedFsCredentials(const UserInfo& user) {
  old_uid_ = static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1)));
  old_gid_ = static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1)));
  if (old_uid_ == user.uid && geteuid() != 0) {
    ok_ = true;  // unprivileged and already this user: nothing to switch
    return;
  }
  if (geteuid() != 0) return;
  int n = getgroups(0, nullptr);
  old_groups_.resize(static_cast<size_t>(n > 0 ? n : 0));
  if (n > 0) getgroups(n, old_groups_.data());
  // The raw syscalls change only this thread; glibc's wrappers would change every thread.
  if (syscall(SYS_setgroups, user.groups.size(), user.groups.data()) != 0) return;
  setfsgid(user.gid);
  setfsuid(user.uid);
  ok_ = switched_ = true;
}

ScopedFsCredentials::~ScopedFsCredentials() {
  if (!switched_) return;
  setfsuid(old_uid_);
  setfsgid(old_gid_);
  syscall(SYS_setgroups, old_groups_.size(), old_groups_.data());
}

}  // namespace berth::agent
