#include <linux/vm_sockets.h>

#include <catch2/catch.hpp>

#include "common/endpoint.h"

using berth::Endpoint;

TEST_CASE("endpoints parse and print") {
  auto unix_ep = Endpoint::Parse("unix:/run/x.sock");
  REQUIRE(unix_ep);
  CHECK(unix_ep->kind == Endpoint::Kind::kUnix);
  CHECK(unix_ep->path == "/run/x.sock");

  auto tcp = Endpoint::Parse("tcp:127.0.0.1:7000");
  REQUIRE(tcp);
  CHECK(tcp->host == "127.0.0.1");
  CHECK(tcp->port == 7000);
  CHECK(tcp->ToString() == "tcp:127.0.0.1:7000");

  auto v6 = Endpoint::Parse("tcp:[::1]:80");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->ToString() == "tcp:[::1]:80");

  auto listen = Endpoint::Parse("vsock:1024");
  REQUIRE(listen);
  CHECK(listen->cid == VMADDR_CID_ANY);
  CHECK(listen->port == 1024);
  auto dial = Endpoint::Parse("vsock:42:1024");
  REQUIRE(dial);
  CHECK(dial->cid == 42);
  CHECK(dial->ToString() == "vsock:42:1024");
  REQUIRE(dial->ToAsio());
  CHECK(dial->ToAsio()->data()->sa_family == AF_VSOCK);
}

TEST_CASE("bad endpoints are refused with a reason") {
  for (const char* bad : {"", "unix:", "tcp:1.2.3.4", "tcp::80", "tcp:1.2.3.4:99999",
                          "vsock:x", "http://x", "tcp:1.2.3.4:80x"}) {
    INFO(bad);
    auto ep = Endpoint::Parse(bad);
    REQUIRE_FALSE(ep);
    CHECK(ep.error().code == berth::ErrorCode::kInvalidArgument);
  }
  REQUIRE_FALSE(Endpoint::Parse("unix:/" + std::string(200, 'a')));
  auto named = Endpoint::Parse("tcp:example.com:80");
  REQUIRE(named);
  CHECK_FALSE(named->ToAsio());  // only numeric hosts: no DNS lookups on a hot path
}
