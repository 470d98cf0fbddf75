// Plain blocking sockets for tests that play the other end of a connection themselves (a
// client that gives up, a peer that resets), and what the kernel says about TCP sockets.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "common/unique.h"

namespace berth::testing {

// A listening TCP socket on 127.0.0.1 with an ephemeral port.
struct TcpListener {
  TcpListener() {
    fd.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd.get(), 64) != 0) {
      fd.reset();
      return;
    }
    socklen_t len = sizeof(addr);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  UniqueFd Accept() const { return UniqueFd(accept4(fd.get(), nullptr, nullptr, SOCK_CLOEXEC)); }
  UniqueFd fd;
  uint16_t port = 0;
};

// A blocking connection to 127.0.0.1:port (invalid on failure).
inline UniqueFd ConnectTcp(uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) fd.reset();
  return fd;
}

// Two connected TCP sockets on loopback: {the connecting end, the accepted end}.
inline std::pair<UniqueFd, UniqueFd> TcpPair() {
  TcpListener listener;
  UniqueFd a = ConnectTcp(listener.port);
  UniqueFd b = listener.Accept();
  return {std::move(a), std::move(b)};
}

// Two connected unix stream sockets.
inline std::pair<UniqueFd, UniqueFd> UnixPair() {
  int fds[2] = {-1, -1};
  socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

inline bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Waits until `fd` is readable (or at EOF) for at most `timeout`.
inline bool Readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(timeout.count())) > 0;
}

// Reads until EOF (or an error, or `timeout` without data), everything read.
inline std::string ReadToEnd(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::string out;
  char buf[64 * 1024];
  while (Readable(fd, timeout)) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Reads until `out` holds `needle` (true) or EOF, an error or `timeout` without data (false).
inline bool ReadUntil(int fd, std::string& out, std::string_view needle,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  char buf[16 * 1024];
  while (out.find(needle) == std::string::npos) {
    if (!Readable(fd, timeout)) return false;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    out.append(buf, static_cast<size_t>(n));
  }
  return true;
}

// A close that sends a reset instead of a FIN.
inline void ResetAndClose(UniqueFd& fd) {
  linger lg{1, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  fd.reset();
}

// How many TCP sockets (IPv4 and IPv6) with local port `port` are in `state` (/proc/net/tcp's
// hex code: 08 is CLOSE_WAIT, 01 ESTABLISHED).
inline int CountTcpSockets(uint16_t port, int state) {
  int count = 0;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, st;
      fields >> slot >> local >> remote >> st;
      auto colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port &&
          std::stoi(st, nullptr, 16) == state) {
        ++count;
      }
    }
  }
  return count;
}
inline constexpr int kTcpEstablished = 0x01;
inline constexpr int kTcpCloseWait = 0x08;

}  // namespace berth::testing
