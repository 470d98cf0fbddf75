#include "bench/bench_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace berth::bench {

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

pid_t Spawn(const std::vector<std::string>& argv, bool verbose) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (!verbose) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) throw std::runtime_error("spawn " + argv[0] + ": " + std::strerror(err));
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

int Run(const std::vector<std::string>& argv, bool verbose) { return Wait(Spawn(argv, verbose)); }

uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

int ConnectLoopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool WaitForPort(uint16_t port, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    int fd = ConnectLoopback(port);
    if (fd >= 0) {
      close(fd);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

LoopbackServer::LoopbackServer(const char* what, std::function<void(int fd)> serve) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd_, 16) != 0) {
    close(fd_);
    throw std::runtime_error(std::string(what) + ": bind/listen failed");
  }
  socklen_t len = sizeof(addr);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this, serve = std::move(serve)] {
    while (!stop_) {
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      serve(c);
      close(c);
    }
  });
}

LoopbackServer::~LoopbackServer() {
  stop_ = true;
  shutdown(fd_, SHUT_RDWR);
  thread_.join();
  close(fd_);
}

SinkServer::SinkServer()
    : server_("sink", [buf = std::vector<char>(1 << 20)](int c) mutable {
        uint64_t count = 0;
        for (;;) {
          ssize_t n = read(c, buf.data(), buf.size());
          if (n <= 0) break;
          count += static_cast<uint64_t>(n);
        }
        (void)!write(c, &count, sizeof(count));
      }) {}

namespace {

void RelayOnce(int client, uint16_t target_port) {
  int target = ConnectLoopback(target_port);
  if (target < 0) return;
  int one = 1;
  setsockopt(target, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close(target);
    return;
  }
  fcntl(pipe_fds[1], F_SETPIPE_SZ, 1 << 20);
  for (;;) {
    ssize_t n = splice(client, nullptr, pipe_fds[1], nullptr, 1 << 20, SPLICE_F_MOVE);
    if (n <= 0) break;
    while (n > 0) {
      ssize_t m = splice(pipe_fds[0], nullptr, target, nullptr, static_cast<size_t>(n),
                         SPLICE_F_MOVE);
      if (m <= 0) break;
      n -= m;
    }
    if (n > 0) break;
  }
  shutdown(target, SHUT_WR);
  char answer[64];
  ssize_t n;
  while ((n = read(target, answer, sizeof(answer))) > 0) (void)!write(client, answer, n);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(target);
}

}  // namespace

SpliceRelay::SpliceRelay(uint16_t target)
    : server_("splice relay", [target](int c) { RelayOnce(c, target); }) {}

double SendThroughSocket(int fd, uint64_t bytes, Clock::time_point start) {
  std::vector<char> buf(1 << 20, 'x');
  uint64_t sent = 0;
  while (sent < bytes) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - sent));
    ssize_t w = write(fd, buf.data(), n);
    if (w <= 0) break;
    sent += static_cast<uint64_t>(w);
  }
  shutdown(fd, SHUT_WR);
  uint64_t count = 0;
  size_t got = 0;
  while (got < sizeof(count)) {
    ssize_t n = read(fd, reinterpret_cast<char*>(&count) + got, sizeof(count) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  auto elapsed = Clock::now() - start;
  if (got != sizeof(count) || count != bytes) return -1;
  return static_cast<double>(bytes) / 1e6 / std::chrono::duration<double>(elapsed).count();
}

double SendToSink(uint16_t port, uint64_t bytes) {
  auto start = Clock::now();
  int fd = ConnectLoopback(port);
  if (fd < 0) return -1;
  double rate = SendThroughSocket(fd, bytes, start);
  close(fd);
  return rate;
}

}  // namespace berth::bench
