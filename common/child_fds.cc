#include "common/child_fds.h"

#include <sys/syscall.h>
#include <unistd.h>

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

}  // namespace berth
