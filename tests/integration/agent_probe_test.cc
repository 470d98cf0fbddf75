// berthd's probe of an agent (GET /v1/activity) against hostile "agents" on real unix sockets:
// one that drips its answer a byte at a time ends at the probe's one deadline, one that answers
// far too much is refused, one that answers garbage is an error, and an honest one is read.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "common/unique.h"
#include "controller/agent_client/agent_probe.h"
#include "tests/support/temp_dir.h"

namespace berth::agent_client {
namespace {

namespace asio = boost::asio;

// A one-connection-at-a-time server on a unix socket that reads the request header and then
// runs `answer` on the connected socket.
class FakeAgent {
 public:
  FakeAgent(const std::string& path, std::function<void(int fd)> answer) : answer_(std::move(answer)) {
    listener_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    REQUIRE(bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(listener_.get(), 4) == 0);
    thread_ = std::thread([this] {
      for (;;) {
        int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        UniqueFd conn(fd);
        std::string seen;
        char buf[1024];
        while (seen.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = read(fd, buf, sizeof buf);
          if (n <= 0) break;
          seen.append(buf, static_cast<size_t>(n));
        }
        request_ = seen;
        answer_(fd);
        ++served_;
      }
    });
  }
  ~FakeAgent() {
    shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  std::string request() const { return request_; }
  std::atomic<bool> stop{false};

 private:
  UniqueFd listener_;
  std::function<void(int)> answer_;
  std::thread thread_;
  std::string request_;
  std::atomic<int> served_{0};
};

Result<nlohmann::json> Probe(const std::string& path, std::chrono::milliseconds deadline) {
  asio::io_context io;
  AgentLink link;
  link.endpoint.kind = Endpoint::Kind::kUnix;
  link.endpoint.path = path;
  link.token = "secret-token";
  auto done = asio::co_spawn(io, ProbeActivity(link, deadline), asio::use_future);
  io.run();
  return done.get();
}

// MSG_NOSIGNAL: the probe closes its end at its deadline, and a write after that must fail, not
// kill the test with SIGPIPE.
void Write(int fd, std::string_view s) { (void)!send(fd, s.data(), s.size(), MSG_NOSIGNAL); }

TEST_CASE("probe: an honest agent's answer is read, with the boot's token", "[probe]") {
  testing::TempDir dir("berth-probe");
  auto path = (dir.path() / "a.sock").string();
  FakeAgent agent(path, [](int fd) {
    Write(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n"
              "{\"running_processes\": 2}");
  });
  auto answer = Probe(path, std::chrono::seconds(5));
  REQUIRE(answer.has_value());
  CHECK((*answer)["running_processes"] == 2);
  CHECK(agent.request().find("GET /v1/activity HTTP/1.1") == 0);
  CHECK(agent.request().find("Authorization: Bearer secret-token") != std::string::npos);
}

TEST_CASE("sync: berthd's POST /v1/sync carries the token and an empty body, and reads the answer", "[probe]") {
  testing::TempDir dir("berth-probe");
  auto path = (dir.path() / "a.sock").string();
  FakeAgent agent(path, [](int fd) {
    Write(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n"
              "{\"synced\": true, \"took_ms\": 3}");
  });
  asio::io_context io;
  AgentLink link;
  link.endpoint.kind = Endpoint::Kind::kUnix;
  link.endpoint.path = path;
  link.token = "secret-token";
  auto done = asio::co_spawn(io, SyncGuest(link, std::chrono::seconds(5)), asio::use_future);
  io.run();
  auto answer = done.get();
  REQUIRE(answer.has_value());
  CHECK((*answer)["synced"] == true);
  CHECK(agent.request().find("POST /v1/sync HTTP/1.1") == 0);
  CHECK(agent.request().find("Authorization: Bearer secret-token") != std::string::npos);
  CHECK(agent.request().find("Content-Length: 0") != std::string::npos);
}

TEST_CASE("probe: an agent that drips its answer ends at the one deadline, not per read", "[probe]") {
  testing::TempDir dir("berth-probe");
  auto path = (dir.path() / "a.sock").string();
  std::atomic<int> dripped{0};
  FakeAgent agent(path, [&](int fd) {
    std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, ' ');
    // A byte every 50 ms: each read makes progress, so only a deadline for the whole
    // exchange ends it.
    for (char c : answer) {
      if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) return;
      ++dripped;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto answer = Probe(path, std::chrono::milliseconds(600));
  REQUIRE_FALSE(answer.has_value());
  CHECK(answer.error().code == ErrorCode::kDeadlineExceeded);
  // It was cut while the agent was still dripping: far fewer bytes than the answer has.
  CHECK(dripped < 1000);
}

TEST_CASE("probe: an answer past the limit is refused", "[probe]") {
  testing::TempDir dir("berth-probe");
  auto path = (dir.path() / "a.sock").string();
  FakeAgent agent(path, [](int fd) {
    std::string body = "[" + std::string(kMaxActivityAnswer + 10, ' ') + "]";
    Write(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    Write(fd, body);
  });
  auto answer = Probe(path, std::chrono::seconds(5));
  REQUIRE_FALSE(answer.has_value());
  CHECK(answer.error().code == ErrorCode::kUnavailable);
}

TEST_CASE("probe: garbage, errors and non-objects are errors, not answers", "[probe]") {
  testing::TempDir dir("berth-probe");
  auto path = (dir.path() / "a.sock").string();
  std::atomic<int> round{0};
  FakeAgent agent(path, [&](int fd) {
    switch (round++) {
      case 0: Write(fd, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"); break;
      case 1: Write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n[1]"); break;
      case 2: Write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{nope"); break;
      default: Write(fd, "not http at all\r\n\r\n"); break;
    }
  });
  for (int i = 0; i < 4; ++i) {
    auto answer = Probe(path, std::chrono::seconds(5));
    CHECK_FALSE(answer.has_value());
  }
}

}  // namespace
}  // namespace berth::agent_client
