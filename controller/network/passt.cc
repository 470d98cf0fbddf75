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
  return argv;
}

Result<pid_t> StartPasst(const PasstOptions& options) {
  passwd* pw = getpwnam(options.user.c_str());
  if (pw == nullptr) {
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("no user '{}' for passt", options.user));
  }
  uid_t uid = pw->pw_uid;
  gid_t gid = pw->pw_gid;
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
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // passt forks into the background and the first process exits.
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string log;
    if (!options.log_file.empty()) {
      std::ifstream in(options.log_file);
      std::getline(in, log, '\0');
    }
    return Fail(ErrorCode::kUnavailable,
                fmt::format("passt failed to start (status {}): {}", status, log.substr(0, 500)));
  }
  auto deadline = std::chrono::steady_clock::now() + options.ready_timeout;
  for (;;) {
    struct stat st {};
    if (::stat(options.socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      auto pid = RunningPasst(options.pid_file);
      if (pid) return pid;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(ErrorCode::kDeadlineExceeded, "passt did not create its socket in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<pid_t> RunningPasst(const std::string& pid_file) {
  std::ifstream in(pid_file);
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0) return Fail(ErrorCode::kNotFound, "no passt pid file");
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(comm, name);
  if (name.rfind("passt", 0) != 0) return Fail(ErrorCode::kNotFound, "passt is not running");
  return pid;
}

}  // namespace berth::network
