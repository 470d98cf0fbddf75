// MCP's HTTP transport alone (no berthd in front): a request that is not in a session of its
// key reads at most an initialize's 64 KiB (32 MiB announced is a 413 before any byte is
// read), one naming a session it does not have reads nothing, and a body that trickles in
// meets one total deadline, not a deadline per read.
#include <chrono>

#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "mcp/mcp_http.h"
#include "tests/support/fake_server.h"
#include "tests/support/raw_http.h"

using namespace berth;
using testing::FakeServer;

namespace {

// MCP's HTTP transport alone, with a short body deadline.
class McpFixture {
 public:
  McpFixture() : pool_(1), mcp_(pool_, Options()) {
    REQUIRE(mcp_.SetApiUrl("http://127.0.0.1:9"));  // never reached by these tests
    http::Handler handler = [this](http::Exchange& ex) { return mcp::ServeMcpHttp(ex, mcp_); };
    server_ = std::make_unique<FakeServer>(handler);
  }
  ~McpFixture() {
    server_.reset();
    pool_.join();
  }
  uint16_t port() const { return server_->endpoint().port; }
  static mcp::McpHttpOptions Options() {
    mcp::McpHttpOptions options;
    options.body_timeout = std::chrono::seconds(1);
    return options;
  }

 private:
  boost::asio::thread_pool pool_;
  mcp::McpHttpContext mcp_;
  std::unique_ptr<FakeServer> server_;
};

std::string PostHead(uint64_t length, std::string_view extra = {}) {
  return fmt::format(
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer any\r\n"
      "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
      "{}Content-Length: {}\r\n\r\n",
      extra, length);
}

}  // namespace

TEST_CASE("MCP alone: a large body without a session is refused before it is read",
          "[hostile][mcp]") {
  McpFixture f;
  testing::RawConnection c(f.port());
  REQUIRE(c.ok());
  // 32 MiB announced; not one byte of it sent. Only a session's requests may be that large.
  REQUIRE(c.Send(PostHead(32u << 20)));
  std::string head = c.ReadHead(std::chrono::seconds(10));
  CHECK(head.starts_with("HTTP/1.1 413 "));
  // A session that this key does not have reads nothing either.
  testing::RawConnection d(f.port());
  REQUIRE(d.Send(PostHead(32u << 20, "Mcp-Session-Id: 0123456789abcdef0123456789abcdef\r\n")));
  CHECK(d.ReadHead(std::chrono::seconds(10)).starts_with("HTTP/1.1 404 "));
}

TEST_CASE("MCP: a body that trickles in hits one total deadline", "[hostile][mcp]") {
  McpFixture f;  // body_timeout 1 s; each read alone would have 60 s (io_timeout)
  testing::RawConnection c(f.port());
  REQUIRE(c.ok());
  REQUIRE(c.Send(PostHead(1000)));
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  // One byte every 100 ms: every read makes progress, the body never completes in time.
  for (int i = 0; i < 1000 && !closed; ++i) {
    if (!c.Send("[")) {
      closed = true;
      break;
    }
    if (c.WaitReadable(std::chrono::milliseconds(100))) closed = c.Closed();
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) break;
  }
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(closed);
  CHECK(took >= std::chrono::milliseconds(900));
  CHECK(took < std::chrono::seconds(10));
}
