// What a child of a Berth process inherits: stdin, stdout and stderr, nothing else.
//
// Asio opens its sockets without SOCK_CLOEXEC, and so do libraries berthd links. A child that
// kept berthd's descriptors (passt, a host-process agent, qemu-img, the KVM probe) would hold
// its listening socket and its clients' connections: after a SIGKILL, a restarted berthd could
// not bind its port for as long as any passt ran, and a compromised passt would hold berthd's
// API socket. Every place that starts a process calls one of these, so no descriptor leaks
// whichever code opened it.
#pragma once

#include <spawn.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace berth {

// In a forked child, after its dup2()s and before exec: closes every descriptor from 3 up.
// Async-signal-safe (close_range(2), or close() in a loop on kernels without it).
void CloseInheritedDescriptors() noexcept;

// For posix_spawn: the same as a file action, run after the actions added before it.
// 0, or an errno value.
int AddCloseInheritedDescriptors(posix_spawn_file_actions_t* actions) noexcept;

// posix_spawnp(argv) with stdin from /dev/null, stdout and stderr on `out_fd` and `err_fd`
// (-1: /dev/null), every other descriptor closed, and an empty signal mask (berthd blocks
// SIGTERM for sigwait; its children must stay killable). The child's pid, or the errno value
// of what failed. Any thread.
Result<pid_t> SpawnClean(const std::vector<std::string>& argv, int out_fd, int err_fd);

}  // namespace berth
