// Starting a child process: fork, a new session (so the whole group can be signalled), the
// user switch, pipes or a PTY as its controlling terminal, and execvp with a clean environment.
// Blocking only for the fork itself; callable from any thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/protocol/exec.h"
#include "common/unique.h"
#include "guest-agent/users.h"

namespace berth::agent {

struct SpawnSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
  std::string cwd;
  UserInfo user;
  // False when the agent already runs as `user` (unprivileged tests): no setuid then.
  bool switch_user = true;
  // Give the child a pipe for stdin (else /dev/null). Ignored with a PTY.
  bool stdin_pipe = false;
  // Run on a new PTY (stdin, stdout and stderr all on its slave side).
  std::optional<protocol::PtySize> pty;
};

struct SpawnedProcess {
  pid_t pid = -1;
  UniqueFd pidfd;     // for reaping: readable once the child exits
  UniqueFd stdin_fd;  // write end of the stdin pipe (or invalid)
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;   // invalid with a PTY
  UniqueFd pty_master;  // with a PTY: read for output, write for input
};

// The agent's own file limit raised to its hard limit (each tunnel holds two sockets and its
// splice pipes, so a stock soft limit of 1024 runs out at about 150 open tunnels), while the
// processes it starts keep the soft limit it was started with (programs that select() expect
// 1024). Call once at start-up, before any Spawn. The new soft limit, or an error.
Result<uint64_t> RaiseOwnFileLimit();

// Forks and execs. Failures before the fork are errors; a failing exec (missing binary,
// permission) is reported like a shell does: a message on the child's stderr and exit status
// 127 (not found) or 126 (other), so that every exec mode shows it the same way.
Result<SpawnedProcess> Spawn(const SpawnSpec& spec);

// Resolves what a request asks for into a SpawnSpec: the user (default `default_user`;
// not_found when unknown), the working directory (default the user's home, or / when that is
// missing; invalid_argument when not absolute or not a directory, not_found when missing), the
// environment and the argv (default for a session: the user's login shell).
Result<SpawnSpec> PrepareSpawn(const std::string& default_user,
                               const std::optional<protocol::Command>& cmd,
                               const protocol::EnvOverrides& env,
                               const std::optional<std::string>& cwd,
                               const std::optional<std::string>& user,
                               const std::optional<protocol::PtySize>& pty, bool stdin_pipe);

// The environment a process of `user` starts with, before the caller's overrides: HOME, USER,
// LOGNAME, SHELL, PATH, LANG (and TERM for a PTY).
std::vector<std::string> BaseEnvironment(const UserInfo& user, bool pty,
                                         const protocol::EnvOverrides& overrides);

}  // namespace berth::agent
