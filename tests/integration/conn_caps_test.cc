// Connection caps and header deadlines (issue 12, "Floods and stalls"): berthd in-process on
// real loopback sockets. A flood of sockets without a key must not lock out a client with one;
// one source address or one key cannot take every slot; a socket that never sends an
// authenticated request cannot hold its slot past the header deadline, however it trickles.
// Loopback is all of 127/8, so floods come from 127.0.0.2 and the others from 127.0.0.1.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "tests/support/raw_http.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;

std::string Get(std::string_view target, std::string_view key) {
  std::string request = "GET " + std::string(target) + " HTTP/1.1\r\nHost: berthd\r\n";
  if (!key.empty()) request += "Authorization: Bearer " + std::string(key) + "\r\n";
  return request + "\r\n";
}

// The status line's code of a raw response ("HTTP/1.1 200 OK..." -> 200), 0 for none.
int StatusOf(const std::string& response) {
  if (!response.starts_with("HTTP/1.1 ") || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

nlohmann::json BodyOf(const std::string& response) {
  auto at = response.find("\r\n\r\n");
  if (at == std::string::npos) return nullptr;
  return ParseJson(response.substr(at + 4)).value_or(nullptr);
}

uint16_t PortOf(testing::TestBerthd& berthd) { return berthd.daemon().endpoint().port; }

}  // namespace

TEST_CASE("512 silent keyless sockets at the total cap: a keyed client is still served, the "
          "oldest silent one is shed",
          "[berthd][conn_caps]") {
  testing::TestBerthd berthd([](Config& c) {
    c.max_connections = 512;
    c.max_connections_per_source = 0;
    // Long enough that the deadline frees no slot during the test: shedding must.
    c.unauthenticated_header_timeout_s = 300;
  });
  std::vector<std::unique_ptr<RawConnection>> silent;
  for (int i = 0; i < 512; ++i) {
    silent.push_back(std::make_unique<RawConnection>(PortOf(berthd)));
    REQUIRE(silent.back()->ok());
  }
  // berthd accepts in connection order, so the keyed client comes after all 512: at the cap.
  RawConnection keyed(PortOf(berthd));
  REQUIRE(keyed.ok());
  REQUIRE(keyed.Send(Get("/v1/workspaces", berthd.admin_key())));
  auto answer = keyed.ReadResponse(20s);
  INFO(answer);
  CHECK(StatusOf(answer) == 200);
  CHECK(BodyOf(answer).contains("workspaces"));
  // The one that made room is the one that has waited longest.
  CHECK(silent.front()->WaitClosed(10s));
  CHECK_FALSE(silent.back()->Closed());
}

TEST_CASE("a flood from one source over the per-source cap is refused with 429 while another "
          "source is served",
          "[berthd][conn_caps]") {
  testing::TestBerthd berthd([](Config& c) { c.max_connections_per_source = 8; });
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 8; ++i) {
    flood.push_back(std::make_unique<RawConnection>(PortOf(berthd), "127.0.0.2"));
    REQUIRE(flood.back()->ok());
  }
  RawConnection over(PortOf(berthd), "127.0.0.2");
  REQUIRE(over.ok());
  // Refused before any request is read: the answer comes unasked, then the close.
  auto refusal = over.ReadResponse(10s);
  INFO(refusal);
  CHECK(StatusOf(refusal) == 429);
  CHECK(refusal.find("\r\nRetry-After: 5\r\n") != std::string::npos);
  auto body = BodyOf(refusal);
  CHECK(body["error"]["code"] == "too_many_connections");
  CHECK(body["error"]["message"].get<std::string>().find("per-source limit of 8 connections") !=
        std::string::npos);
  CHECK(over.WaitClosed(10s));

  RawConnection other(PortOf(berthd), "127.0.0.1");
  REQUIRE(other.ok());
  REQUIRE(other.Send(Get("/v1/workspaces", berthd.admin_key())));
  auto answer = other.ReadResponse(10s);
  INFO(answer);
  CHECK(StatusOf(answer) == 200);
  // The flood's own connections are untouched: the cap refuses the new, it sheds nothing.
  CHECK_FALSE(flood.front()->Closed());
}

TEST_CASE("unauthenticated sockets are closed at the header deadline however they trickle; "
          "an authenticated one waits the idle timeout",
          "[berthd][conn_caps]") {
  testing::TestBerthd berthd([](Config& c) { c.unauthenticated_header_timeout_s = 1; });
  const uint16_t port = PortOf(berthd);

  SECTION("a silent socket") {
    RawConnection silent(port);
    REQUIRE(silent.ok());
    // Not before the deadline (1 s)...
    CHECK_FALSE(silent.WaitReadable(500ms));
    // ...and soon after it (berthd's default without a key would be 30 s).
    CHECK(silent.WaitClosed(8s));
    CHECK(silent.received().empty());
  }

  SECTION("a slowloris socket sending a header byte every 100 ms") {
    RawConnection slow(port);
    // A header whose value never ends: each byte is valid, the head is never complete.
    REQUIRE(slow.Send("GET /v1/workspaces HTTP/1.1\r\nHost: berthd\r\nX-Slow: "));
    auto start = std::chrono::steady_clock::now();
    bool closed = false;
    // Each byte would reset a per-read timer; only a total deadline cuts this.
    while (!closed && std::chrono::steady_clock::now() - start < 8s) {
      if (!slow.Send("x")) break;  // the peer is gone
      closed = slow.WaitClosed(100ms);
    }
    CHECK((closed || slow.WaitClosed(1s)));
    CHECK(std::chrono::steady_clock::now() - start < 8s);
  }

  SECTION("a keyless keep-alive socket after its 401") {
    RawConnection keyless(port);
    REQUIRE(keyless.Send(Get("/v1/workspaces", "")));
    auto refused = keyless.ReadResponse(10s);
    INFO(refused);
    REQUIRE(StatusOf(refused) == 401);
    REQUIRE(refused.find("Connection: close") == std::string::npos);  // kept alive...
    // ...but only for the header deadline (berthd's idle timeout would be 120 s).
    CHECK(keyless.WaitClosed(8s));
  }

  SECTION("an authenticated socket outlives the deadline between requests") {
    RawConnection keyed(port);
    REQUIRE(keyed.Send(Get("/v1/workspaces", berthd.admin_key())));
    auto first = keyed.ReadResponse(10s);
    INFO(first);
    REQUIRE(StatusOf(first) == 200);
    // Three deadlines' worth of silence: still open, and the next request is served.
    CHECK_FALSE(keyed.WaitReadable(3s));
    REQUIRE(keyed.Send(Get("/v1/workspaces", berthd.admin_key())));
    auto second = keyed.ReadResponse(10s);
    INFO(second);
    CHECK(StatusOf(second) == 200);
  }
}

TEST_CASE("a key over its connection cap gets 429 naming the limit; other keys are served",
          "[berthd][conn_caps]") {
  testing::TestBerthd berthd([](Config& c) { c.max_connections_per_key = 2; });
  const uint16_t port = PortOf(berthd);
  // The key under test is a fresh one: the admin key's own connection that mints it may still
  // be counted for a moment after the call returns.
  auto minted = berthd.Admin().Json(http::bhttp::verb::post, "/v1/keys",
                                    nlohmann::json{{"scope", "write"}, {"name", "other"}});
  REQUIRE(minted);
  std::string key = (*minted)["key"];

  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<RawConnection>(port));
    REQUIRE(held.back()->Send(Get("/v1/workspaces", key)));
    auto ok = held.back()->ReadResponse(10s);
    INFO(ok);
    REQUIRE(StatusOf(ok) == 200);
  }
  RawConnection third(port);
  REQUIRE(third.Send(Get("/v1/workspaces", key)));
  auto refused = third.ReadResponse(10s);
  INFO(refused);
  CHECK(StatusOf(refused) == 429);
  CHECK(refused.find("\r\nRetry-After: 5\r\n") != std::string::npos);
  CHECK(refused.find("\r\nConnection: close\r\n") != std::string::npos);
  auto body = BodyOf(refused);
  CHECK(body["error"]["code"] == "too_many_connections");
  CHECK(body["error"]["message"].get<std::string>().find("per-key limit of 2 connections") !=
        std::string::npos);
  CHECK(third.WaitClosed(10s));

  // Another key is not held back by the first one's cap.
  RawConnection other(port);
  REQUIRE(other.Send(Get("/v1/workspaces", berthd.admin_key())));
  auto other_answer = other.ReadResponse(10s);
  INFO(other_answer);
  CHECK(StatusOf(other_answer) == 200);

  // Closing one of the key's connections frees its slot.
  held.pop_back();
  bool served = testing::WaitFor([&] {
    RawConnection again(port);
    if (!again.Send(Get("/v1/workspaces", key))) return false;
    return StatusOf(again.ReadResponse(10s)) == 200;
  });
  CHECK(served);
}

}  // namespace berth
