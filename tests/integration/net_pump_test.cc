// The one byte pump (common/net/pump.h) and the peer watch (common/net/peer_watch.h) on real
// sockets: TCP and unix, the copy path on a two-thread io_context (as berthd runs it) and the
// splice path on a one-thread io_context (as the agent runs it).
#include <catch2/catch.hpp>

#include <signal.h>

#include <future>
#include <random>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>

#include "common/net/peer_watch.h"
#include "common/net/pump.h"
#include "tests/support/sockets.h"

namespace berth {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using testing::ReadToEnd;
using testing::SendAll;

// An io_context run by `threads` threads for the length of a test.
struct IoThreads {
  explicit IoThreads(int threads) : io(threads), work(asio::make_work_guard(io)) {
    // splice(2) cannot take MSG_NOSIGNAL: a write to a peer that is gone raises SIGPIPE.
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < threads; ++i) pool.emplace_back([this] { io.run(); });
  }
  ~IoThreads() {
    work.reset();
    io.stop();
    for (auto& t : pool) t.join();
  }
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::vector<std::thread> pool;
};

std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(n);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

using PairFn = std::pair<UniqueFd, UniqueFd> (*)();

struct Case {
  const char* name;
  PairFn make_pair;
  int threads;
  bool splice;
};

const Case kCases[] = {
    {"tcp, copy, 2 threads", testing::TcpPair, 2, false},
    {"unix, copy, 2 threads", testing::UnixPair, 2, false},
    {"tcp, splice, 1 thread", testing::TcpPair, 1, true},
    {"unix, splice, 1 thread", testing::UnixPair, 1, true},
    {"unix to tcp, splice, 1 thread", nullptr, 1, true},
};

TEST_CASE("pump: bytes both ways, initial bytes first, half-close passed on", "[pump]") {
  for (const auto& c : kCases) {
    SECTION(c.name) {
      IoThreads io(c.threads);
      // c1 <-> a (pump) b <-> c2; "unix to tcp" pumps between a unix and a TCP socket.
      auto [c1, a_fd] = c.make_pair ? c.make_pair() : testing::UnixPair();
      auto [b_fd, c2] = c.make_pair ? c.make_pair() : testing::TcpPair();
      REQUIRE((c1 && a_fd && b_fd && c2));
      auto strand = asio::make_strand(io.io);
      auto a = net::AdoptSocket(strand, std::move(a_fd));
      auto b = net::AdoptSocket(strand, std::move(b_fd));
      REQUIRE((a && b));
      net::PumpOptions options;
      options.a_initial = "hello ";
      options.b_initial = "welcome ";
      options.splice = c.splice;
      auto done = asio::co_spawn(strand, net::Pump(*a, *b, options), asio::use_future);

      const std::string up = RandomBytes(8 << 20);
      const std::string down = RandomBytes(1 << 20);
      std::thread send_up([&] {
        CHECK(SendAll(c1.get(), up));
        shutdown(c1.get(), SHUT_WR);
      });
      std::thread send_down([&] {
        CHECK(SendAll(c2.get(), down));
        shutdown(c2.get(), SHUT_WR);
      });
      // c2 sees everything from c1 and then EOF while its own direction is still open.
      std::string at_c2 = ReadToEnd(c2.get());
      std::string at_c1 = ReadToEnd(c1.get());
      send_up.join();
      send_down.join();
      REQUIRE(done.wait_for(10s) == std::future_status::ready);
      auto stats = done.get();
      CHECK(at_c2.size() == 6 + up.size());
      CHECK(at_c2 == "hello " + up);
      CHECK(at_c1 == "welcome " + down);
      CHECK(stats.a_to_b == 6 + up.size());
      CHECK(stats.b_to_a == 8 + down.size());
      CHECK(stats.a_to_b_eof);
      CHECK(stats.b_to_a_eof);
      CHECK(stats.spliced == c.splice);
    }
  }
}

TEST_CASE("pump: taps see every byte delivered, in order, initial bytes included; a tap turns "
          "splice off", "[pump]") {
  IoThreads io(1);
  auto [c1, a_fd] = testing::UnixPair();
  auto [b_fd, c2] = testing::UnixPair();
  auto strand = asio::make_strand(io.io);
  auto a = net::AdoptSocket(strand, std::move(a_fd));
  auto b = net::AdoptSocket(strand, std::move(b_fd));
  REQUIRE((a && b));
  std::string seen_up;
  std::string seen_down;
  net::PumpOptions options;
  options.a_initial = "hello ";
  options.splice = true;  // asked for, but a tapped direction copies
  options.a_to_b_tap = [&](std::string_view bytes) { seen_up.append(bytes); };
  options.b_to_a_tap = [&](std::string_view bytes) { seen_down.append(bytes); };
  auto done = asio::co_spawn(strand, net::Pump(*a, *b, options), asio::use_future);
  const std::string up = RandomBytes(3 << 20);
  const std::string down = RandomBytes(1 << 20);
  std::thread send_up([&] {
    CHECK(SendAll(c1.get(), up));
    shutdown(c1.get(), SHUT_WR);
  });
  std::thread send_down([&] {
    CHECK(SendAll(c2.get(), down));
    shutdown(c2.get(), SHUT_WR);
  });
  std::string at_c2 = ReadToEnd(c2.get());
  std::string at_c1 = ReadToEnd(c1.get());
  send_up.join();
  send_down.join();
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  auto stats = done.get();
  CHECK(at_c2 == "hello " + up);
  CHECK(seen_up == at_c2);
  CHECK(seen_down == down);
  CHECK_FALSE(stats.spliced);
}

TEST_CASE("pump: a half-closed direction lets the other go on until its own end", "[pump]") {
  IoThreads io(2);
  auto [c1, a_fd] = testing::TcpPair();
  auto [b_fd, c2] = testing::TcpPair();
  auto strand = asio::make_strand(io.io);
  auto a = net::AdoptSocket(strand, std::move(a_fd));
  auto b = net::AdoptSocket(strand, std::move(b_fd));
  REQUIRE((a && b));
  auto done = asio::co_spawn(strand, net::Pump(*a, *b), asio::use_future);
  REQUIRE(SendAll(c1.get(), "request"));
  shutdown(c1.get(), SHUT_WR);  // like `nc -N`: "that was all", the answer still wanted
  CHECK(ReadToEnd(c2.get()) == "request");
  CHECK(done.wait_for(100ms) == std::future_status::timeout);  // b -> a still open
  REQUIRE(SendAll(c2.get(), "answer"));
  shutdown(c2.get(), SHUT_WR);
  CHECK(ReadToEnd(c1.get()) == "answer");
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  auto stats = done.get();
  CHECK(stats.a_to_b_eof);
  CHECK(stats.b_to_a_eof);
}

TEST_CASE("pump: a reset on one side ends both directions", "[pump]") {
  for (bool splice : {false, true}) {
    SECTION(splice ? "splice" : "copy") {
      IoThreads io(splice ? 1 : 2);
      auto [c1, a_fd] = testing::TcpPair();
      auto [b_fd, c2] = testing::TcpPair();
      auto strand = asio::make_strand(io.io);
      auto a = net::AdoptSocket(strand, std::move(a_fd));
      auto b = net::AdoptSocket(strand, std::move(b_fd));
      REQUIRE((a && b));
      net::PumpOptions options;
      options.splice = splice;
      auto done = asio::co_spawn(strand, net::Pump(*a, *b, options), asio::use_future);
      REQUIRE(SendAll(c1.get(), "some bytes"));
      std::string got;
      REQUIRE(testing::ReadUntil(c2.get(), got, "some bytes"));
      testing::ResetAndClose(c2);
      // c1 is told: its connection ends although it never closed its own side.
      ReadToEnd(c1.get());
      REQUIRE(done.wait_for(10s) == std::future_status::ready);
      auto stats = done.get();
      CHECK_FALSE((stats.a_to_b_eof && stats.b_to_a_eof));
      char byte;
      CHECK(recv(c1.get(), &byte, 1, MSG_DONTWAIT) <= 0);
    }
  }
}

TEST_CASE("pump: a reader that does not read stalls the writer (backpressure)", "[pump]") {
  IoThreads io(2);
  auto [c1, a_fd] = testing::TcpPair();
  auto [b_fd, c2] = testing::TcpPair();
  auto strand = asio::make_strand(io.io);
  auto a = net::AdoptSocket(strand, std::move(a_fd));
  auto b = net::AdoptSocket(strand, std::move(b_fd));
  REQUIRE((a && b));
  auto done = asio::co_spawn(strand, net::Pump(*a, *b), asio::use_future);
  // c2 never reads: what c1 can send is bounded by the socket buffers on the way and the
  // pump's one buffer, not by memory. An unbounded pump would take it all.
  const std::string block(1 << 20, 'x');
  size_t sent = 0;
  constexpr size_t kLimit = 256u << 20;
  while (sent < kLimit) {
    pollfd p{c1.get(), POLLOUT, 0};
    if (poll(&p, 1, 500) == 0) break;  // stalled: nothing drains c1 any more
    ssize_t n = send(c1.get(), block.data(), block.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) sent += static_cast<size_t>(n);
  }
  INFO("sent " << sent << " bytes before the writer stalled");
  CHECK(sent < 64u << 20);
  CHECK(sent > 0);
  // Draining c2 lets everything through.
  shutdown(c1.get(), SHUT_WR);
  CHECK(ReadToEnd(c2.get()).size() == sent);
  shutdown(c2.get(), SHUT_WR);
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  CHECK(done.get().a_to_b == sent);
}

TEST_CASE("pump: shutting its sockets down from another thread ends it", "[pump]") {
  IoThreads io(2);
  auto [c1, a_fd] = testing::UnixPair();
  auto [b_fd, c2] = testing::TcpPair();
  auto strand = asio::make_strand(io.io);
  auto a = net::AdoptSocket(strand, std::move(a_fd));
  auto b = net::AdoptSocket(strand, std::move(b_fd));
  REQUIRE((a && b));
  int a_native = a->native_handle();
  int b_native = b->native_handle();
  auto done = asio::co_spawn(strand, net::Pump(*a, *b), asio::use_future);
  CHECK(done.wait_for(50ms) == std::future_status::timeout);  // idle: both ends open
  // One side shut down is an EOF from it, passed on as a half-close; the other direction
  // still runs (the peer may have more to say).
  ::shutdown(a_native, SHUT_RDWR);
  CHECK(ReadToEnd(c2.get()).empty());
  CHECK(done.wait_for(50ms) == std::future_status::timeout);
  ::shutdown(b_native, SHUT_RDWR);
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  CHECK(ReadToEnd(c1.get()).empty());
}

// --- PeerWatch --------------------------------------------------------------------------------

TEST_CASE("peer watch: a peer that closes is seen, even when it closed before the watch began",
          "[peer_watch]") {
  IoThreads io(2);
  for (bool before : {false, true}) {
    SECTION(before ? "closed before" : "closed during") {
      auto [peer, mine] = testing::TcpPair();
      auto strand = asio::make_strand(io.io);
      auto socket = net::AdoptSocket(strand, std::move(mine));
      REQUIRE(socket);
      net::PeerWatch watch;
      if (before) {
        peer.reset();
        // The FIN has arrived (and the reactor may have seen its edge with nothing waiting).
        REQUIRE(testing::Readable(socket->native_handle(), 5s));
      }
      auto done = asio::co_spawn(strand, watch.Run(*socket), asio::use_future);
      if (!before) {
        CHECK(done.wait_for(50ms) == std::future_status::timeout);
        peer.reset();
      }
      REQUIRE(done.wait_for(10s) == std::future_status::ready);
      CHECK(done.get() == net::PeerWatch::Outcome::kClosed);
    }
  }
}

TEST_CASE("peer watch: bytes from the peer end the watch and stay unread", "[peer_watch]") {
  IoThreads io(2);
  auto [peer, mine] = testing::TcpPair();
  int mine_fd = mine.get();
  auto strand = asio::make_strand(io.io);
  auto socket = net::AdoptSocket(strand, std::move(mine));
  REQUIRE(socket);
  net::PeerWatch watch;
  auto done = asio::co_spawn(strand, watch.Run(*socket), asio::use_future);
  REQUIRE(SendAll(peer.get(), "GET / HTTP/1.1\r\n"));
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  CHECK(done.get() == net::PeerWatch::Outcome::kDataPending);
  char buf[64];
  ssize_t n = recv(mine_fd, buf, sizeof(buf), MSG_DONTWAIT);
  CHECK(std::string(buf, n > 0 ? n : 0) == "GET / HTTP/1.1\r\n");
}

TEST_CASE("peer watch: Stop ends it, before or while it waits", "[peer_watch]") {
  IoThreads io(2);
  auto [peer, mine] = testing::TcpPair();
  auto strand = asio::make_strand(io.io);
  auto socket = net::AdoptSocket(strand, std::move(mine));
  REQUIRE(socket);
  SECTION("while it waits") {
    net::PeerWatch watch;
    auto done = asio::co_spawn(strand, watch.Run(*socket), asio::use_future);
    // Posted behind the coroutine's start on the same strand: the read is pending by then.
    asio::post(strand, [&] { watch.Stop(); });
    REQUIRE(done.wait_for(10s) == std::future_status::ready);
    CHECK(done.get() == net::PeerWatch::Outcome::kStopped);
  }
  SECTION("before it starts") {
    net::PeerWatch watch;
    watch.Stop();
    auto done = asio::co_spawn(strand, watch.Run(*socket), asio::use_future);
    REQUIRE(done.wait_for(10s) == std::future_status::ready);
    CHECK(done.get() == net::PeerWatch::Outcome::kStopped);
  }
  // The connection is untouched: the peer's bytes still arrive.
  REQUIRE(SendAll(peer.get(), "x"));
  REQUIRE(testing::Readable(socket->native_handle(), 5s));
}

}  // namespace
}  // namespace berth
