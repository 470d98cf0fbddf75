#include "common/child_fds.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

extern char** environ;

namespace berth {

void CloseInheritedDescriptors() noexcept {
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
    // Kernels before 5.9. (sysconf is not async-signal-safe: a fixed bound, berthd's limit.)
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
}

int AddCloseInheritedDescriptors(posix_spawn_file_actions_t* actions) noexcept {
  return posix_spawn_file_actions_addclosefrom_np(actions, 3);
}

Result<pid_t> SpawnClean(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  if (argv.empty()) return Fail(ErrorCode::kInvalidArgument, "nothing to run");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int rc = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  auto route = [&](int fd, int target) {
    if (rc != 0) return;
    rc = fd < 0 ? posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
                : posix_spawn_file_actions_adddup2(&actions, fd, target);
  };
  route(out_fd, 1);
  route(err_fd, 2);
  if (rc == 0) rc = AddCloseInheritedDescriptors(&actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (rc == 0) rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Fail(ErrnoError(rc, fmt::format("run {}", argv[0])));
  return pid;
}

}  // namespace berth
