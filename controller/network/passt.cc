#include "controller/network/passt.h"

#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "common/child_fds.h"

namespace berth::network {

std::vector<std::string> PasstArgv(const PasstOptions& options) {
  std::vector<std::string> argv = {options.binary, "--one-off", "--no-map-gw",
                                   "--socket",     options.socket_path,
                                   "--pid",        options.pid_file};
  if (!options.log_file.empty()) {
    argv.push_back("--log-file");
    argv.push_back(options.log_file);
  }
  if (options.tcp_forwards.empty()) {
    argv.push_back("--tcp-ports");
    argv.push_back("none");
  }
  for (const auto& [host, guest] : options.tcp_forwards) {
    argv.push_back("--tcp-ports");
    argv.push_back(fmt::format("127.0.0.1/{}:{}", host, guest));
  }
  // No inbound UDP at all; outbound UDP (DNS) still works.
  argv.push_back("--udp-ports");
  argv.push_back("none");
  if (!options.dns.empty()) {
    argv.push_back("--dns");
    argv.push_back(options.dns);
  }
  return argv;
}

Result<pid_t> StartPasst(const PasstOptions& options) {
  uid_t uid = 0;
  gid_t gid = 0;
  if (options.uid) {
    uid = *options.uid;
    gid = options.gid.value_or(static_cast<gid_t>(*options.uid));
  } else {
    passwd* pw = getpwnam(options.user.c_str());
    if (pw == nullptr) {
      return Fail(ErrorCode::kFailedPrecondition, fmt::format("no user '{}' for passt", options.user));
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  }
  if (uid == 0) return Fail(ErrorCode::kInvalidArgument, "passt must not run as root");
  ::unlink(options.socket_path.c_str());
  ::unlink(options.pid_file.c_str());
  std::vector<std::string> args = PasstArgv(options);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t child = fork();
  if (child < 0) return Fail(ErrnoError(errno, "fork passt"));
  if (child == 0) {
    // Not berthd's signal mask (SIGTERM blocked for sigwait): passt must stay killable.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // passt prints QEMU usage hints on stdout; its log file says what matters.
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    CloseInheritedDescriptors();  // none of berthd's sockets, its listening one above all
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // passt forks into the background and the first process exits.
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    // The log is written by passt as the QEMU user: read it without following a symlink.
    std::string log;
    if (!options.log_file.empty()) {
      int fd = ::open(options.log_file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd >= 0) {
        char buf[500];
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) log.assign(buf, static_cast<size_t>(n));
        ::close(fd);
      }
    }
    return Fail(ErrorCode::kUnavailable,
                fmt::format("passt failed to start (status {}): {}", status, log.substr(0, 500)));
  }
  auto deadline = std::chrono::steady_clock::now() + options.ready_timeout;
  for (;;) {
    struct stat st {};
    if (::stat(options.socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      auto pid = RunningPasst(options.pid_file, uid);
      if (pid) return pid;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(ErrorCode::kDeadlineExceeded, "passt did not create its socket in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<pid_t> ReadPidFile(const std::string& pid_file) {
  int fd = ::open(pid_file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Fail(ErrorCode::kNotFound, fmt::format("no pid file {}", pid_file));
  struct stat st {};
  char buf[32] = {};
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return Fail(ErrorCode::kNotFound, fmt::format("empty pid file {}", pid_file));
  char* end = nullptr;
  long pid = std::strtol(buf, &end, 10);
  if (pid <= 1 || pid > 4194304 || (end && *end != '\0' && *end != '\n')) {
    return Fail(ErrorCode::kNotFound, fmt::format("malformed pid file {}", pid_file));
  }
  return static_cast<pid_t>(pid);
}

Result<uid_t> ProcessUid(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      return static_cast<uid_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
    }
  }
  return Fail(ErrorCode::kNotFound, fmt::format("no process {}", pid));
}

Result<pid_t> RunningPasst(const std::string& pid_file, std::optional<uid_t> uid) {
  auto pid = ReadPidFile(pid_file);
  if (!pid) return Fail(pid.error());
  std::ifstream comm(fmt::format("/proc/{}/comm", *pid));
  std::string name;
  std::getline(comm, name);
  if (name.rfind("passt", 0) != 0) return Fail(ErrorCode::kNotFound, "passt is not running");
  if (uid) {
    auto owner = ProcessUid(*pid);
    if (!owner || *owner != *uid) {
      return Fail(ErrorCode::kNotFound, fmt::format("process {} is not this workspace's passt", *pid));
    }
  }
  return *pid;
}

}  // namespace berth::network
