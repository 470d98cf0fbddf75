// berthd's proxy to agents (controller/agent_client/) between a real http::Server front on a
// two-thread io_context (as berthd runs it) and a tiny upstream HTTP server whose behaviour
// each test sets: it answers, closes connections while idle or as a request arrives, holds a
// request without answering, streams and then holds, or upgrades to an echo pipe. The clients
// are the client library or raw sockets (a client that gives up).
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "common/client/api_client.h"
#include "controller/agent_client/agent_proxy.h"
#include "tests/support/sockets.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;
using agent_client::AgentConnectionPool;
using agent_client::AgentConnector;
using testing::WaitFor;

// The stand-in agent. One thread per connection, blocking I/O.
class TinyUpstream {
 public:
  enum class Mode {
    kAnswer,          // 200 "conn=<c> n=<requests on it> body=<bytes>", keep-alive
    kDropReused,      // like kAnswer, but closes a connection as its second request arrives
    kDropAll,         // reads each request whole, then closes without answering
    kHold,            // reads the request, never answers, waits for the peer to close
    kStreamThenHold,  // a chunked 200 with one line, then waits for the peer to close
    kUpgradeEcho,     // 101 to "echo", then echoes bytes until EOF
  };

  TinyUpstream() {
    REQUIRE(listener_.fd);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~TinyUpstream() {
    stopping_ = true;
    ::shutdown(listener_.fd.get(), SHUT_RDWR);
    accept_thread_.join();
    {
      std::lock_guard lock(mutex_);
      for (auto& [id, c] : conns_) ::shutdown(c.fd, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
  }

  Endpoint endpoint() const {
    Endpoint ep;
    ep.kind = Endpoint::Kind::kTcp;
    ep.host = "127.0.0.1";
    ep.port = listener_.port;
    return ep;
  }
  void set_mode(Mode mode) { mode_ = mode; }
  // Closes every connection that waits for its next request, as an agent's idle timer does.
  void CloseIdle() {
    std::lock_guard lock(mutex_);
    for (auto& [id, c] : conns_) {
      if (c.idle) ::shutdown(c.fd, SHUT_RDWR);
    }
  }
  int connections() const { return connections_; }
  int open_connections() {
    std::lock_guard lock(mutex_);
    return static_cast<int>(conns_.size());
  }
  int requests() const { return requests_; }
  int dropped() const { return dropped_; }
  int held() const { return held_; }
  int held_closed() const { return held_closed_; }

 private:
  struct Conn {
    int fd;
    bool idle;
  };

  void AcceptLoop() {
    for (;;) {
      UniqueFd fd = listener_.Accept();
      if (!fd || stopping_) return;
      int id = ++connections_;
      std::lock_guard lock(mutex_);
      conns_[id] = Conn{fd.get(), true};
      threads_.emplace_back([this, id, raw = fd.release()] { Serve(id, UniqueFd(raw)); });
    }
  }

  void SetIdle(int id, bool idle) {
    std::lock_guard lock(mutex_);
    conns_[id].idle = idle;
  }

  // Blocks until the peer closes (EOF or an error).
  static void WaitForPeerClose(int fd) {
    char byte;
    while (recv(fd, &byte, 1, 0) > 0) {
    }
  }

  void Serve(int id, UniqueFd fd) {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.assign(asio::ip::tcp::v4(), fd.release());
    const int native = socket.native_handle();
    beast::flat_buffer buffer;
    int served = 0;
    for (;;) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.body_limit(64 << 20);
      beast::error_code ec;
      SetIdle(id, true);
      bhttp::read(socket, buffer, parser, ec);
      SetIdle(id, false);
      if (ec) break;
      ++requests_;
      ++served;
      Mode mode = mode_;
      if (mode == Mode::kDropAll || (mode == Mode::kDropReused && served > 1)) {
        ++dropped_;
        break;
      }
      if (mode == Mode::kHold) {
        ++held_;
        WaitForPeerClose(native);
        ++held_closed_;
        break;
      }
      if (mode == Mode::kStreamThenHold) {
        std::string head =
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            "Transfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n";
        testing::SendAll(native, head);
        ++held_;
        WaitForPeerClose(native);
        ++held_closed_;
        break;
      }
      if (mode == Mode::kUpgradeEcho) {
        testing::SendAll(native,
                         "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                         "Upgrade: echo\r\n\r\n");
        auto early = buffer.data();
        testing::SendAll(native, std::string_view(static_cast<const char*>(early.data()),
                                                  early.size()));
        char buf[16 * 1024];
        ssize_t n;
        while ((n = recv(native, buf, sizeof(buf), 0)) > 0) {
          testing::SendAll(native, std::string_view(buf, static_cast<size_t>(n)));
        }
        ::shutdown(native, SHUT_WR);
        WaitForPeerClose(native);
        break;
      }
      bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
      res.set(bhttp::field::content_type, "text/plain");
      res.body() = fmt::format("conn={} n={} body={}", id, served, parser.get().body().size());
      res.keep_alive(true);
      res.prepare_payload();
      bhttp::write(socket, res, ec);
      if (ec) break;
    }
    boost::system::error_code ignored;
    socket.close(ignored);
    std::lock_guard lock(mutex_);
    conns_.erase(id);
  }

  testing::TcpListener listener_;
  std::atomic<Mode> mode_{Mode::kAnswer};
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mutex_;
  std::map<int, Conn> conns_;
  std::vector<std::thread> threads_;
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::atomic<int> dropped_{0};
  std::atomic<int> held_{0};
  std::atomic<int> held_closed_{0};
};

// berthd's side: an http::Server whose every request goes through ProxyToAgent, unchanged
// target, to the upstream.
class Front {
 public:
  explicit Front(const Endpoint& upstream) : io_(2), work_(asio::make_work_guard(io_)) {
    link_.endpoint = upstream;
    link_.token = "agent-token";
    auto handler = [this](http::Exchange& ex) {
      return agent_client::ProxyToAgent(ex, link_, std::string(ex.target()), options_, &pool_,
                                        extra_);
    };
    server_ = std::make_unique<http::Server>(io_, http::ServerOptions{}, handler);
    Endpoint listen;
    listen.kind = Endpoint::Kind::kTcp;
    listen.host = "127.0.0.1";
    auto bound = server_->Listen(listen);
    REQUIRE(bound);
    endpoint_ = *bound;
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  ~Front() {
    server_->Stop();
    work_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
  }
  client::ApiClient Client() const { return client::ApiClient(endpoint_, "client-key"); }
  uint16_t port() const { return endpoint_.port; }
  size_t idle_pooled() { return pool_.IdleCountForTest(AgentConnector::PoolKey(link_)); }
  size_t open_connections() const { return server_->open_connections(); }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  agent_client::AgentLink link_;
  agent_client::ProxyOptions options_;
  agent_client::ExtraHeaders extra_;
  AgentConnectionPool pool_;
  std::unique_ptr<http::Server> server_;
  Endpoint endpoint_;
  std::vector<std::thread> threads_;
};

std::string Get(Front& front, const std::string& target, int expect_status = 200) {
  auto res = front.Client().Request(bhttp::verb::get, target);
  REQUIRE(res);
  CHECK(res->status == expect_status);
  return res->body;
}

TEST_CASE("proxy: a pooled connection the agent closed while idle is not used again",
          "[proxy]") {
  TinyUpstream up;
  Front front(up.endpoint());
  CHECK(Get(front, "/a") == "conn=1 n=1 body=0");
  REQUIRE(WaitFor([&] { return front.idle_pooled() == 1; }));
  CHECK(Get(front, "/b") == "conn=1 n=2 body=0");  // reused
  REQUIRE(WaitFor([&] { return front.idle_pooled() == 1; }));
  up.CloseIdle();
  REQUIRE(WaitFor([&] { return up.open_connections() == 0; }));
  CHECK(Get(front, "/c") == "conn=2 n=1 body=0");
  CHECK(up.connections() == 2);
  CHECK(up.requests() == 3);
}

TEST_CASE("proxy: a replayable request on a pooled connection the agent closes under it is "
          "sent once more, on a new connection", "[proxy]") {
  TinyUpstream up;
  Front front(up.endpoint());
  CHECK(Get(front, "/a") == "conn=1 n=1 body=0");
  REQUIRE(WaitFor([&] { return front.idle_pooled() == 1; }));
  // The agent closes the connection as the next request arrives on it: the race the pool's
  // liveness check cannot see, and the retry's reason to be.
  up.set_mode(TinyUpstream::Mode::kDropReused);
  CHECK(Get(front, "/b") == "conn=2 n=1 body=0");
  CHECK(up.dropped() == 1);
  CHECK(up.requests() == 3);  // /a, /b dropped, /b again
  CHECK(up.connections() == 2);

  // A small body is replayable too: it goes again whole.
  REQUIRE(WaitFor([&] { return front.idle_pooled() == 1; }));
  auto posted = front.Client().Request(bhttp::verb::post, "/exec", std::string(1000, 'x'),
                                       "application/json");
  REQUIRE(posted);
  CHECK(posted->status == 200);
  CHECK(posted->body == "conn=3 n=1 body=1000");
  CHECK(up.dropped() == 2);
  CHECK(up.requests() == 5);

  // Only once: when the new connection fails too, that is the answer.
  REQUIRE(WaitFor([&] { return front.idle_pooled() == 1; }));
  up.set_mode(TinyUpstream::Mode::kDropAll);
  auto failed = front.Client().Request(bhttp::verb::get, "/c");
  REQUIRE(failed);
  CHECK(failed->status == 503);
  CHECK(up.requests() == 7);  // the pooled attempt and one retry
  CHECK(up.connections() == 4);
}

TEST_CASE("proxy: a request whose body streams never takes a pooled connection and is never "
          "sent twice", "[proxy]") {
  TinyUpstream up;
  Front front(up.endpoint());
  CHECK(Get(front, "/a") == "conn=1 n=1 body=0");
  REQUIRE(WaitFor([&] { return front.idle_pooled() == 1; }));
  up.set_mode(TinyUpstream::Mode::kDropAll);
  // 200 KiB of unknown length: chunked, streamed through, not replayable.
  const std::string body(200 * 1024, 'y');
  size_t offset = 0;
  client::BodySource source = [&](char* buf, size_t size) -> Result<size_t> {
    size_t n = std::min(size, body.size() - offset);
    std::memcpy(buf, body.data() + offset, n);
    offset += n;
    return n;
  };
  client::BodySink sink = [](std::string_view) { return Status{}; };
  auto status = front.Client().Stream(bhttp::verb::put, "/files/big", {}, source, std::nullopt,
                                      sink);
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::kUnavailable);  // berthd's 503
  CHECK(up.requests() == 2);
  CHECK(up.dropped() == 1);
  CHECK(up.connections() == 2);   // a new connection for the upload...
  CHECK(front.idle_pooled() == 1);  // ...and the pooled one left alone
}

TEST_CASE("proxy: a client that goes away while the agent works cancels the request",
          "[proxy]") {
  TinyUpstream up;
  Front front(up.endpoint());
  up.set_mode(TinyUpstream::Mode::kHold);
  const std::string requests[] = {
      "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n",
      // replayable: a small body read first
      "POST /exec HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
      // streamed: chunked, not replayable
      "PUT /files/f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\n\r\n",
  };
  int n = 0;
  for (const auto& request : requests) {
    ++n;
    INFO(request);
    UniqueFd client = testing::ConnectTcp(front.port());
    REQUIRE(client);
    REQUIRE(testing::SendAll(client.get(), request));
    REQUIRE(WaitFor([&] { return up.held() == n; }));
    auto closed_at = std::chrono::steady_clock::now();
    client.reset();
    // The agent sees its request's connection close at once, not when it would have answered.
    REQUIRE(WaitFor([&] { return up.held_closed() == n; }, 5s));
    CHECK(std::chrono::steady_clock::now() - closed_at < 2s);
    // And berthd keeps nothing of it: no connection, no socket in CLOSE_WAIT.
    REQUIRE(WaitFor([&] { return front.open_connections() == 0; }, 5s));
    CHECK(testing::CountTcpSockets(front.port(), testing::kTcpCloseWait) == 0);
  }
}

TEST_CASE("proxy: a client that goes away in the middle of a streamed answer cancels it",
          "[proxy]") {
  TinyUpstream up;
  Front front(up.endpoint());
  up.set_mode(TinyUpstream::Mode::kStreamThenHold);
  UniqueFd client = testing::ConnectTcp(front.port());
  REQUIRE(client);
  REQUIRE(testing::SendAll(client.get(), "GET /follow HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got;
  REQUIRE(testing::ReadUntil(client.get(), got, "first\n"));
  CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
  client.reset();
  // Without the watch the relay would wait for the agent's next byte (up to io_timeout).
  REQUIRE(WaitFor([&] { return up.held_closed() == 1; }, 5s));
  REQUIRE(WaitFor([&] { return front.open_connections() == 0; }, 5s));
}

TEST_CASE("proxy: the client watch leaves pipelined requests to be served in order", "[proxy]") {
  TinyUpstream up;
  Front front(up.endpoint());
  UniqueFd client = testing::ConnectTcp(front.port());
  REQUIRE(client);
  REQUIRE(testing::SendAll(client.get(),
                           "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /two HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got;
  REQUIRE(testing::ReadUntil(client.get(), got, "n=2 body=0"));
  auto first = got.find("conn=1 n=1 body=0");
  auto second = got.find("conn=1 n=2 body=0");
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(first < second);
}

TEST_CASE("proxy: an upgrade becomes a byte pipe both ways, early bytes and half-close included",
          "[proxy]") {
  TinyUpstream up;
  Front front(up.endpoint());
  up.set_mode(TinyUpstream::Mode::kUpgradeEcho);
  UniqueFd client = testing::ConnectTcp(front.port());
  REQUIRE(client);
  // Bytes right behind the header (a client that does not wait for the 101) go through too.
  REQUIRE(testing::SendAll(client.get(),
                           "GET /pipe HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                           "Upgrade: echo\r\n\r\nearly "));
  std::string got;
  REQUIRE(testing::ReadUntil(client.get(), got, "early "));
  CHECK(got.starts_with(
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n"));
  REQUIRE(testing::SendAll(client.get(), "later"));
  REQUIRE(testing::ReadUntil(client.get(), got, "later"));
  shutdown(client.get(), SHUT_WR);  // the echo ends when its input does
  CHECK(testing::ReadToEnd(client.get()).empty());
  REQUIRE(WaitFor([&] { return front.open_connections() == 0; }, 5s));
}

TEST_CASE("proxy: an agent that cannot be reached is a 503", "[proxy]") {
  Endpoint nowhere;
  {
    testing::TcpListener listener;  // a port nobody listens on once it is closed
    nowhere.kind = Endpoint::Kind::kTcp;
    nowhere.host = "127.0.0.1";
    nowhere.port = listener.port;
  }
  Front front(nowhere);
  auto res = front.Client().Json(bhttp::verb::get, "/v1/info");
  REQUIRE_FALSE(res);
  CHECK(res.error().code == ErrorCode::kUnavailable);
  CHECK(res.error().message.find("cannot be reached") != std::string::npos);
}

}  // namespace
}  // namespace berth
