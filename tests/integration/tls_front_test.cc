// http::TlsFront's contracts (common/http/tls_front.h) on their own, in front of a plain
// http::Server whose handlers the test writes: the client's close_notify is a half-close that
// the answer outlives, a client that stops reading is cut off by the write deadline, the
// handshake caps, and Stop. A throwaway CA and certificate (tests/support/test_tls.h).
#include <catch2/catch.hpp>

#include <csignal>

#include <atomic>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/http/tls_front.h"
#include "tests/support/fake_server.h"
#include "tests/support/raw_http.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_tls.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The TLS front runs in berthd's process, which ignores SIGPIPE (controller/main.cc): a client
// that hangs up mid-write is an error there, not the end of the process. The same here, or one
// such hang-up kills the test binary (seen in a clean-clone run: SIGPIPE after 0.88 s).
const bool kSigpipeIgnored = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
using testing::RawConnection;
using testing::TlsClient;
using testing::WaitFor;

struct Flags {
  std::atomic<bool> client_closed{false};  // the test's client sent close_notify
  std::atomic<bool> big_failed{false};     // a write of /big failed
  std::atomic<bool> secure{false};
};

// Waits, holding no thread, until `flag` is set or 10 s pass.
http::Task<void> Until(const std::atomic<bool>& flag) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (int i = 0; i < 2000 && !flag.load(); ++i) {
    timer.expires_after(5ms);
    co_await timer.async_wait(boost::asio::use_awaitable);
  }
}

http::Task<void> Handle(http::Exchange& ex, Flags& flags) {
  flags.secure = ex.secure();
  if (ex.path() == "/after-close") {
    // Answers only once the client has half-closed: the answer must still reach it.
    co_await Until(flags.client_closed);
    std::string body = "still here";
    co_await testing::SendText(ex, "text/plain", body);
    co_return;
  }
  if (ex.path() == "/big") {
    // More than every buffer between here and a client that does not read.
    std::string chunk(1 << 20, 'x');
    if (!co_await ex.BeginFixed(http::bhttp::status::ok, "text/plain", 256ull << 20)) co_return;
    for (int i = 0; i < 256; ++i) {
      auto written = co_await ex.WriteRaw(chunk);
      if (!written) {
        flags.big_failed = true;
        co_return;
      }
    }
    co_return;
  }
  std::string body = "ok";
  co_await testing::SendText(ex, "text/plain", body);
}

// An http::Server behind a TlsFront on 127.0.0.1:0, run by two threads (as berthd's is).
class Fixture {
 public:
  explicit Fixture(const std::function<void(http::TlsFrontOptions&)>& customize = {}) {
    ca_.WriteCert(dir_.path() / "ca.pem");
    ca_.Issue("*.tls.test", "DNS:*.tls.test", 1, dir_.path() / "cert.pem", dir_.path() / "key.pem");
    http::ServerOptions server_options;
    server_options.io_timeout = std::chrono::seconds(120);  // longer than any test: the front acts first
    server_ = std::make_unique<http::Server>(io_, server_options,
                                             [this](http::Exchange& ex) { return Handle(ex, flags_); });
    http::TlsFrontOptions options;
    options.cert_file = dir_.path() / "cert.pem";
    options.key_file = dir_.path() / "key.pem";
    if (customize) customize(options);
    auto front = http::TlsFront::Create(io_, *server_, options);
    REQUIRE(front);
    front_ = std::move(*front);
    auto bound = front_->Listen(*Endpoint::Parse("tcp:127.0.0.1:0"));
    REQUIRE(bound);
    port_ = bound->port;
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this] {
        auto guard = boost::asio::make_work_guard(io_);
        io_.run();
      });
    }
  }
  ~Fixture() {
    Stop();
    io_.stop();
    for (auto& t : threads_) t.join();
  }
  void Stop() {
    front_->Stop();
    server_->Stop();
  }
  TlsClient::Options Client(const char* source = nullptr) {
    TlsClient::Options o;
    o.sni = "x.tls.test";
    o.ca_file = dir_.path() / "ca.pem";
    o.source = source;
    return o;
  }
  uint16_t port() const { return port_; }
  Flags& flags() { return flags_; }

 private:
  testing::TempDir dir_{"tls-front"};
  testing::TestCa ca_;
  Flags flags_;
  boost::asio::io_context io_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::TlsFront> front_;
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("tls front: the client's close_notify is a half-close; the answer still arrives, then close_notify",
          "[tls]") {
  Fixture f;
  TlsClient c(f.port(), f.Client());
  REQUIRE(c.ok());
  REQUIRE(c.Send("GET /after-close HTTP/1.1\r\nHost: x.tls.test\r\n\r\n"));
  REQUIRE(c.SendCloseNotify());
  f.flags().client_closed = true;
  auto all = c.ReadToClose();
  INFO(all);
  CHECK(all.starts_with("HTTP/1.1 200"));
  CHECK(all.ends_with("still here"));
  CHECK(c.closed_cleanly());
  CHECK(f.flags().secure);
}

TEST_CASE("tls front: a client that stops reading is cut off at the write deadline", "[tls]") {
  Fixture f([](http::TlsFrontOptions& o) { o.write_timeout = 300ms; });
  TlsClient c(f.port(), f.Client());
  REQUIRE(c.ok());
  REQUIRE(c.Send("GET /big HTTP/1.1\r\nHost: x.tls.test\r\n\r\n"));
  // The client reads nothing; the server's own write deadline is minutes away.
  CHECK(WaitFor([&] { return f.flags().big_failed.load(); }, 20s));
}

TEST_CASE("tls front: handshakes are capped per source address; the rest are closed at accept", "[tls]") {
  Fixture f([](http::TlsFrontOptions& o) {
    o.max_handshakes_per_source = 2;
    o.handshake_timeout = 10s;
  });
  auto a = std::make_unique<RawConnection>(f.port(), "127.0.0.5");
  auto b = std::make_unique<RawConnection>(f.port(), "127.0.0.5");
  REQUIRE(a->ok());
  REQUIRE(b->ok());
  // Both are in their handshake (silent); a third from the same address is closed at once,
  // long before the deadline.
  CHECK(WaitFor([&] {
    RawConnection third(f.port(), "127.0.0.5");
    return third.ok() && third.WaitClosed(200ms);
  }, 5s));
  // Another address is served, and so is this one once a handshake slot frees up.
  TlsClient other(f.port(), f.Client("127.0.0.6"));
  CHECK(other.ok());
  a.reset();
  b.reset();
  CHECK(WaitFor([&] {
    TlsClient again(f.port(), f.Client("127.0.0.5"));
    return again.ok();
  }));
}

TEST_CASE("tls front: Stop closes handshaking and pumping connections", "[tls]") {
  Fixture f;
  TlsClient pumping(f.port(), f.Client());
  REQUIRE(pumping.ok());
  REQUIRE(pumping.Send("GET / HTTP/1.1\r\nHost: x.tls.test\r\n\r\n"));
  CHECK(pumping.ReadResponse().starts_with("HTTP/1.1 200"));
  RawConnection handshaking(f.port());
  REQUIRE(handshaking.ok());
  f.Stop();
  CHECK(handshaking.WaitClosed(10s));
  auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(pumping.ReceiveSome());  // ends now, not at the read timeout
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  // Nothing is accepted any more.
  TlsClient late(f.port(), f.Client());
  CHECK_FALSE(late.ok());
}

}  // namespace berth
