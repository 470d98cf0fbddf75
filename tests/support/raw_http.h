// Raw sockets for tests that must control exactly what a client sends and when: a header
// without its body, a body that trickles in. The client library always sends whole requests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

namespace berth::testing {

class RawConnection {
 public:
  // Connects to 127.0.0.1:port, from `source` when given (another loopback address, e.g.
  // "127.0.0.2": all of 127/8 is loopback); ok() is false when that failed.
  explicit RawConnection(uint16_t port, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0 && source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      if (::inet_pton(AF_INET, source, &from.sin_addr) != 1 ||
          ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  // False when the peer is gone (EPIPE, ECONNRESET).
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Waits up to `timeout` for something to read; true when data or the end (EOF, reset)
  // arrived. The tests' way to pause: it returns as soon as the server acts.
  bool WaitReadable(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
  }
  // Appends one read's worth to received_ once something arrives before `deadline`; false
  // when nothing did, or the server closed.
  bool ReceiveSome(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !WaitReadable(left)) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    received_.append(buf, static_cast<size_t>(n));
    return true;
  }
  // Reads what the server sends until it has sent a whole header ("\r\n\r\n"), closes, or
  // `timeout` passes.
  std::string ReadHead(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (received_.find("\r\n\r\n") == std::string::npos) {
      if (!ReceiveSome(deadline)) break;
    }
    return received_;
  }
  // Reads one whole response whose body has a Content-Length (berthd's JSON answers) and
  // returns it (head and body), leaving what follows for the next call; what arrived, which
  // may be nothing, when it did not arrive whole within `timeout` or the server closed first.
  std::string ReadResponse(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (size_t end = received_.find("\r\n\r\n"); end != std::string::npos) {
        size_t length = 0;
        std::string head = received_.substr(0, end);
        for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
          length = std::stoul(head.substr(at + 17));
        }
        if (received_.size() >= end + 4 + length) {
          std::string response = received_.substr(0, end + 4 + length);
          received_.erase(0, end + 4 + length);
          return response;
        }
      }
      if (!ReceiveSome(deadline)) break;
    }
    return std::exchange(received_, std::string());
  }
  // Waits up to `timeout` for the server to close the connection (reading and keeping what
  // it sends first); true when it did.
  bool WaitClosed(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !WaitReadable(left)) return false;
      if (Closed()) return true;
    }
  }
  // What has been received and not yet returned by ReadResponse.
  const std::string& received() const { return received_; }
  // True once the server has closed the connection (EOF or reset); reads and drops data.
  bool Closed() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) received_.append(buf, static_cast<size_t>(n));
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }

 private:
  int fd_ = -1;
  std::string received_;
};

// This process's resident set (VmRSS) or peak (VmHWM) in KiB, from /proc/self/status.
inline uint64_t StatusKiB(std::string_view field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(field) && line.size() > field.size() && line[field.size()] == ':') {
      return std::stoull(line.substr(field.size() + 1));
    }
  }
  return 0;
}

// Resets this process's VmHWM to its current RSS (Linux: "5" in clear_refs).
inline bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  return static_cast<bool>(out.flush());
}

}  // namespace berth::testing
