#include "guest-agent/process_spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/child_fds.h"

extern char** environ;

namespace berth::agent {
namespace {

// PATH for every process started through the API: the Debian default for a login shell with
// the sbin directories, so root and `agent` (passwordless sudo) find the same tools.
constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The file limit children get (RaiseOwnFileLimit): set once at start-up, read in the child.
bool g_child_nofile_set = false;
struct rlimit g_child_nofile {};

// --- async-signal-safe helpers for the child between fork and exec ---------------------------

void WriteAll(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void WriteStr(int fd, const char* s) { WriteAll(fd, s, std::strlen(s)); }

const char* ErrnoText(int err) {
  switch (err) {
    case ENOENT: return "No such file or directory";
    case EACCES: return "Permission denied";
    case ENOEXEC: return "Exec format error";
    case ENOTDIR: return "Not a directory";
    case ELOOP: return "Too many levels of symbolic links";
    case E2BIG: return "Argument list too long";
    case ENOMEM: return "Cannot allocate memory";
    case EPERM: return "Operation not permitted";
    case ETXTBSY: return "Text file busy";
    case EISDIR: return "Is a directory";
    default: return "cannot execute";
  }
}

[[noreturn]] void ChildFail(const char* what, const char* object, int err, int status) {
  WriteStr(2, "berth: ");
  WriteStr(2, what);
  if (object != nullptr) {
    WriteStr(2, object);
  }
  WriteStr(2, ": ");
  WriteStr(2, ErrnoText(err));
  WriteStr(2, "\n");
  _exit(status);
}

// dup2 that also works when `fd` already is `target` (then only FD_CLOEXEC must be cleared).
bool MoveTo(int fd, int target) {
  if (fd == target) return fcntl(fd, F_SETFD, 0) == 0;
  return dup2(fd, target) == target;
}

Result<std::pair<UniqueFd, UniqueFd>> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Fail(ErrnoError(errno, "pipe"));
  return std::pair<UniqueFd, UniqueFd>(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

}  // namespace

std::vector<std::string> BaseEnvironment(const UserInfo& user, bool pty,
                                         const protocol::EnvOverrides& overrides) {
  std::map<std::string, std::string> env = {
      {"HOME", user.home.empty() ? "/" : user.home},
      {"USER", user.name},
      {"LOGNAME", user.name},
      {"SHELL", user.shell.empty() ? "/bin/sh" : user.shell},
      {"PATH", kDefaultPath},
      {"LANG", "C.UTF-8"},
  };
  if (pty) env["TERM"] = "xterm-256color";
  for (const auto& [k, v] : overrides) {
    if (v) {
      env[k] = *v;
    } else {
      env.erase(k);
    }
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

Result<SpawnSpec> PrepareSpawn(const std::string& default_user,
                               const std::optional<protocol::Command>& cmd,
                               const protocol::EnvOverrides& env,
                               const std::optional<std::string>& cwd,
                               const std::optional<std::string>& user,
                               const std::optional<protocol::PtySize>& pty, bool stdin_pipe) {
  SpawnSpec spec;
  auto resolved = ResolveUser(user.value_or(default_user));
  if (!resolved) return Fail(resolved.error());
  spec.user = std::move(*resolved);
  spec.switch_user = geteuid() == 0;
  struct stat st {};
  if (cwd) {
    if (!cwd->starts_with('/')) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("cwd {} is not an absolute path", *cwd));
    }
    if (stat(cwd->c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) {
        return Fail(ErrorCode::kNotFound, fmt::format("cwd {} does not exist", *cwd));
      }
      return Fail(ErrnoError(errno, fmt::format("cwd {}", *cwd)));
    }
    if (!S_ISDIR(st.st_mode)) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("cwd {} is not a directory", *cwd));
    }
    spec.cwd = *cwd;
  } else {
    bool home_ok = !spec.user.home.empty() && stat(spec.user.home.c_str(), &st) == 0 &&
                   S_ISDIR(st.st_mode);
    spec.cwd = home_ok ? spec.user.home : "/";
  }
  if (cmd) {
    spec.argv = protocol::CommandArgv(*cmd);
  } else {
    // Accounts such as `nobody` have nologin/false as their shell: give them sh instead.
    std::string shell = spec.user.shell;
    if (shell.empty() || shell.ends_with("nologin") || shell.ends_with("/false")) shell = "/bin/sh";
    spec.argv = {shell, "-l"};
  }
  spec.env = BaseEnvironment(spec.user, pty.has_value(), env);
  spec.pty = pty;
  spec.stdin_pipe = stdin_pipe;
  return spec;
}

Result<uint64_t> RaiseOwnFileLimit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return Fail(ErrnoError(errno, "getrlimit"));
  g_child_nofile = limit;
  g_child_nofile_set = true;
  if (limit.rlim_cur == limit.rlim_max) return static_cast<uint64_t>(limit.rlim_cur);
  struct rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) return Fail(ErrnoError(errno, "setrlimit"));
  return static_cast<uint64_t>(raised.rlim_cur);
}

Result<SpawnedProcess> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return Fail(ErrorCode::kInvalidArgument, "empty argv");
  // Everything the child needs is built before the fork: after it, only async-signal-safe
  // calls are allowed (the agent has other threads).
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  SpawnedProcess out;
  UniqueFd child_in, child_out, child_err, slave;
  if (spec.pty) {
    int master_fd = -1, slave_fd = -1;
    winsize ws{};
    ws.ws_col = spec.pty->cols;
    ws.ws_row = spec.pty->rows;
    if (openpty(&master_fd, &slave_fd, nullptr, nullptr, &ws) != 0) {
      return Fail(ErrnoError(errno, "openpty"));
    }
    out.pty_master.reset(master_fd);
    slave.reset(slave_fd);
    fcntl(master_fd, F_SETFD, FD_CLOEXEC);
    fcntl(slave_fd, F_SETFD, FD_CLOEXEC);
  } else {
    if (spec.stdin_pipe) {
      auto p = MakePipe();
      if (!p) return Fail(p.error());
      child_in = std::move(p->first);
      out.stdin_fd = std::move(p->second);
    } else {
      child_in.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!child_in) return Fail(ErrnoError(errno, "open /dev/null"));
    }
    auto o = MakePipe();
    if (!o) return Fail(o.error());
    auto e = MakePipe();
    if (!e) return Fail(e.error());
    out.stdout_fd = std::move(o->first);
    child_out = std::move(o->second);
    out.stderr_fd = std::move(e->first);
    child_err = std::move(e->second);
  }
  const char* cwd = spec.cwd.c_str();
  const char* argv0 = argv[0];

  // Every signal is blocked across the fork, and in the child until its handlers are reset.
  // Otherwise a signal sent the moment the pid is known (a user's "start it, then TERM it")
  // can reach the child while it still has the agent's handlers: asio's signal_set handler
  // then runs in the child and writes into the self-pipe it shares with the agent, and the
  // agent reads "SIGTERM" and shuts down. Blocked, the signal waits for the default action.
  sigset_t all_signals, parent_mask;
  sigfillset(&all_signals);
  if (int err = pthread_sigmask(SIG_SETMASK, &all_signals, &parent_mask); err != 0) {
    return Fail(ErrnoError(err, "block signals for fork"));
  }
  pid_t pid = fork();
  if (pid == 0) {
    // --- the child ---
    // Signal dispositions the agent set (ignored SIGPIPE, handlers) must not leak; only once
    // they are the defaults may signals (pending ones too) be delivered.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // A session of its own: the process group can be killed as a whole, and a PTY can become
    // its controlling terminal.
    setsid();
    if (slave) {
      if (ioctl(slave.get(), TIOCSCTTY, 0) != 0) _exit(126);
      if (!MoveTo(slave.get(), 0) || !MoveTo(slave.get(), 1) || !MoveTo(slave.get(), 2)) _exit(126);
    } else {
      if (!MoveTo(child_in.get(), 0) || !MoveTo(child_out.get(), 1) || !MoveTo(child_err.get(), 2)) {
        _exit(126);
      }
    }
    CloseInheritedDescriptors();
    if (g_child_nofile_set) setrlimit(RLIMIT_NOFILE, &g_child_nofile);
    if (spec.switch_user) {
      if (syscall(SYS_setgroups, spec.user.groups.size(), spec.user.groups.data()) != 0) {
        ChildFail("setgroups", nullptr, errno, 126);
      }
      if (setgid(spec.user.gid) != 0) ChildFail("setgid", nullptr, errno, 126);
      if (setuid(spec.user.uid) != 0) ChildFail("setuid", nullptr, errno, 126);
    }
    if (chdir(cwd) != 0) ChildFail("cd ", cwd, errno, 126);
    // execvp looks PATH up in `environ`: the child's own environment must be in place first.
    environ = envp.data();
    execvp(argv0, argv.data());
    int err = errno;
    WriteStr(2, "berth: ");
    WriteStr(2, argv0);
    WriteStr(2, ": ");
    // Like a shell: a bare name that PATH does not have is "not found".
    WriteStr(2, err == ENOENT && std::strchr(argv0, '/') == nullptr ? "command not found"
                                                                     : ErrnoText(err));
    WriteStr(2, "\n");
    _exit(err == ENOENT ? 127 : 126);
  }
  // --- the parent ---
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &parent_mask, nullptr);
  if (pid < 0) return Fail(ErrnoError(fork_errno, "fork"));
  out.pid = pid;
  // The child is not reaped by anyone else (no SIGCHLD handler), so the pid stays valid for
  // pidfd_open even if it already exited.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int err = errno;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return Fail(ErrnoError(err, "pidfd_open"));
  }
  fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  out.pidfd.reset(pidfd);
  return out;
}

}  // namespace berth::agent
