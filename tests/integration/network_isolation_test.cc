// Guest network isolation against the real kernel: berthd's nftables table and filtering
// resolver in a network namespace this test makes (tests/support/netns_lab.h), with processes
// running as workspace uids the way passt does. No packet leaves the machine.
#include <arpa/inet.h>
#include <grp.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "controller/network/network_manager.h"
#include "controller/network/passt.h"
#include "tests/support/netns_lab.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

using namespace berth;
using namespace berth::network;
using berth::testing::NetnsLab;
using nlohmann::json;

namespace {

constexpr uid_t kFirst = 2000000;

struct Fixture {
  Fixture() : dir("berth-net") {
    auto lab = NetnsLab::Get();
    if (!lab) FAIL("the network lab cannot be made: " << lab.error().message);
    // Each test starts from an empty ruleset in the lab's host namespace.
    std::system("nft delete table inet berth 2>/dev/null");
    auto opened = store::Store::Open(dir / "berth.db");
    REQUIRE(opened);
    store = std::move(*opened);
    REQUIRE(store->CreateTenant("t", 1));
    config.uid_first = kFirst;
    config.uid_count = 16;
    config.upstream_dns = {"203.0.113.53"};
    config.libvirt_qemu_dir.clear();  // the host's libvirt is not this test's business
  }

  workspace::Workspace Add(const std::string& id, const std::string& policy_json) {
    workspace::Workspace ws;
    ws.id = id;
    ws.tenant_id = "t_t";
    ws.name = id.substr(3);
    ws.image = "base";
    ws.image_version = "v1";
    ws.transport = "forward";
    ws.uuid = "uuid-" + id;
    ws.state = workspace::State::kStarting;
    ws.network = ParsePolicy(json::parse(policy_json)).value();
    REQUIRE(store->InsertWorkspace(ws));
    return ws;
  }

  std::unique_ptr<NetworkManager> Start() {
    auto m = NetworkManager::Start(config, *store, [this] { return now.load(); });
    REQUIRE(m);
    REQUIRE_FALSE((*m)->install_error());
    return std::move(*m);
  }

  // Whether a process running as `uid` gets an echo back from addr.
  static bool Reaches(uid_t uid, const std::string& addr) {
    return NetnsLab::RunAs(uid, [&] { return NetnsLab::Echo(addr, testing::kEchoPort) ? 0 : 1; }) == 0;
  }

  testing::TempDir dir;
  std::unique_ptr<store::Store> store;
  NetworkConfig config;
  std::atomic<int64_t> now{static_cast<int64_t>(time(nullptr))};
};

// stdout and stderr of a shell command (in the lab's namespace, like everything here).
std::string Capture(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::string NftList(const std::string& what) { return Capture("nft list " + what); }

bool Refused(const NetworkStatus& s, const std::string& addr) {
  for (const auto& d : s.refused) {
    if (d.address == addr && d.port == testing::kEchoPort) return true;
  }
  return false;
}

}  // namespace

TEST_CASE_METHOD(Fixture, "a workspace uid reaches nothing of the host, link-local or private, and the internet does answer",
                 "[network][netns]") {
  auto ws = Add("ws_open", R"({"egress":"open"})");
  auto net = Start();
  REQUIRE(net->BeforeBoot(ws));
  REQUIRE(ws.net_uid == kFirst);
  uid_t uid = kFirst;
  // The listeners are there: root (not filtered) reaches every one of them.
  for (const char* addr : {"127.0.0.1", "::1", "198.51.100.1", "10.254.0.1", "169.254.169.254", "10.254.0.2"}) {
    INFO(addr);
    REQUIRE(NetnsLab::Echo(addr, testing::kEchoPort));
  }
  CHECK(Reaches(uid, "203.0.113.10"));  // "the internet"
  for (const char* addr : {"127.0.0.1", "::1", "198.51.100.1", "10.254.0.1", "169.254.169.254", "10.254.0.2"}) {
    INFO(addr);
    CHECK_FALSE(Reaches(uid, addr));
  }
  // Another uid of the range that has no workspace (a passt left over) reaches nothing at all.
  CHECK_FALSE(Reaches(kFirst + 5, "203.0.113.10"));
  // Other uids are not berthd's business.
  CHECK(Reaches(4242, "10.254.0.2"));
  auto status = net->Read(ws);
  REQUIRE(status);
  CHECK(status->isolated);
  CHECK(status->counters.refused_packets >= 6);
  CHECK(status->counters.allowed_packets >= 1);
  CHECK(Refused(*status, "169.254.169.254"));
  CHECK(Refused(*status, "10.254.0.2"));
  CHECK(Refused(*status, "127.0.0.1"));
  // One egress_denied event's worth, then nothing until a minute has passed and more came.
  auto denied = net->TakeDenied(ws);
  REQUIRE(denied);
  CHECK(denied->connections == status->counters.refused_packets);
  CHECK_FALSE(denied->destinations.empty());
  CHECK_FALSE(net->TakeDenied(ws));
  CHECK_FALSE(Reaches(uid, "127.0.0.1"));
  CHECK_FALSE(net->TakeDenied(ws));  // too soon
  now += NetworkManager::kDeniedEventEvery;
  auto later = net->TakeDenied(ws);
  REQUIRE(later);
  CHECK(later->connections == 1);
}

TEST_CASE_METHOD(Fixture, "a private CIDR the operator opens is reachable; the host and metadata stay closed",
                 "[network][netns]") {
  config.open_cidrs = {ParseCidr("10.254.0.0/24").value()};
  auto ws = Add("ws_opened", R"({"egress":"open"})");
  auto net = Start();
  REQUIRE(net->BeforeBoot(ws));
  CHECK(Reaches(kFirst, "10.254.0.2"));
  CHECK_FALSE(Reaches(kFirst, "10.254.0.1"));  // the host's own address, inside the opened range
  CHECK_FALSE(Reaches(kFirst, "169.254.169.254"));
  CHECK_FALSE(Reaches(kFirst, "127.0.0.1"));
}

TEST_CASE_METHOD(Fixture, "allowlist by name: the resolver answers allowed names and opens their addresses only",
                 "[network][netns]") {
  auto ws = Add("ws_allow", R"({"egress":"allowlist","allow":["allowed.test"]})");
  auto net = Start();
  REQUIRE(net->BeforeBoot(ws));
  uid_t uid = kFirst;
  // Before any answer, allowed.test's address is closed like any other.
  CHECK_FALSE(Reaches(uid, "203.0.113.10"));
  // The guest asks the address passt gave it; nftables turns that into its own resolver.
  auto ask = [&](const std::string& server, const std::string& name, int* rcode) {
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    int rc = NetnsLab::RunAs(uid, [&] {
      auto a = NetnsLab::Query(server, name);
      int code = a ? a->rcode : 99;
      std::string first = a && !a->addresses.empty() ? a->addresses[0] : "";
      std::string line = std::to_string(code) + " " + first;
      return write(pipefd[1], line.data(), line.size()) > 0 ? 0 : 1;
    });
    close(pipefd[1]);
    char buf[128] = {};
    ssize_t n = read(pipefd[0], buf, sizeof buf - 1);
    close(pipefd[0]);
    REQUIRE(rc == 0);
    REQUIRE(n > 0);
    std::string out(buf, static_cast<size_t>(n));
    *rcode = std::stoi(out.substr(0, out.find(' ')));
    return out.substr(out.find(' ') + 1);
  };
  int rcode = -1;
  CHECK(ask(kGuestDnsAddress, "allowed.test", &rcode) == "203.0.113.10");
  CHECK(rcode == 0);
  // In the set for the record's TTL (300 s) plus the grace, before the answer came back.
  auto set = NftList(fmt::format("set inet berth w{}_dns4", uid));
  CHECK(set.find("203.0.113.10 timeout 6m") != std::string::npos);
  CHECK(Reaches(uid, "203.0.113.10"));
  CHECK(ask(kGuestDnsAddress, "denied.test", &rcode).empty());
  CHECK(rcode == 5);  // REFUSED
  // The raw address of denied.test is refused too.
  CHECK_FALSE(Reaches(uid, "203.0.113.20"));
  // DNS straight to another server ends at the filtering resolver all the same.
  CHECK(ask("203.0.113.53", "denied.test", &rcode).empty());
  CHECK(rcode == 5);
  auto status = net->Read(ws);
  REQUIRE(status);
  CHECK(status->dns.refused == 2);
  CHECK(status->dns.answered == 1);
  REQUIRE_FALSE(status->dns.recent_refused.empty());
  CHECK(status->dns.recent_refused[0].name == "denied.test.");
  CHECK(Refused(*status, "203.0.113.20"));
  // The workspace's uid reaches no other UDP service, even on an allowed address.
  int udp = NetnsLab::RunAs(uid, [] {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9999);
    inet_pton(AF_INET, "203.0.113.10", &to.sin_addr);
    return sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0 ? 0 : 1;
  });
  CHECK(udp == 0);
}

TEST_CASE_METHOD(Fixture, "a policy change cuts an established connection and applies to new ones at once",
                 "[network][netns]") {
  auto ws = Add("ws_cut", R"({"egress":"open"})");
  auto net = Start();
  REQUIRE(net->BeforeBoot(ws));
  int ready[2], go[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(go) == 0);
  // The child holds a connection open across the change, as passt does for a guest.
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kFirst, kFirst, kFirst) != 0 || setresuid(kFirst, kFirst, kFirst) != 0) _exit(255);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(testing::kEchoPort);
    inet_pton(AF_INET, "203.0.113.10", &to.sin_addr);
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c = 0;
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) _exit(10);
    if (write(fd, "a", 1) != 1 || read(fd, &c, 1) != 1) _exit(11);
    (void)!write(ready[1], "r", 1);
    (void)!read(go[0], &c, 1);
    // After the change: the next packet is refused with a reset.
    ssize_t w = write(fd, "b", 1);
    ssize_t r = w == 1 ? read(fd, &c, 1) : -1;
    _exit(r == 1 ? 1 : 0);
  }
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  auto changed = ws;
  changed.network = Policy{Egress::kNone, {}, {}};
  REQUIRE(store->UpdateWorkspace(changed));
  REQUIRE(net->ApplyPolicy(changed));
  REQUIRE(write(go[1], "g", 1) == 1);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the connection was cut
  CHECK_FALSE(Reaches(kFirst, "203.0.113.10"));
  changed.network = Policy{Egress::kOpen, {}, {}};
  REQUIRE(store->UpdateWorkspace(changed));
  REQUIRE(net->ApplyPolicy(changed));
  CHECK(Reaches(kFirst, "203.0.113.10"));  // open restores the internet
  // A boot holding a copy read before a change applies the stored policy, not its copy.
  auto stale = ws;  // egress open, as read before the changes
  changed.network = Policy{Egress::kNone, {}, {}};
  REQUIRE(store->UpdateWorkspace(changed));
  REQUIRE(net->ApplyPolicy(changed));
  REQUIRE(net->BeforeBoot(stale));
  CHECK(stale.network.egress == Egress::kNone);
  CHECK_FALSE(Reaches(kFirst, "203.0.113.10"));
  for (int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
}

TEST_CASE_METHOD(Fixture, "a restart leaves the rules right: no duplicates, nothing of deleted workspaces",
                 "[network][netns]") {
  auto a = Add("ws_a", R"({"egress":"open"})");
  auto b = Add("ws_b", R"({"allow":["allowed.test"]})");
  {
    auto net = Start();
    REQUIRE(net->BeforeBoot(a));
    REQUIRE(net->BeforeBoot(b));
  }
  uid_t ua = static_cast<uid_t>(*a.net_uid);
  uid_t ub = static_cast<uid_t>(*b.net_uid);
  CHECK(ua != ub);
  // b is deleted while berthd is down (its record goes; the rules stay behind).
  REQUIRE(store->DeleteWorkspace("ws_b"));
  auto before = std::system("nft list table inet berth > /dev/null");
  REQUIRE(before == 0);
  auto net = Start();
  auto table = std::string();
  {
    FILE* p = popen("nft list table inet berth", "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) table.append(buf, n);
    pclose(p);
  }
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = table.find(needle); at != std::string::npos; at = table.find(needle, at + 1)) ++n;
    return n;
  };
  CHECK(count("meta skuid vmap @ws_filter") == 1);
  CHECK(count(fmt::format("chain w{} {{", ua)) == 1);
  CHECK(count(fmt::format("w{}", ub)) == 0);
  CHECK(count("counter name \"stray\" reject") == 1);
  // The kept workspace still behaves, without a new BeforeBoot.
  CHECK(Reaches(ua, "203.0.113.10"));
  CHECK_FALSE(Reaches(ua, "127.0.0.1"));
  // Removing a workspace twice is fine; afterwards its uid is a stray.
  REQUIRE(net->Remove(a));
  REQUIRE(net->Remove(a));
  CHECK_FALSE(Reaches(ua, "203.0.113.10"));
}

TEST_CASE_METHOD(Fixture, "isolation off: nothing installed and the status says so, but each workspace still gets a uid of its own",
                 "[network][netns]") {
  config.isolation = false;
  auto ws = Add("ws_off", R"({"egress":"none"})");
  auto other = Add("ws_off2", R"({"egress":"open"})");
  auto m = NetworkManager::Start(config, *store, [] { return int64_t{0}; });
  REQUIRE(m);
  REQUIRE((*m)->BeforeBoot(ws));
  REQUIRE((*m)->BeforeBoot(other));
  // QEMU and passt run as it (issue 12): distinct, from the range, stored, and kept across boots.
  REQUIRE(ws.net_uid == kFirst);
  REQUIRE(other.net_uid == kFirst + 1);
  CHECK(store->GetWorkspaceById("ws_off")->net_uid == kFirst);
  REQUIRE((*m)->BeforeBoot(ws));
  CHECK(ws.net_uid == kFirst);
  CHECK(std::system("nft list table inet berth >/dev/null 2>&1") != 0);
  auto status = (*m)->Read(ws);
  REQUIRE(status);
  CHECK_FALSE(status->isolated);
  CHECK(status->policy.egress == Egress::kNone);
}

TEST_CASE_METHOD(Fixture, "an old table is removed for a berthd with isolation off, whose uids it would refuse",
                 "[network][netns]") {
  // An isolating berthd ran here and left its table...
  {
    auto first = Start();
    REQUIRE(first != nullptr);
  }
  REQUIRE(std::system("nft list table inet berth >/dev/null 2>&1") == 0);
  // ...whose catch-all refuses every uid of the range without a chain: a berthd with isolation
  // off runs its guests' passt and QEMU under such uids, so it removes the table first.
  auto removed = Firewall::RemoveTable();
  REQUIRE(removed);
  CHECK(*removed);
  CHECK(std::system("nft list table inet berth >/dev/null 2>&1") != 0);
  auto again = Firewall::RemoveTable();
  REQUIRE(again);
  CHECK_FALSE(*again);
}

TEST_CASE_METHOD(Fixture, "a real passt under the workspace uid: a guest's hand-made frames reach only what the policy allows",
                 "[network][netns][passt]") {
  REQUIRE(access("/usr/bin/passt", X_OK) == 0);
  auto ws = Add("ws_passt", R"({"egress":"allowlist","allow":["allowed.test"]})");
  auto net = Start();
  REQUIRE(net->BeforeBoot(ws));
  auto uid = static_cast<uid_t>(*ws.net_uid);
  testing::TempDir run("berth-net-run");
  REQUIRE(chown(run.path().c_str(), uid, uid) == 0);
  PasstOptions o;
  o.socket_path = run / "passt.sock";
  o.pid_file = run / "passt.pid";
  o.log_file = run / "passt.log";
  o.uid = uid;
  o.gid = uid;
  o.dns = kGuestDnsAddress;
  auto pid = StartPasst(o);
  REQUIRE(pid);
  // passt gives the guest the host's address on its default route and that route's gateway.
  std::string command = fmt::format(
      "python3 {}/tests/integration/passt_guest.py {} 10.254.0.1 10.254.0.2 "
      "127.0.0.1:{port} 198.51.100.1:{port} 169.254.169.254:{port} 10.254.0.2:{port} 203.0.113.10:{port} "
      "dns:denied.test dns:allowed.test 203.0.113.10:{port} 203.0.113.20:{port}",
      BERTH_SOURCE_DIR, o.socket_path, fmt::arg("port", testing::kEchoPort));
  std::string out = Capture(command);
  kill(*pid, SIGTERM);
  INFO(out);
  auto line = [&](const std::string& target) {
    auto at = out.find(target + " ");
    return at == std::string::npos ? std::string("missing") : out.substr(at + target.size() + 1, out.find('\n', at) - at - target.size() - 1);
  };
  // The host's loopback, its own address, the metadata address and a private address: reset by
  // the rules (without them, passt connects and the guest gets a SYN-ACK from each).
  for (const char* target : {"127.0.0.1:8080", "198.51.100.1:8080", "169.254.169.254:8080", "10.254.0.2:8080"}) {
    CHECK(line(target) == "RST");
  }
  // DNS to the address passt advertised ends at the filtering resolver; denied.test is refused.
  CHECK(line("dns:denied.test") == "5");
  CHECK(line("dns:allowed.test") == "0 203.0.113.10");
  // allowed.test's address was refused before the answer and is reachable after it.
  auto first = out.find("203.0.113.10:8080 ");
  REQUIRE(first != std::string::npos);
  CHECK(out.substr(first, out.find('\n', first) - first) == "203.0.113.10:8080 RST");
  auto second = out.find("203.0.113.10:8080 ", first + 1);
  REQUIRE(second != std::string::npos);
  CHECK(out.substr(second, out.find('\n', second) - second) == "203.0.113.10:8080 SYN-ACK");
  CHECK(line("203.0.113.20:8080") == "RST");
}
