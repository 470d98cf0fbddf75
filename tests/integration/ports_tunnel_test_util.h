// Helpers shared by the ports and tunnel tests: local listeners, an echo server, digests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <openssl/sha.h>

#include "common/client/ports.h"
#include "tests/support/test_agent.h"

namespace berth::ports_test {

// A listening TCP socket on 127.0.0.1 (or ::1) with an ephemeral port.
struct Listener {
  explicit Listener(bool ipv6 = false) {
    fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    if (ipv6) {
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_addr = in6addr_loopback;
      REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    }
    REQUIRE(listen(fd, 16) == 0);
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    port = ntohs(ipv6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                      : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  ~Listener() {
    if (fd >= 0) close(fd);
  }
  int fd = -1;
  uint16_t port = 0;
};

// A blocking connection to 127.0.0.1:port.
inline int ConnectTcp(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// The SHA-256 digest of `data`, raw.
inline std::string Sha256(const std::string& data) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d);
  return std::string(reinterpret_cast<char*>(d), sizeof(d));
}

// Echoes one connection and remembers what it received.
struct EchoServer {
  EchoServer() {
    thread = std::thread([this] {
      int c = accept(listener.fd, nullptr, nullptr);
      if (c < 0) return;
      char buf[65536];
      for (;;) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        received.append(buf, static_cast<size_t>(n));
        for (ssize_t off = 0; off < n;) {
          ssize_t w = write(c, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) break;
          off += w;
        }
      }
      got_eof = true;
      close(c);
    });
  }
  ~EchoServer() {
    shutdown(listener.fd, SHUT_RDWR);
    if (thread.joinable()) thread.join();
  }
  Listener listener;
  std::string received;
  std::atomic<bool> got_eof{false};
  std::thread thread;
};

// Tunnels the agent counts as open streams.
inline int OpenTunnels(testing::TestAgent& agent) {
  auto client = agent.Client();
  auto activity = client::GetActivity(client, "/v1");
  if (!activity) return -1;
  return (*activity)["open_streams"].value("tunnel", 0);
}

// `n` reproducible pseudo-random bytes.
inline std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(42);
  std::string out(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  return out;
}


}  // namespace berth::ports_test
