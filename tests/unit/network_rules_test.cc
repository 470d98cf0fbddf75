// Golden-file tests of berthd's nftables batches (like the domain XML): any change to the rules
// shows up as a diff to review. BERTH_UPDATE_GOLDEN=1 rewrites the files. That the kernel
// accepts them and that they hold is tests/integration/network_isolation_test.cc.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "controller/network/firewall_rules.h"

using namespace berth::network;

namespace {

void CheckGolden(const std::string& name, const std::string& actual) {
  std::string path = std::string(BERTH_SOURCE_DIR) + "/tests/unit/golden/" + name;
  if (std::getenv("BERTH_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << actual;
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream expected;
  expected << in.rdbuf();
  CHECK(actual == expected.str());
}

Policy Allowlist() {
  Policy p;
  p.egress = Egress::kAllowlist;
  p.names = {"github.com", "*.pypi.org"};
  p.cidrs = {ParseCidr("203.0.113.0/24").value(), ParseCidr("2001:db8::/32").value()};
  return p;
}

}  // namespace

TEST_CASE("nft: the install batch owns only table inet berth", "[network]") {
  auto batch = InstallBatch(UidRange{2000000, 65536}, {ParseCidr("10.20.0.0/16").value()});
  std::istringstream lines(batch);
  std::string line;
  while (std::getline(lines, line)) {
    INFO(line);
    CHECK(line.find(" inet berth") != std::string::npos);
  }
  CHECK(batch.find("meta skuid 2000000-2065535 counter name stray reject") != std::string::npos);
  CheckGolden("nft_install.nft", batch);
}

TEST_CASE("nft: an allowlist workspace", "[network]") {
  WorkspaceRules r;
  r.uid = 2000001;
  r.resolver = "127.77.0.1";
  r.policy = Allowlist();
  auto batch = WorkspaceBatch(r);
  // Host protection comes before the policy: an allowlisted CIDR cannot reopen a closed range.
  CHECK(batch.find("ip daddr @closed4 ip daddr != @open4") < batch.find("@w2000001_net4 counter"));
  CheckGolden("nft_workspace_allowlist.nft", batch);
}

TEST_CASE("nft: open and none differ only in the policy rule", "[network]") {
  WorkspaceRules r;
  r.uid = 2000002;
  r.resolver = "127.77.0.2";
  r.policy.egress = Egress::kOpen;
  r.flush_resolved = false;
  auto open = WorkspaceBatch(r);
  CHECK(open.find("flush set inet berth w2000002_dns4") == std::string::npos);
  CheckGolden("nft_workspace_open.nft", open);
  r.policy.egress = Egress::kNone;
  auto none = WorkspaceBatch(r);
  CHECK(none.find("add rule inet berth w2000002 goto w2000002_refuse\n") != std::string::npos);
  CHECK(none.find("w2000002_allowed accept") == std::string::npos);
}

TEST_CASE("nft: removal declares before it deletes, so it is idempotent", "[network]") {
  auto batch = RemoveWorkspaceBatch(2000001, "127.77.0.1");
  CHECK(batch.find("add chain inet berth w2000001\n") < batch.find("delete chain inet berth w2000001\n"));
  CHECK(batch.find("delete element inet berth ws_filter { 2000001 }") < batch.find("delete chain inet berth w2000001\n"));
  CheckGolden("nft_workspace_remove.nft", batch);
}

TEST_CASE("nft: resolved addresses carry their TTL", "[network]") {
  CHECK(ResolvedBatch(2000001, {"203.0.113.10"}, {"2001:db8::10"}, 360) ==
        "add element inet berth w2000001_dns4 { 203.0.113.10 timeout 360s }\n"
        "add element inet berth w2000001_dns6 { 2001:db8::10 timeout 360s }\n");
  CHECK(ResolvedBatch(2000001, {}, {}, 60).empty());
}
