// Pure parts of ports, tunnels and leases: /proc/net/tcp parsing, tunnel host checks, the
// lease wire types and keepawake's durations.
#include <catch2/catch.hpp>

#include "common/duration.h"

#include "common/protocol/ports.h"
#include "guest-agent/keepawake.h"
#include "guest-agent/ports_proc.h"
#include "guest-agent/tunnel_hosts.h"

using namespace berth;
using namespace std::chrono_literals;
namespace ip = boost::asio::ip;

namespace {

// Real lines from a Linux x86_64 host: a LISTEN on 127.0.0.1:39509 owned by uid 64055, a
// LISTEN on 0.0.0.0:2024, an ESTABLISHED connection (state 01) that must be skipped.
constexpr std::string_view kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode\n"
    "   0: 0100007F:9A55 00000000:0000 0A 00000000:00000000 00:00000000 00000000 64055        0 "
    "107329 1 000000002ad93e8d 100 0 0 10 0\n"
    "   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
    "1077 1 00000000bee0ec12 100 0 0 10 0\n"
    "   2: 0100007F:9A55 0100007F:BA42 01 00000000:00000059 00:00000000 00000000 64055        0 "
    "108685 1 00000000d0aa04d2 20 4 28 10 -1\n"
    "garbage line that is not a socket\n"
    "   3: 0100007F:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 5 1\n";

// ::1 port 8080 and :: port 22, as /proc/net/tcp6 prints them on little-endian machines.
constexpr std::string_view kTcp6 =
    "  sl  local_address                         remote_address                        st "
    "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A "
    "00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n"
    "   1: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A "
    "00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 100 0 0 10 0\n";

}  // namespace

TEST_CASE("ParseProcNetTcp keeps LISTEN sockets and skips the rest", "[ports]") {
  auto sockets = agent::ParseProcNetTcp(kTcp, false);
  REQUIRE(sockets.size() == 2);
  CHECK(sockets[0].port == 39509);
  CHECK(sockets[0].address == "127.0.0.1");
  CHECK(sockets[0].family == "ipv4");
  CHECK(sockets[0].uid == 64055);
  CHECK(sockets[0].inode == 107329);
  CHECK(sockets[1].port == 2024);
  CHECK(sockets[1].address == "0.0.0.0");
  CHECK(sockets[1].inode == 1077);
}

TEST_CASE("ParseProcNetTcp reads IPv6 addresses", "[ports]") {
  auto sockets = agent::ParseProcNetTcp(kTcp6, true);
  REQUIRE(sockets.size() == 2);
  CHECK(sockets[0].address == "::1");
  CHECK(sockets[0].port == 8080);
  CHECK(sockets[0].family == "ipv6");
  CHECK(sockets[0].uid == 1000);
  CHECK(sockets[1].address == "::");
  CHECK(sockets[1].port == 22);
}

TEST_CASE("ParseProcNetTcp survives empty and truncated text", "[ports]") {
  CHECK(agent::ParseProcNetTcp("", false).empty());
  CHECK(agent::ParseProcNetTcp("header only", false).empty());
  std::string cut(kTcp.substr(0, kTcp.size() / 2));
  CHECK(agent::ParseProcNetTcp(cut, false).size() <= 1);
  CHECK(agent::ParseProcNetTcp(kTcp, true).empty());  // IPv4 text read as IPv6: no match
}

TEST_CASE("socket links and command lines", "[ports]") {
  CHECK(agent::SocketInodeFromLink("socket:[107329]") == 107329);
  CHECK(agent::SocketInodeFromLink("pipe:[107329]") == 0);
  CHECK(agent::SocketInodeFromLink("socket:[]") == 0);
  CHECK(agent::SocketInodeFromLink("socket:[12x]") == 0);
  CHECK(agent::SocketInodeFromLink("/dev/null") == 0);
  CHECK(agent::JoinCmdline(std::string_view("python3\0-m\0http.server\0", 24)) ==
        "python3 -m http.server");
  CHECK(agent::JoinCmdline(std::string_view("abcdef\0", 7), 3) == "abc");
  CHECK(agent::JoinCmdline("").empty());
}

TEST_CASE("tunnel hosts: loopback and the guest's own addresses only", "[ports]") {
  std::vector<ip::address> own = {ip::make_address("10.0.2.15"), ip::make_address("fe80::5054:ff:fe12:3456"),
                                  ip::make_address("127.0.0.1")};
  CHECK(agent::TunnelAddress("", own)->to_string() == "127.0.0.1");
  CHECK(agent::TunnelAddress("localhost", own)->to_string() == "127.0.0.1");
  CHECK(agent::TunnelAddress("127.0.0.53", own)->to_string() == "127.0.0.53");
  CHECK(agent::TunnelAddress("::1", own)->to_string() == "::1");
  CHECK(agent::TunnelAddress("[::1]", own)->to_string() == "::1");
  CHECK(agent::TunnelAddress("10.0.2.15", own)->to_string() == "10.0.2.15");
  CHECK(agent::TunnelAddress("::ffff:10.0.2.15", own)->to_string() == "10.0.2.15");
  CHECK(agent::TunnelAddress("fe80::5054:ff:fe12:3456", own).has_value());

  for (std::string_view foreign : {"10.0.2.2", "8.8.8.8", "0.0.0.0", "::", "224.0.0.1",
                                   "::ffff:8.8.8.8", "2001:db8::1"}) {
    auto r = agent::TunnelAddress(foreign, own);
    INFO(foreign);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kPermissionDenied);
  }
  for (std::string_view bad : {"example.com", "127.0.0.1:80", "1.2.3", "[::1", "metadata"}) {
    auto r = agent::TunnelAddress(bad, own);
    INFO(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("the guest's interface addresses include loopback", "[ports]") {
  auto own = agent::InterfaceAddresses();
  bool loopback = false;
  for (const auto& a : own) loopback |= a.is_loopback();
  CHECK(loopback);
}

TEST_CASE("lease requests are bounded", "[leases]") {
  auto ok = protocol::LeaseRequestFromJson({{"reason", "make test"}, {"duration_s", 7200}});
  REQUIRE(ok);
  CHECK(ok->reason == "make test");
  CHECK(ok->duration == 7200s);
  CHECK(protocol::LeaseRequestFromJson({{"duration_s", 1}}).has_value());
  CHECK(protocol::LeaseRequestFromJson({{"duration_s", 604800}}).has_value());
  for (const nlohmann::json& bad :
       {nlohmann::json{{"duration_s", 0}}, nlohmann::json{{"duration_s", -5}},
        nlohmann::json{{"duration_s", 604801}}, nlohmann::json{{"duration_s", 1.5}},
        nlohmann::json{{"duration_s", "60"}}, nlohmann::json{{"reason", "x"}},
        nlohmann::json{{"duration_s", 18446744073709551615ull}},
        nlohmann::json{{"duration_s", 60}, {"reason", 5}},
        nlohmann::json{{"duration_s", 60}, {"reason", std::string(201, 'r')}},
        nlohmann::json::array(), nlohmann::json("x")}) {
    INFO(bad.dump());
    auto r = protocol::LeaseRequestFromJson(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
  CHECK(protocol::ParseLeaseId("42").value() == 42);
  CHECK_FALSE(protocol::ParseLeaseId("0"));
  CHECK_FALSE(protocol::ParseLeaseId("-1"));
  CHECK_FALSE(protocol::ParseLeaseId("4x"));
  CHECK_FALSE(protocol::ParseLeaseId(""));
  CHECK_FALSE(protocol::ParseLeaseId("99999999999999999999999"));
}

TEST_CASE("port lists round-trip through JSON", "[ports]") {
  protocol::PortInfo a;
  a.port = 8080;
  a.address = "127.0.0.1";
  a.family = "ipv4";
  a.pid = 12;
  a.process = "node";
  a.cmdline = "node server.js";
  a.user = "agent";
  protocol::PortInfo b;
  b.port = 22;
  b.address = "::";
  b.family = "ipv6";
  nlohmann::json list = {{"ports", {protocol::ToJson(a), protocol::ToJson(b)}}};
  CHECK(list["ports"][1]["pid"].is_null());
  auto back = protocol::PortListFromJson(list);
  REQUIRE(back);
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].pid == 12);
  CHECK((*back)[0].cmdline == "node server.js");
  CHECK_FALSE((*back)[1].pid);
  CHECK_FALSE(protocol::PortListFromJson({{"ports", {{{"port", 70000}}}}}));
  CHECK_FALSE(protocol::PortListFromJson(nlohmann::json::object()));
  CHECK_FALSE(protocol::ParseTunnelPort(0));
  CHECK_FALSE(protocol::ParseTunnelPort(65536));
  CHECK(protocol::ParseTunnelPort(65535).value() == 65535);
}

TEST_CASE("keepawake takes durations in the one common form", "[keepawake]") {
  CHECK(ParseDuration("90s").value() == 90s);
  CHECK(ParseDuration("30m").value() == 1800s);
  CHECK(ParseDuration("2h").value() == 7200s);
  CHECK(ParseDuration("1d").value() == 86400s);
  CHECK(ParseDuration("1h30m").value() == 5400s);
  CHECK(ParseDuration("45").value() == 45s);
  for (std::string_view bad : {"", "h", "1x", "-5m", "1h30", "1.5h", "99999999999d", "1h 30m"}) {
    INFO(bad);
    CHECK_FALSE(ParseDuration(bad));
  }
  // Zero is a duration; `berth-agent keepawake --for 0` refuses it itself.
  CHECK(ParseDuration("0").value() == 0s);
}
