// GET /v1/ports and the /v1/tunnel WebSocket, driven through the real agent and the client
// library (OpenTunnel, PortForwarder in WebSocket mode). The raw mode: ports_tunnel_raw_test.cc.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "common/client/ports.h"
#include "common/client/tunnel.h"
#include "tests/integration/ports_tunnel_test_util.h"
#include "tests/support/test_agent.h"
#include "tests/support/wait.h"

using namespace berth;
using namespace std::chrono_literals;
using http::bhttp::verb;

using berth::testing::WaitFor;
using namespace berth::ports_test;

TEST_CASE("GET /v1/ports lists a listener of this process with its pid, and not the agent's own API listener", "[ports]") {
  testing::TestAgent agent;
  Listener v4;
  std::optional<Listener> v6;
  if (access("/proc/net/tcp6", R_OK) == 0) v6.emplace(true);
  auto client = agent.Client();
  auto ports = client::ListPorts(client, "/v1");
  REQUIRE(ports);
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  bool found = false;
  bool found6 = false;
  for (const auto& p : *ports) {
    if (p.port == v4.port && p.family == "ipv4") {
      found = true;
      CHECK(p.address == "127.0.0.1");
      REQUIRE(p.pid);
      CHECK(*p.pid == getpid());
      CHECK(p.process == comm);
      REQUIRE(p.cmdline);
      CHECK(p.cmdline->find("integration_ports") != std::string::npos);
      CHECK(p.user == testing::CurrentUserName());
    }
    if (v6 && p.port == v6->port && p.family == "ipv6") {
      found6 = true;
      CHECK(p.address == "::1");
      CHECK(p.pid == getpid());
    }
  }
  CHECK(found);
  CHECK(found6 == v6.has_value());
  // The agent's own TCP listener (the forward transport's) is no port of the workspace's.
  for (const auto& p : *ports) CHECK(p.port != agent.tcp_endpoint().port);
  // Sorted by port.
  for (size_t i = 1; i < ports->size(); ++i) CHECK((*ports)[i - 1].port <= (*ports)[i].port);

  auto raw = client.Json(verb::get, "/v1/ports");
  REQUIRE(raw);
  for (const auto& entry : (*raw)["ports"]) {
    for (const char* key : {"port", "address", "family", "pid", "process", "cmdline", "user"}) {
      CHECK(entry.contains(key));
    }
  }
}

namespace {

// PortForwarder in both modes: WebSocket, and raw (the default, kAuto, picks raw with this agent).
std::string ModeName(tunnel::TunnelMode mode) {
  return mode == tunnel::TunnelMode::kWebSocket ? "websocket" : "raw";
}

}  // namespace

TEST_CASE("a tunnel echoes 16 MiB both ways intact, through PortForwarder", "[tunnel]") {
  auto mode = GENERATE(tunnel::TunnelMode::kWebSocket, tunnel::TunnelMode::kAuto);
  INFO("mode: " << ModeName(mode));
  testing::TestAgent agent;
  EchoServer echo;
  tunnel::PortForwarder::Options options;
  options.mode = mode;
  auto forwarder = tunnel::PortForwarder::Start(agent.Client(), "/v1", echo.listener.port, options);
  REQUIRE(forwarder);
  int fd = ConnectTcp((*forwarder)->local_port());

  const std::string payload = RandomBytes(16u << 20);
  std::thread writer([&] {
    for (size_t off = 0; off < payload.size();) {
      ssize_t n = write(fd, payload.data() + off, std::min<size_t>(payload.size() - off, 100'003));
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    shutdown(fd, SHUT_WR);
  });
  std::string echoed;
  char buf[65536];
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  while (echoed.size() < payload.size()) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    echoed.append(buf, static_cast<size_t>(n));
  }
  writer.join();
  REQUIRE(echoed.size() == payload.size());
  CHECK(Sha256(echoed) == Sha256(payload));
  // The client's half-close reaches the guest side (an empty frame, or a FIN spliced along):
  // the echo server sees EOF and everything winds down.
  CHECK(WaitFor([&] { return echo.got_eof.load(); }));
  CHECK(Sha256(echo.received) == Sha256(payload));
  ssize_t tail = read(fd, buf, sizeof(buf));
  CHECK(tail == 0);
  close(fd);
  CHECK(WaitFor([&] { return OpenTunnels(agent) == 0 && (*forwarder)->active() == 0; }));
  CHECK((*forwarder)->raw_tunnels() == (mode == tunnel::TunnelMode::kWebSocket ? 0u : 1u));
  CHECK((*forwarder)->websocket_tunnels() == (mode == tunnel::TunnelMode::kWebSocket ? 1u : 0u));
  (*forwarder)->Stop();
}

TEST_CASE("a tunnel carries frames, counts as activity and closes when the guest side does",
          "[tunnel]") {
  testing::TestAgent agent;
  Listener server;
  auto client = agent.Client();
  auto ws = tunnel::OpenTunnel(client, "/v1", server.port);
  REQUIRE(ws);
  int c = accept(server.fd, nullptr, nullptr);
  REQUIRE(c >= 0);
  CHECK(OpenTunnels(agent) == 1);
  auto activity = client::GetActivity(client, "/v1");
  REQUIRE(activity);
  CHECK((*activity)["reasons"].dump().find("open_streams") != std::string::npos);

  REQUIRE((*ws)->SendBinary("ping"));
  char buf[16] = {};
  REQUIRE(read(c, buf, sizeof(buf)) == 4);
  CHECK(std::string(buf, 4) == "ping");
  REQUIRE(write(c, "pong!", 5) == 5);
  auto frame = (*ws)->Read(10s);
  REQUIRE(frame);
  CHECK_FALSE(frame->text);
  CHECK(frame->data == "pong!");

  close(c);  // the guest side ends: the WebSocket closes normally
  auto end = (*ws)->Read(10s);
  REQUIRE_FALSE(end);
  CHECK(end.error().code == ErrorCode::kUnavailable);
  CHECK(end.error().message.find("closed: 1000") != std::string::npos);
  CHECK(WaitFor([&] { return OpenTunnels(agent) == 0; }));
}

TEST_CASE("tunnels are refused for foreign hosts, bad ports and closed ports", "[tunnel]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  for (const char* host : {"8.8.8.8", "10.255.255.1", "0.0.0.0", "2001:db8::1"}) {
    auto r = tunnel::OpenTunnel(client, "/v1", 22, host);
    INFO(host);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kPermissionDenied);
  }
  auto name = tunnel::OpenTunnel(client, "/v1", 22, "example.com");
  REQUIRE_FALSE(name);
  CHECK(name.error().code == ErrorCode::kInvalidArgument);

  // Raw requests, for the statuses themselves and for ports the client would reject.
  for (const char* target : {"/v1/tunnel?port=0", "/v1/tunnel?port=65536", "/v1/tunnel?port=x",
                             "/v1/tunnel"}) {
    auto r = client.OpenWebSocket(target);
    INFO(target);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
  auto forbidden = client.Request(verb::get, "/v1/tunnel?port=80&host=1.1.1.1");
  REQUIRE(forbidden);
  CHECK(forbidden->status == 403);

  uint16_t closed_port = 0;
  {
    Listener l;
    closed_port = l.port;
  }
  auto refused = tunnel::OpenTunnel(client, "/v1", closed_port);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kUnavailable);
  CHECK(refused.error().message.find("refused") != std::string::npos);

  // Without a WebSocket upgrade, but a listening port: 400, nothing connected.
  Listener open;
  auto plain = client.Request(verb::get, fmt::format("/v1/tunnel?port={}", open.port));
  REQUIRE(plain);
  CHECK(plain->status == 400);

  // Without the token: 401 before anything else.
  auto anonymous = agent.ClientWithToken("");
  auto unauth = tunnel::OpenTunnel(anonymous, "/v1", open.port);
  REQUIRE_FALSE(unauth);
  CHECK(unauth.error().code == ErrorCode::kUnauthenticated);
  CHECK(OpenTunnels(agent) == 0);
}

TEST_CASE("a tunnel to a sink that does not read stalls the writer instead of buffering",
          "[tunnel]") {
  auto mode = GENERATE(tunnel::TunnelMode::kWebSocket, tunnel::TunnelMode::kRaw);
  INFO("mode: " << ModeName(mode));
  testing::TestAgent agent;
  Listener sink;  // accepts (the kernel does) and never reads
  tunnel::PortForwarder::Options options;
  options.mode = mode;
  auto forwarder = tunnel::PortForwarder::Start(agent.Client(), "/v1", sink.port, options);
  REQUIRE(forwarder);
  int fd = ConnectTcp((*forwarder)->local_port());
  int sink_conn = -1;
  REQUIRE(WaitFor([&] {
    pollfd p{sink.fd, POLLIN, 0};
    if (poll(&p, 1, 0) == 1) sink_conn = accept(sink.fd, nullptr, nullptr);
    return sink_conn >= 0;
  }));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string chunk(1 << 20, 'x');
  size_t written = 0;
  auto last_progress = std::chrono::steady_clock::now();
  // Write until nothing has gone in for a second; give up (and fail) past 512 MiB.
  while (std::chrono::steady_clock::now() - last_progress < 1s && written < (512u << 20)) {
    ssize_t n = write(fd, chunk.data(), chunk.size());
    if (n > 0) {
      written += static_cast<size_t>(n);
      last_progress = std::chrono::steady_clock::now();
    } else {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 50);
    }
  }
  INFO("bytes taken before the writer stalled: " << written);
  // Kernel socket buffers on three loopback connections plus one frame per hop: tens of MiB
  // at most. Unbounded buffering would take all 512 MiB.
  CHECK(written < (128u << 20));
  CHECK(written > 0);

  // The sink starts reading: everything written arrives, in order, and nothing more.
  size_t drained = 0;
  char buf[65536];
  timeval tv{10, 0};
  setsockopt(sink_conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  while (drained < written) {
    ssize_t n = read(sink_conn, buf, sizeof(buf));
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  CHECK(drained == written);
  close(fd);
  close(sink_conn);
  CHECK(WaitFor([&] { return OpenTunnels(agent) == 0; }));
  (*forwarder)->Stop();
}

TEST_CASE("PortForwarder counts a refused tunnel and closes the local connection", "[tunnel]") {
  auto mode = GENERATE(tunnel::TunnelMode::kWebSocket, tunnel::TunnelMode::kAuto);
  INFO("mode: " << ModeName(mode));
  testing::TestAgent agent;
  uint16_t closed_port = 0;
  {
    Listener l;
    closed_port = l.port;
  }
  tunnel::PortForwarder::Options options;
  options.mode = mode;
  auto forwarder = tunnel::PortForwarder::Start(agent.Client(), "/v1", closed_port, options);
  REQUIRE(forwarder);
  int fd = ConnectTcp((*forwarder)->local_port());
  char buf[16];
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  CHECK(read(fd, buf, sizeof(buf)) == 0);
  close(fd);
  CHECK(WaitFor([&] { return (*forwarder)->failed() == 1; }));
  // A closed port is no reason to fall back from raw to WebSocket.
  CHECK((*forwarder)->raw_tunnels() + (*forwarder)->websocket_tunnels() == 0);
  (*forwarder)->Stop();
}
