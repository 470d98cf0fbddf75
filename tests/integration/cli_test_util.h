// Helpers of the CLI integration test: run `berth` (and other programs) as child processes
// with captured output or in a pseudo-terminal, and berthd with a fresh data directory.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

extern char** environ;

namespace berth::cli_test {

namespace fs = std::filesystem;
using berth::testing::TempDir;
using berth::testing::WaitFor;
using nlohmann::json;

inline std::string BerthdPath() {
  if (const char* env = std::getenv("BERTHD_BIN"); env != nullptr && env[0] != '\0') return env;
#ifdef BERTHD_BIN
  return BERTHD_BIN;
#else
  return "";
#endif
}

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const fs::path& path, const std::string& data) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

inline std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// PATH and the given variables only: nothing from the outer BERTH_* environment leaks in.
inline std::vector<std::string> MakeEnv(const std::map<std::string, std::string>& vars) {
  std::vector<std::string> out;
  const char* path = std::getenv("PATH");
  out.push_back(std::string("PATH=") + (path ? path : "/usr/bin:/bin"));
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

struct Output {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::ostream& operator<<(std::ostream& os, const Output& o) {
  return os << "exit " << o.code << "\n--- stdout\n" << o.out << "\n--- stderr\n" << o.err;
}

// Runs a program with `input` on stdin; stdout and stderr captured.
inline Output RunProgram(std::vector<std::string> args,
                         const std::map<std::string, std::string>& vars, const std::string& input,
                         std::chrono::seconds timeout = std::chrono::seconds(180)) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  REQUIRE(pipe2(in_pipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err_pipe, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  auto env = MakeEnv(vars);
  auto argv = CStrings(args);
  auto envp = CStrings(env);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  REQUIRE(rc == 0);
  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  Output result;
  size_t written = 0;
  int in_fd = in_pipe[1];
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  int open_outputs = 2;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (open_outputs > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
    poll(fds, in_fd >= 0 ? 3 : 2, 200);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        (i == 0 ? out_pipe[0] : err_pipe[0]) = -1;
        --open_outputs;
      }
    }
    if (in_fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN) || written == input.size()) {
        close(in_fd);
        in_fd = -1;
      }
    }
  }
  for (int fd : {in_fd, out_pipe[0], err_pipe[0]}) {
    if (fd >= 0) close(fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) FAIL("timed out: " << args[1] << "\n" << result);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// The unix transport boots nothing, but berthd still wants an image "base" to make overlays
// on: a small real qcow2 and empty kernel files.
inline void MakeFakeImage(const fs::path& images_dir) {
  fs::path dir = images_dir / "base" / "v1";
  fs::create_directories(dir);
  std::string cmd = "qemu-img create -q -f qcow2 " + (dir / "disk.qcow2").string() + " 1G";
  REQUIRE(std::system(cmd.c_str()) == 0);
  WriteFile(dir / "vmlinuz", "");
  WriteFile(dir / "initrd.img", "");
  WriteFile(dir / "image.json", "{}");
  fs::create_directory_symlink("v1", images_dir / "base" / "current");
}

// berthd on 127.0.0.1:0 with a fresh data directory.
class Berthd {
 public:
  explicit Berthd(const std::string& bin) : dir_("berth-cli-berthd") {
    passwd* pw = getpwuid(geteuid());
    // New disks refused only below 1 GiB free: berthd's default floor (5 GiB and 5 %) is for
    // hosts it owns; a CI machine shares a big disk of which a few percent may be free.
    fs::path config = dir_ / "config.json";
    WriteFile(config, R"({"min_free_disk": {"bytes": 1073741824, "percent": 0}})");
    std::vector<std::string> args = {bin,
                                     "--config",
                                     config,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--data",
                                     dir_ / "data",
                                     "--libvirt-uri",
                                     "test:///default",
                                     "--transport",
                                     "unix",
                                     "--accel",
                                     "tcg",
                                     "--agent-bin",
                                     BERTH_AGENT_BIN,
                                     "--agent-user",
                                     pw != nullptr ? pw->pw_name : "root",
                                     "--boot-timeout",
                                     "30"};
    MakeFakeImage(fs::path(dir_ / "data") / "images");
    log_ = dir_ / "berthd.log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    auto argv = CStrings(args);
    int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(rc == 0);
    fs::path addr = fs::path(dir_ / "data") / "listen.addr";
    fs::path key = fs::path(dir_ / "data") / "admin.key";
    bool up = WaitFor([&] { return !Trim(ReadFile(addr)).empty() && !Trim(ReadFile(key)).empty(); },
                      std::chrono::seconds(60));
    INFO(ReadFile(log_));
    REQUIRE(up);
    url_ = Trim(ReadFile(addr));
    admin_key_ = Trim(ReadFile(key));
  }
  ~Berthd() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      bool gone = WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
                          std::chrono::seconds(20));
      if (!gone) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
    }
    KillLeftoverAgents();
    if (std::uncaught_exceptions() > 0) {
      std::string log = ReadFile(log_);
      fprintf(stderr, "--- berthd log (tail)\n%s\n",
              log.substr(log.size() > 8000 ? log.size() - 8000 : 0).c_str());
    }
  }
  const std::string& url() const { return url_; }
  const std::string& admin_key() const { return admin_key_; }
  const TempDir& dir() const { return dir_; }

 private:
  // berthd leaves the agents of workspaces still running when it exits (as it leaves VMs), and
  // they inherit its blocked SIGTERM: a failed test must not leave them behind. Only processes
  // whose command line names this test's data directory are killed.
  void KillLeftoverAgents() {
    std::error_code ec;
    fs::path workspaces = fs::path(dir_ / "data") / "workspaces";
    for (const auto& entry : fs::directory_iterator(workspaces, ec)) {
      std::string text = Trim(ReadFile(entry.path() / "agent.pid"));
      pid_t pid = static_cast<pid_t>(std::atoi(text.c_str()));
      if (pid <= 0) continue;
      std::string cmdline = ReadFile(fmt::format("/proc/{}/cmdline", pid));
      if (cmdline.find(dir_.path().string()) == std::string::npos) continue;
      kill(pid, SIGKILL);
    }
  }

  TempDir dir_;
  std::string log_;
  pid_t pid_ = -1;
  std::string url_;
  std::string admin_key_;
};

// `berth` with a private HOME and config file and the given URL and key in the environment.
class Cli {
 public:
  Cli(const TempDir& dir, std::string url, std::string key) : home_(dir / "home") {
    fs::create_directories(home_);
    vars_["HOME"] = home_;
    vars_["BERTH_CONFIG"] = config_path();
    if (!url.empty()) vars_["BERTH_URL"] = std::move(url);
    if (!key.empty()) vars_["BERTH_API_KEY"] = std::move(key);
  }
  Output operator()(std::vector<std::string> args, const std::string& input = "") const {
    args.insert(args.begin(), BERTH_CLI_BIN);
    return RunProgram(std::move(args), vars_, input);
  }
  std::map<std::string, std::string>& vars() { return vars_; }
  std::string config_path() const { return home_ + "/.config/berth/config.json"; }

 private:
  std::string home_;
  std::map<std::string, std::string> vars_;
};

inline json Json(const Output& o) {
  auto parsed = json::parse(o.out, nullptr, false);
  INFO(o);
  REQUIRE_FALSE(parsed.is_discarded());
  return parsed;
}

inline std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(42);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

// A pseudo-terminal running a command; output collected as it comes.
class Pty {
 public:
  Pty(std::vector<std::string> args, const std::map<std::string, std::string>& vars) {
    winsize size{};
    size.ws_row = 24;
    size.ws_col = 80;
    auto env = MakeEnv(vars);
    env.push_back("TERM=xterm");
    pid_ = forkpty(&master_, nullptr, nullptr, &size);
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      auto argv = CStrings(args);
      auto envp = CStrings(env);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    fcntl(master_, F_SETFL, O_NONBLOCK);
  }
  ~Pty() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(master_);
  }
  void Write(const std::string& text) { REQUIRE(write(master_, text.data(), text.size()) > 0); }
  // Reads until `needle` shows up after `from` (an offset into output()).
  bool WaitFor(const std::string& needle, size_t from = 0,
               std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (output_.find(needle, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd fd{master_, POLLIN, 0};
      if (poll(&fd, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = read(master_, buf, sizeof(buf));
      if (n <= 0) return output_.find(needle, from) != std::string::npos;
      output_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  void Resize(uint16_t rows, uint16_t cols) {
    winsize size{};
    size.ws_row = rows;
    size.ws_col = cols;
    REQUIRE(ioctl(master_, TIOCSWINSZ, &size) == 0);
  }
  int Wait() {
    int status = 0;
    bool done = berth::testing::WaitFor(
        [&] {
          char buf[4096];
          ssize_t n = 0;
          while ((n = read(master_, buf, sizeof(buf))) > 0) {
            output_.append(buf, static_cast<size_t>(n));
          }
          return waitpid(pid_, &status, WNOHANG) == pid_;
        },
        std::chrono::seconds(30));
    REQUIRE(done);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  const std::string& output() const { return output_; }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string output_;
};

}  // namespace berth::cli_test
