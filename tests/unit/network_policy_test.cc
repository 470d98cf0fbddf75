// The egress policy and the operator's network config: what is accepted, what is refused and
// why, and how names match.
#include <catch2/catch.hpp>

#include "controller/network/network_config.h"
#include "controller/network/policy.h"
#include "controller/network/uid_range.h"
#include "controller/workspace/request.h"

using namespace berth;
using namespace berth::network;
using nlohmann::json;

namespace {

std::string ErrorOf(const json& body) {
  auto p = ParsePolicy(body);
  REQUIRE_FALSE(p);
  CHECK(p.error().code == ErrorCode::kInvalidArgument);
  return p.error().message;
}

}  // namespace

TEST_CASE("policy: open is the default and round-trips", "[network]") {
  auto p = ParsePolicy(json::object());
  REQUIRE(p);
  CHECK(p->egress == Egress::kOpen);
  CHECK(PolicyJson(*p) == json::parse(R"({"egress":"open","allow":[]})"));
}

TEST_CASE("policy: an allowlist keeps names and CIDRs apart, lowercased and normalized", "[network]") {
  auto p = ParsePolicy(json::parse(
      R"({"egress":"allowlist","allow":["GitHub.com.","*.pypi.org","203.0.113.7/24","2001:db8::1","github.com"]})"));
  REQUIRE(p);
  CHECK(p->names == std::vector<std::string>{"github.com", "*.pypi.org"});
  REQUIRE(p->cidrs.size() == 2);
  CHECK(p->cidrs[0].ToString() == "203.0.113.0/24");
  CHECK(p->cidrs[1].ToString() == "2001:db8::1/128");
  CHECK(PolicyJson(*p)["allow"] ==
        json::parse(R"(["github.com","*.pypi.org","203.0.113.0/24","2001:db8::1/128"])"));
}

TEST_CASE("policy: 'allow' alone means allowlist", "[network]") {
  auto p = ParsePolicy(json::parse(R"({"allow":["example.com"]})"));
  REQUIRE(p);
  CHECK(p->egress == Egress::kAllowlist);
}

TEST_CASE("policy: malformed bodies are refused with a reason", "[network]") {
  CHECK(ErrorOf(json::array()).find("must be an object") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"egress":"everything"})")).find("\"open\", \"none\" or \"allowlist\"") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"egress":"open","allow":["a.com"]})")).find("only for egress \"allowlist\"") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"egres":"open"})")).find("unknown field 'network.egres'") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":"a.com"})")).find("must be an array") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":[1]})")).find("must be strings") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":["com"]})")).find("two labels") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":["a.*.com"]})")).find("leading \"*.\"") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":["*"]})")).find("leading") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":["bad_host!.com"]})")).find("not a valid host name") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":["-a.com"]})")).find("not a valid host name") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":["10.0.0.0/33"]})")).find("prefix length") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":["300.1.1.1"]})")).find("not an IPv4 or IPv6") != std::string::npos);
  CHECK(ErrorOf(json::parse(R"({"allow":[""]})")).find("1 to 253") != std::string::npos);
  CHECK(ErrorOf(json{{"allow", {std::string(300, 'a') + ".com"}}}).find("1 to 253") != std::string::npos);
  json many = json::array();
  for (int i = 0; i < 257; ++i) many.push_back("h" + std::to_string(i) + ".example.com");
  CHECK(ErrorOf(json{{"allow", many}}).find("more than 256") != std::string::npos);
}

TEST_CASE("policy: exact names match only themselves, '*.' only subdomains", "[network]") {
  auto p = ParsePolicy(json::parse(R"({"allow":["github.com","*.pypi.org"]})"));
  REQUIRE(p);
  CHECK(NameAllowed(*p, "github.com"));
  CHECK(NameAllowed(*p, "GITHUB.COM."));
  CHECK_FALSE(NameAllowed(*p, "api.github.com"));
  CHECK_FALSE(NameAllowed(*p, "evilgithub.com"));
  CHECK(NameAllowed(*p, "files.pypi.org."));
  CHECK(NameAllowed(*p, "a.b.pypi.org"));
  CHECK_FALSE(NameAllowed(*p, "pypi.org"));
  CHECK_FALSE(NameAllowed(*p, "xpypi.org"));
  CHECK_FALSE(NameAllowed(*p, "example.com"));
  CHECK(NameAllowed(Policy{Egress::kOpen, {}, {}}, "anything.example"));
  CHECK_FALSE(NameAllowed(Policy{Egress::kNone, {}, {}}, "github.com"));
}

TEST_CASE("CIDRs: containment and overlap", "[network]") {
  auto wide = ParseCidr("10.0.0.0/8").value();
  auto narrow = ParseCidr("10.1.2.0/24").value();
  CHECK(wide.Contains(narrow));
  CHECK_FALSE(narrow.Contains(wide));
  CHECK(narrow.Overlaps(wide));
  CHECK_FALSE(ParseCidr("192.168.0.0/16")->Overlaps(wide));
  CHECK_FALSE(ParseCidr("::/0")->Overlaps(wide));  // families never overlap
}

TEST_CASE("network config: defaults, and refusals of what would open the host", "[network]") {
  auto c = ParseNetworkConfig(json::object());
  REQUIRE(c);
  CHECK(c->isolation);
  CHECK(c->uid_first == 2000000);
  CHECK(c->uid_count == 65536);
  auto opened = ParseNetworkConfig(json::parse(R"({"open_cidrs":["10.20.0.0/16","fd00:1::/64"],"upstream_dns":["192.0.2.1"]})"));
  REQUIRE(opened);
  CHECK(opened->open_cidrs.size() == 2);
  for (const char* bad : {R"({"open_cidrs":["127.0.0.1"]})", R"({"open_cidrs":["0.0.0.0/0"]})",
                          R"({"open_cidrs":["::1"]})", R"({"open_cidrs":["::/0"]})",
                          R"({"uid_range":{"first":1000,"count":10}})",
                          R"({"uid_range":{"first":2000000,"count":70000}})",
                          R"({"upstream_dns":["10.0.0.0/8"]})", R"({"isolation":"yes"})", R"({"nope":1})"}) {
    INFO(bad);
    auto r = ParseNetworkConfig(json::parse(bad));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("network config: debug forwards are off by default and take only guest ports", "[network]") {
  CHECK(ParseNetworkConfig(json::object())->debug_forwards.empty());
  auto c = ParseNetworkConfig(json::parse(R"({"debug_forwards":[{"guest":8080},{"guest":9001}]})"));
  REQUIRE(c);
  CHECK(c->debug_forwards == std::vector<uint16_t>{8080, 9001});
  // The host side is always berthd's pick on 127.0.0.1: no key names a host address or port.
  for (const char* bad : {R"({"debug_forwards":8080})", R"({"debug_forwards":[8080]})",
                          R"({"debug_forwards":[{"guest":0}]})", R"({"debug_forwards":[{"guest":65536}]})",
                          R"({"debug_forwards":[{"guest":-1}]})", R"({"debug_forwards":[{"guest":"8080"}]})",
                          R"({"debug_forwards":[{"guest":1024}]})",
                          R"({"debug_forwards":[{"guest":8080},{"guest":8080}]})",
                          R"({"debug_forwards":[{"guest":8080,"host":"0.0.0.0"}]})",
                          R"({"debug_forwards":[{"guest":8080,"host_port":80}]})",
                          R"({"debug_forwards":[{"guest":1},{"guest":2},{"guest":3},{"guest":4},{"guest":5},)"
                          R"({"guest":6},{"guest":7},{"guest":8},{"guest":9}]})"}) {
    INFO(bad);
    auto r = ParseNetworkConfig(json::parse(bad));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("resolv.conf: nameservers in order, scoped ones skipped", "[network]") {
  auto ns = NameserversFromResolvConf("# c\nnameserver 192.0.2.1\nsearch x\nnameserver fe80::1%eth0\nnameserver 2001:db8::53\n");
  CHECK(ns == std::vector<std::string>{"192.0.2.1", "2001:db8::53"});
}

TEST_CASE("uids: the lowest free one, and exhaustion says so", "[network]") {
  UidRange r{2000000, 3};
  CHECK(PickFreeUid(r, {}).value() == 2000000);
  CHECK(PickFreeUid(r, {2000000, 2000002, 5}).value() == 2000001);
  auto full = PickFreeUid(r, {2000000, 2000001, 2000002});
  REQUIRE_FALSE(full);
  CHECK(full.error().code == ErrorCode::kResourceExhausted);
  CHECK(ResolverAddress(UidRange{2000000, 65536}, 2000000 + 258) == "127.77.1.2");
}

TEST_CASE("create body: 'network' is parsed with the rest, and a bad one names the field", "[network]") {
  auto r = workspace::ParseCreateRequest(json::parse(R"({"name":"w","network":{"allow":["github.com"]}})"));
  REQUIRE(r);
  CHECK(r->network.egress == Egress::kAllowlist);
  CHECK(r->network.names == std::vector<std::string>{"github.com"});
  auto plain = workspace::ParseCreateRequest(json::parse(R"({"name":"w"})"));
  REQUIRE(plain);
  CHECK(plain->network.egress == Egress::kOpen);
  auto bad = workspace::ParseCreateRequest(json::parse(R"({"name":"w","network":{"egress":"sometimes"}})"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("network.egress") != std::string::npos);
}
