// The raw mode of /v1/tunnel (`Upgrade: berth-tcp`), driven through the real agent, the client
// library (OpenRawTunnel, PortForwarder) and hand-written HTTP where the bytes themselves matter.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "common/client/ports.h"
#include "common/client/tunnel.h"
#include "common/protocol/ports.h"
#include "tests/integration/ports_tunnel_test_util.h"
#include "tests/support/test_agent.h"
#include "tests/support/wait.h"

using namespace berth;
using namespace std::chrono_literals;
using berth::testing::WaitFor;
using namespace berth::ports_test;

namespace {

void SetTimeouts(int fd, int seconds = 10) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    REQUIRE(n > 0);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads until `n` bytes, EOF or the socket's timeout.
std::string ReadN(int fd, size_t n) {
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    ssize_t got = read(fd, buf, std::min(sizeof(buf), n - out.size()));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

// Reads until `done(all bytes so far)`, EOF or the socket's timeout.
std::string ReadUntil(int fd, const std::function<bool(const std::string&)>& done) {
  std::string out;
  char buf[4096];
  while (!done(out)) {
    ssize_t got = read(fd, buf, sizeof(buf));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

// A raw-upgrade request for `target`, as a client writes it.
std::string UpgradeRequest(const testing::TestAgent& agent, std::string_view target,
                           std::string_view connection = "Upgrade",
                           std::string_view extra = "", std::string_view version = "1.1") {
  return fmt::format(
      "GET {} HTTP/{}\r\nHost: berth\r\nAuthorization: Bearer {}\r\nConnection: {}\r\n"
      "Upgrade: berth-tcp\r\n{}\r\n",
      target, version, agent.token(), connection, extra);
}

// Sends `request` over a new TCP connection to the agent; the whole answer (the request says
// `Connection: close`).
std::string RoundTrip(const testing::TestAgent& agent, const std::string& request) {
  int fd = ConnectTcp(agent.tcp_endpoint().port);
  SetTimeouts(fd);
  WriteAll(fd, request);
  std::string answer = ReadUntil(fd, [](const std::string&) { return false; });
  close(fd);
  return answer;
}

// Answers every request with a 400 JSON error and notes its Upgrade header: an agent from
// before raw tunnels, as PortForwarder sees it.
struct OldServer {
  OldServer() {
    thread = std::thread([this] {
      for (;;) {
        int c = accept(listener.fd, nullptr, nullptr);
        if (c < 0) return;
        SetTimeouts(c);
        std::string head = ReadUntil(c, [](const std::string& s) {
          return s.find("\r\n\r\n") != std::string::npos;
        });
        std::string upgrade;
        for (const char* name : {"\r\nUpgrade: ", "\r\nupgrade: "}) {
          if (auto at = head.find(name); at != std::string::npos) {
            at += std::strlen(name);
            upgrade = head.substr(at, head.find("\r\n", at) - at);
          }
        }
        {
          std::lock_guard lock(mutex);
          upgrades.push_back(upgrade);
        }
        static constexpr std::string_view kBody =
            R"({"error":{"code":"invalid_argument","message":"/v1/tunnel needs a WebSocket upgrade"}})";
        std::string answer = fmt::format(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
            "Content-Length: {}\r\n\r\n{}",
            kBody.size(), kBody);
        (void)!write(c, answer.data(), answer.size());
        close(c);
      }
    });
  }
  ~OldServer() {
    shutdown(listener.fd, SHUT_RDWR);
    thread.join();
  }
  std::vector<std::string> Upgrades() {
    std::lock_guard lock(mutex);
    return upgrades;
  }
  Listener listener;
  std::mutex mutex;
  std::vector<std::string> upgrades;
  std::thread thread;
};

}  // namespace

TEST_CASE("HTTP token lists: Connection and Upgrade", "[tunnel][raw]") {
  CHECK(protocol::HasToken("Upgrade", "upgrade"));
  CHECK(protocol::HasToken("keep-alive, Upgrade", "upgrade"));
  CHECK(protocol::HasToken(" websocket ,\tBerth-TCP ", protocol::kRawTunnelProtocol));
  CHECK_FALSE(protocol::HasToken("berth-tcp/2", protocol::kRawTunnelProtocol));
  CHECK_FALSE(protocol::HasToken("websocket", protocol::kRawTunnelProtocol));
  CHECK_FALSE(protocol::HasToken("", "upgrade"));
  CHECK_FALSE(protocol::HasToken(",,", "upgrade"));
}

TEST_CASE("a raw tunnel carries bytes both ways, keeps what the guest says first, and "
          "half-closes each way", "[tunnel][raw]") {
  testing::TestAgent agent;
  Listener server;
  // The guest side speaks first, like sshd: its banner may reach the client in the same
  // segment as the 101, and must not be swallowed with the response header.
  int guest = -1;
  std::thread acceptor([&] {
    guest = accept(server.fd, nullptr, nullptr);
    if (guest >= 0) WriteAll(guest, "banner\r\n");
  });
  auto client = agent.Client();
  auto tunnel = tunnel::OpenRawTunnel(client, "/v1", server.port);
  acceptor.join();
  REQUIRE(tunnel);
  REQUIRE(guest >= 0);
  int fd = tunnel->get();
  SetTimeouts(fd);
  SetTimeouts(guest);
  CHECK(ReadN(fd, 8) == "banner\r\n");
  CHECK(OpenTunnels(agent) == 1);
  auto activity = client::GetActivity(client, "/v1");
  REQUIRE(activity);
  CHECK((*activity)["reasons"].dump().find("open_streams") != std::string::npos);

  WriteAll(fd, "ping");
  CHECK(ReadN(guest, 4) == "ping");
  WriteAll(guest, "pong!");
  CHECK(ReadN(fd, 5) == "pong!");

  SECTION("the client half-closes first") {
    shutdown(fd, SHUT_WR);
    char b;
    CHECK(read(guest, &b, 1) == 0);  // the guest sees EOF...
    WriteAll(guest, "after your EOF");  // ...and can still answer
    CHECK(ReadN(fd, 14) == "after your EOF");
    CHECK(OpenTunnels(agent) == 1);
    shutdown(guest, SHUT_WR);
    CHECK(read(fd, &b, 1) == 0);
  }
  SECTION("the guest half-closes first") {
    shutdown(guest, SHUT_WR);
    char b;
    CHECK(read(fd, &b, 1) == 0);
    WriteAll(fd, "after your EOF");
    CHECK(ReadN(guest, 14) == "after your EOF");
    CHECK(OpenTunnels(agent) == 1);
    shutdown(fd, SHUT_WR);
    CHECK(read(guest, &b, 1) == 0);
  }
  close(guest);
  CHECK(WaitFor([&] { return OpenTunnels(agent) == 0; }));
}

TEST_CASE("a raw tunnel echoes 64 MiB each way intact", "[tunnel][raw]") {
  auto via = GENERATE(as<std::string>{}, "OpenRawTunnel", "PortForwarder");
  INFO("via " << via);
  testing::TestAgent agent;
  EchoServer echo;
  auto client = agent.Client();
  UniqueFd conn;
  std::unique_ptr<tunnel::PortForwarder> forwarder;
  if (via == "OpenRawTunnel") {
    auto opened = tunnel::OpenRawTunnel(client, "/v1", echo.listener.port);
    REQUIRE(opened);
    conn = std::move(*opened);
  } else {
    tunnel::PortForwarder::Options options;
    options.mode = tunnel::TunnelMode::kRaw;
    auto started = tunnel::PortForwarder::Start(client, "/v1", echo.listener.port, options);
    REQUIRE(started);
    forwarder = std::move(*started);
    conn.reset(ConnectTcp(forwarder->local_port()));
  }
  int fd = conn.get();
  SetTimeouts(fd, 60);

  const std::string payload = RandomBytes(64u << 20);
  std::thread writer([&] {
    for (size_t off = 0; off < payload.size();) {
      ssize_t n = write(fd, payload.data() + off, std::min<size_t>(payload.size() - off, 999'983));
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    shutdown(fd, SHUT_WR);
  });
  std::string echoed = ReadN(fd, payload.size());
  writer.join();
  REQUIRE(echoed.size() == payload.size());
  CHECK(Sha256(echoed) == Sha256(payload));
  CHECK(WaitFor([&] { return echo.got_eof.load(); }));
  CHECK(Sha256(echo.received) == Sha256(payload));
  char b;
  CHECK(read(fd, &b, 1) == 0);  // the echo server closed: EOF comes through
  conn.reset();
  CHECK(WaitFor([&] { return OpenTunnels(agent) == 0; }));
  if (forwarder) {
    CHECK(WaitFor([&] { return forwarder->active() == 0; }));
    CHECK(forwarder->raw_tunnels() == 1);
    CHECK(forwarder->websocket_tunnels() == 0);
    forwarder->Stop();
  }
}

TEST_CASE("raw tunnels are refused with JSON errors before any upgrade", "[tunnel][raw]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  for (const char* host : {"8.8.8.8", "10.255.255.1", "0.0.0.0", "2001:db8::1"}) {
    auto r = tunnel::OpenRawTunnel(client, "/v1", 22, host);
    INFO(host);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kPermissionDenied);
  }
  auto name = tunnel::OpenRawTunnel(client, "/v1", 22, "example.com");
  REQUIRE_FALSE(name);
  CHECK(name.error().code == ErrorCode::kInvalidArgument);

  uint16_t closed_port = 0;
  {
    Listener l;
    closed_port = l.port;
  }
  auto refused = tunnel::OpenRawTunnel(client, "/v1", closed_port);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kUnavailable);
  CHECK(refused.error().message.find("refused") != std::string::npos);

  auto anonymous = agent.ClientWithToken("");
  Listener open;
  auto unauth = tunnel::OpenRawTunnel(anonymous, "/v1", open.port);
  REQUIRE_FALSE(unauth);
  CHECK(unauth.error().code == ErrorCode::kUnauthenticated);

  // The statuses and bodies themselves, on the wire.
  struct Case {
    std::string target;
    std::string extra_headers;
    std::string version;
    std::string status_line;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"/v1/tunnel?port=80&host=1.1.1.1", "", "1.1", "HTTP/1.1 403 ", "permission_denied"},
      {"/v1/tunnel?port=0", "", "1.1", "HTTP/1.1 400 ", "invalid_argument"},
      {"/v1/tunnel", "", "1.1", "HTTP/1.1 400 ", "invalid_argument"},
      {fmt::format("/v1/tunnel?port={}", closed_port), "", "1.1", "HTTP/1.1 503 ", "unavailable"},
      // A body would be taken for tunnel data.
      {fmt::format("/v1/tunnel?port={}", open.port), "Content-Length: 3\r\n", "1.1",
       "HTTP/1.1 400 ", "invalid_argument"},
      // Upgrades are HTTP/1.1.
      {fmt::format("/v1/tunnel?port={}", open.port), "", "1.0", "HTTP/1.0 400 ",
       "invalid_argument"},
  };
  for (const auto& c : cases) {
    INFO(c.target << " " << c.extra_headers << " HTTP/" << c.version);
    std::string request = UpgradeRequest(agent, c.target, "Upgrade, close", c.extra_headers,
                                         c.version);
    if (!c.extra_headers.empty()) request += "abc";
    std::string answer = RoundTrip(agent, request);
    CHECK(answer.starts_with(c.status_line));
    CHECK(answer.find("Content-Type: application/json") != std::string::npos);
    CHECK(answer.find(fmt::format("\"code\":\"{}\"", c.code)) != std::string::npos);
    CHECK(answer.find("Upgrade: berth-tcp") == std::string::npos);
  }
  // Nothing was connected for the bad requests to the open port.
  pollfd p{open.fd, POLLIN, 0};
  CHECK(poll(&p, 1, 0) == 0);
  CHECK(OpenTunnels(agent) == 0);
}

TEST_CASE("a raw upgrade on the wire: 101, then the guest's bytes; bytes behind the request "
          "reach the guest first", "[tunnel][raw]") {
  testing::TestAgent agent;
  Listener server;
  int fd = ConnectTcp(agent.tcp_endpoint().port);
  SetTimeouts(fd);
  // The request and the first tunnel bytes in one write: the agent has them buffered with the
  // header when it takes the connection over.
  WriteAll(fd, UpgradeRequest(agent, fmt::format("/v1/tunnel?port={}", server.port)) +
                   "early bytes");
  int guest = accept(server.fd, nullptr, nullptr);
  REQUIRE(guest >= 0);
  SetTimeouts(guest);
  CHECK(ReadN(guest, 11) == "early bytes");
  WriteAll(guest, "hello");
  std::string answer = ReadUntil(fd, [](const std::string& s) { return s.ends_with("hello"); });
  CHECK(answer.starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
  CHECK(answer.find("\r\nUpgrade: berth-tcp\r\n") != std::string::npos);
  CHECK(answer.find("\r\nConnection: Upgrade\r\n") != std::string::npos);
  CHECK(answer.ends_with("\r\n\r\nhello"));
  close(fd);  // a full close: the guest sees EOF, and the agent lets go once it closes too
  char b;
  CHECK(read(guest, &b, 1) == 0);
  close(guest);
  CHECK(WaitFor([&] { return OpenTunnels(agent) == 0; }));
}

TEST_CASE("PortForwarder falls back to WebSocket once a server refuses raw upgrades",
          "[tunnel][raw]") {
  OldServer old;
  Endpoint endpoint;
  endpoint.kind = Endpoint::Kind::kTcp;
  endpoint.host = "127.0.0.1";
  endpoint.port = old.listener.port;
  client::ApiClient client(endpoint, "token");
  auto mode = GENERATE(tunnel::TunnelMode::kAuto, tunnel::TunnelMode::kRaw);
  tunnel::PortForwarder::Options options;
  options.mode = mode;
  auto forwarder = tunnel::PortForwarder::Start(client, "/v1", 22, options);
  REQUIRE(forwarder);
  for (int i = 1; i <= 2; ++i) {
    int fd = ConnectTcp((*forwarder)->local_port());
    SetTimeouts(fd);
    char b;
    CHECK(read(fd, &b, 1) == 0);
    close(fd);
    CHECK(WaitFor([&] { return (*forwarder)->failed() == static_cast<size_t>(i); }));
  }
  (*forwarder)->Stop();
  if (mode == tunnel::TunnelMode::kAuto) {
    // Raw, refused, WebSocket; then WebSocket right away.
    CHECK(old.Upgrades() == std::vector<std::string>{"berth-tcp", "websocket", "websocket"});
  } else {
    CHECK(old.Upgrades() == std::vector<std::string>{"berth-tcp", "berth-tcp"});
  }
}

TEST_CASE("PortForwarder::Stop ends an idle raw tunnel", "[tunnel][raw]") {
  testing::TestAgent agent;
  Listener server;
  tunnel::PortForwarder::Options options;
  options.mode = tunnel::TunnelMode::kRaw;
  auto forwarder = tunnel::PortForwarder::Start(agent.Client(), "/v1", server.port, options);
  REQUIRE(forwarder);
  int fd = ConnectTcp((*forwarder)->local_port());
  SetTimeouts(fd);
  int guest = accept(server.fd, nullptr, nullptr);
  REQUIRE(guest >= 0);
  SetTimeouts(guest);
  REQUIRE(WaitFor([&] { return OpenTunnels(agent) == 1 && (*forwarder)->raw_tunnels() == 1; }));
  (*forwarder)->Stop();  // joins the connection's thread: returns only once the bridge ended
  CHECK((*forwarder)->active() == 0);
  char b;
  CHECK(read(fd, &b, 1) == 0);
  CHECK(read(guest, &b, 1) == 0);  // the FIN went all the way through
  close(guest);
  close(fd);
  CHECK(WaitFor([&] { return OpenTunnels(agent) == 0; }));
}
