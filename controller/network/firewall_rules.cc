#include "controller/network/firewall_rules.h"

#include <fmt/format.h>

namespace berth::network {
namespace {

// Never reopened by anything: the host's loopback and "this host" addresses.
// Closed unless the operator opens them (network.open_cidrs). No two may overlap (interval
// sets refuse overlapping elements).
constexpr const char* kClosed4 =
    "0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, "
    "192.168.0.0/16, 224.0.0.0/4, 240.0.0.0/4";
constexpr const char* kClosed6 =
    "::/127, ::ffff:0:0/96, fc00::/7, fe80::/10, fec0::/10, ff00::/8";

std::string T() { return fmt::format("{} {}", kTableFamily, kTableName); }

std::string Elements(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += ", ";
    out += i;
  }
  return out;
}

std::vector<std::string> CidrStrings(const std::vector<Cidr>& cidrs, bool v6) {
  std::vector<std::string> out;
  for (const auto& c : cidrs) {
    if (c.v6 == v6) out.push_back(c.ToString());
  }
  return out;
}

// The workspace's objects, created if missing (`add` of an existing object is a no-op).
void DeclareWorkspace(std::string& b, uid_t uid) {
  std::string w = WorkspaceChain(uid);
  b += fmt::format("add chain {} {}\n", T(), w);
  b += fmt::format("add chain {} {}_refuse\n", T(), w);
  // Filled by the resolver, each element with its record's TTL. 65536 bounds what a guest can
  // make berthd put in the kernel by resolving allowed wildcard names.
  b += fmt::format("add set {} {}_dns4 {{ type ipv4_addr; flags timeout; size 65536; }}\n", T(), w);
  b += fmt::format("add set {} {}_dns6 {{ type ipv6_addr; flags timeout; size 65536; }}\n", T(), w);
  b += fmt::format("add set {} {}_net4 {{ type ipv4_addr; flags interval; auto-merge; }}\n", T(), w);
  b += fmt::format("add set {} {}_net6 {{ type ipv6_addr; flags interval; auto-merge; }}\n", T(), w);
  b += fmt::format("add set {} {}_seen4 {{ type ipv4_addr . inet_service; flags dynamic,timeout; "
                   "timeout {}s; size {}; }}\n", T(), w, kSeenTimeoutS, kSeenSize);
  b += fmt::format("add set {} {}_seen6 {{ type ipv6_addr . inet_service; flags dynamic,timeout; "
                   "timeout {}s; size {}; }}\n", T(), w, kSeenTimeoutS, kSeenSize);
  b += fmt::format("add counter {} {}_refused\n", T(), w);
  b += fmt::format("add counter {} {}_allowed\n", T(), w);
}

}  // namespace

std::string WorkspaceChain(uid_t uid) { return fmt::format("w{}", uid); }

std::string InstallBatch(const UidRange& range, const std::vector<Cidr>& open_cidrs) {
  std::string b;
  b += fmt::format("add table {}\n", T());
  b += fmt::format("add chain {} output {{ type filter hook output priority filter; policy accept; }}\n", T());
  // Before the filter: every port-53 destination of a workspace uid becomes its own resolver,
  // so a guest that ignores DHCP's resolver still gets the filtering one.
  b += fmt::format("add chain {} dns_nat {{ type nat hook output priority -100; policy accept; }}\n", T());
  b += fmt::format("add map {} ws_filter {{ type uid : verdict; }}\n", T());
  b += fmt::format("add map {} ws_dns {{ type uid : ipv4_addr; }}\n", T());
  b += fmt::format("add set {} closed4 {{ type ipv4_addr; flags interval; }}\n", T());
  b += fmt::format("add set {} closed6 {{ type ipv6_addr; flags interval; }}\n", T());
  b += fmt::format("add set {} open4 {{ type ipv4_addr; flags interval; auto-merge; }}\n", T());
  b += fmt::format("add set {} open6 {{ type ipv6_addr; flags interval; auto-merge; }}\n", T());
  b += fmt::format("add counter {} stray\n", T());
  b += fmt::format("flush chain {} output\n", T());
  b += fmt::format("flush chain {} dns_nat\n", T());
  for (const char* s : {"closed4", "closed6", "open4", "open6"}) b += fmt::format("flush set {} {}\n", T(), s);
  b += fmt::format("add element {} closed4 {{ {} }}\n", T(), kClosed4);
  b += fmt::format("add element {} closed6 {{ {} }}\n", T(), kClosed6);
  if (auto v4 = CidrStrings(open_cidrs, false); !v4.empty()) {
    b += fmt::format("add element {} open4 {{ {} }}\n", T(), Elements(v4));
  }
  if (auto v6 = CidrStrings(open_cidrs, true); !v6.empty()) {
    b += fmt::format("add element {} open6 {{ {} }}\n", T(), Elements(v6));
  }
  std::string uids = fmt::format("{}-{}", range.first, range.last());
  b += fmt::format("add rule {} output meta skuid vmap @ws_filter\n", T());
  // A uid of the range without a workspace: a passt or QEMU left over from a deleted one.
  b += fmt::format("add rule {} output meta skuid {} counter name stray reject\n", T(), uids);
  b += fmt::format("add rule {} dns_nat meta skuid {} meta nfproto ipv4 meta l4proto {{ tcp, udp }} "
                   "th dport 53 dnat ip to meta skuid map @ws_dns\n", T(), uids);
  return b;
}

std::string WorkspaceBatch(const WorkspaceRules& r) {
  std::string w = WorkspaceChain(r.uid);
  std::string refuse = w + "_refuse";
  std::string b;
  DeclareWorkspace(b, r.uid);
  b += fmt::format("flush chain {} {}\n", T(), w);
  b += fmt::format("flush chain {} {}\n", T(), refuse);
  b += fmt::format("flush set {} {}_net4\n", T(), w);
  b += fmt::format("flush set {} {}_net6\n", T(), w);
  if (r.flush_resolved) {
    b += fmt::format("flush set {} {}_dns4\n", T(), w);
    b += fmt::format("flush set {} {}_dns6\n", T(), w);
  }
  bool allowlist = r.policy.egress == Egress::kAllowlist;
  if (allowlist) {
    if (auto v4 = CidrStrings(r.policy.cidrs, false); !v4.empty()) {
      b += fmt::format("add element {} {}_net4 {{ {} }}\n", T(), w, Elements(v4));
    }
    if (auto v6 = CidrStrings(r.policy.cidrs, true); !v6.empty()) {
      b += fmt::format("add element {} {}_net6 {{ {} }}\n", T(), w, Elements(v6));
    }
  }
  auto rule = [&](const std::string& chain, const std::string& text) {
    b += fmt::format("add rule {} {} {}\n", T(), chain, text);
  };
  rule(w, "ct direction reply accept");
  rule(w, fmt::format("ip daddr {} meta l4proto {{ tcp, udp }} th dport 53 accept", r.resolver));
  rule(w, fmt::format("meta l4proto udp goto {}", refuse));
  rule(w, fmt::format("tcp dport 53 goto {}", refuse));
  rule(w, fmt::format("fib daddr type {{ local, broadcast, multicast, anycast }} goto {}", refuse));
  rule(w, fmt::format("ip daddr @closed4 ip daddr != @open4 goto {}", refuse));
  rule(w, fmt::format("ip6 daddr @closed6 ip6 daddr != @open6 goto {}", refuse));
  switch (r.policy.egress) {
    case Egress::kOpen:
      rule(w, fmt::format("counter name {}_allowed accept", w));
      break;
    case Egress::kNone:
      rule(w, fmt::format("goto {}", refuse));
      break;
    case Egress::kAllowlist:
      rule(w, fmt::format("ip daddr @{0}_net4 counter name {0}_allowed accept", w));
      rule(w, fmt::format("ip6 daddr @{0}_net6 counter name {0}_allowed accept", w));
      rule(w, fmt::format("ip daddr @{0}_dns4 counter name {0}_allowed accept", w));
      rule(w, fmt::format("ip6 daddr @{0}_dns6 counter name {0}_allowed accept", w));
      rule(w, fmt::format("goto {}", refuse));
      break;
  }
  // Recording is a rule of its own: a dynamic set that is full stops its rule, and must not
  // stop the reject.
  rule(refuse, fmt::format("meta l4proto {{ tcp, udp }} update @{}_seen4 {{ ip daddr . th dport }}", w));
  rule(refuse, fmt::format("meta l4proto {{ tcp, udp }} update @{}_seen6 {{ ip6 daddr . th dport }}", w));
  rule(refuse, fmt::format("counter name {}_refused", w));
  rule(refuse, "meta l4proto tcp reject with tcp reset");
  rule(refuse, "reject with icmpx admin-prohibited");
  b += fmt::format("add element {} ws_filter {{ {} : jump {} }}\n", T(), r.uid, w);
  b += fmt::format("add element {} ws_dns {{ {} : {} }}\n", T(), r.uid, r.resolver);
  return b;
}

std::string RemoveWorkspaceBatch(uid_t uid, const std::string& resolver) {
  std::string w = WorkspaceChain(uid);
  std::string b;
  DeclareWorkspace(b, uid);
  b += fmt::format("flush chain {} {}\n", T(), w);
  b += fmt::format("flush chain {} {}_refuse\n", T(), w);
  b += fmt::format("add element {} ws_filter {{ {} : jump {} }}\n", T(), uid, w);
  b += fmt::format("add element {} ws_dns {{ {} : {} }}\n", T(), uid, resolver);
  b += fmt::format("delete element {} ws_filter {{ {} }}\n", T(), uid);
  b += fmt::format("delete element {} ws_dns {{ {} }}\n", T(), uid);
  b += fmt::format("delete chain {} {}\n", T(), w);
  b += fmt::format("delete chain {} {}_refuse\n", T(), w);
  for (const char* s : {"dns4", "dns6", "net4", "net6", "seen4", "seen6"}) {
    b += fmt::format("delete set {} {}_{}\n", T(), w, s);
  }
  b += fmt::format("delete counter {} {}_refused\n", T(), w);
  b += fmt::format("delete counter {} {}_allowed\n", T(), w);
  return b;
}

std::string ResolvedBatch(uid_t uid, const std::vector<std::string>& v4,
                          const std::vector<std::string>& v6, int ttl_s) {
  std::string w = WorkspaceChain(uid);
  std::string b;
  auto add = [&](const char* set, const std::vector<std::string>& addrs) {
    if (addrs.empty()) return;
    std::string elements;
    for (const auto& a : addrs) {
      if (!elements.empty()) elements += ", ";
      elements += fmt::format("{} timeout {}s", a, ttl_s);
    }
    b += fmt::format("add element {} {}_{} {{ {} }}\n", T(), w, set, elements);
  };
  add("dns4", v4);
  add("dns6", v6);
  return b;
}

}  // namespace berth::network
