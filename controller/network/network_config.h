// The operator's side of guest networking: the "network" object of berthd's config file.
//   {"isolation": true, "open_cidrs": ["10.20.0.0/16"],
//    "uid_range": {"first": 2000000, "count": 65536}, "upstream_dns": ["192.0.2.53"],
//    "debug_forwards": [{"guest": 8080}]}
// Pure; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/network/policy.h"

namespace berth::network {

struct NetworkConfig {
  // Off: no firewall, no filtering resolver, and every workspace reports network.isolated false
  // (passt and QEMU still run as the workspace's own uid). For hosts without nftables; never the
  // default.
  bool isolation = true;
  // Private ranges the operator opens to every workspace (a company's package proxy). They
  // reopen only the closed private, shared and link-local ranges: loopback and the host's own
  // addresses stay closed whatever this says (a config naming loopback is refused).
  std::vector<Cidr> open_cidrs;
  // Each workspace gets one uid of this range for its passt and QEMU (isolation on or off);
  // nftables matches it.
  // Far above Debian's dynamic ranges (system < 1000, users < 60000, systemd's DynamicUser
  // 61184–65519, container subuids from 100000 in 65536 blocks), and at most 65536 uids so
  // that each maps onto its own resolver address in 127.77.0.0/16.
  uid_t uid_first = 2'000'000;
  uint32_t uid_count = 65536;
  // Where the filtering resolvers send the questions they allow. Empty: the nameservers of
  // /etc/resolv.conf at start-up.
  std::vector<std::string> upstream_dns;
  // Tools, overridable for tests.
  std::string passt_binary = "/usr/bin/passt";
  // libvirt's per-domain state (the master key QEMU reads at start) lives under this
  // directory, which Debian makes 0750 libvirt-qemu: a QEMU running as a workspace uid cannot
  // reach it. Start() adds search permission for others (o+x, not read: nobody lists it), as
  // libvirt's own packaging does (0751), isolation on or off. Empty: leave it alone (berthd
  // leaves it empty for the unix transport, which runs no QEMU).
  std::string libvirt_qemu_dir = "/var/lib/libvirt/qemu";
  // For benchmarks and debugging only (bench/run-preview-bench measures previews against it):
  // guest ports that every VM's passt also forwards from a port berthd picks on the host's
  // 127.0.0.1, logged at each boot ("debug forward 127.0.0.1:H -> guest port G"). Empty, the
  // default: the agent's forward is the only inbound path (DESIGN.md, "Guest network").
  // Not a hole in isolation: passt listens on loopback and only answers connections a host
  // process opened (nftables passes its replies, `ct direction reply`), so the guest reaches
  // nothing new. What it does open: the guest's server to every process on the host, with no
  // Berth key or preview token in the way. Hence the operator's config file only, never the API.
  std::vector<uint16_t> debug_forwards;
};

// At most this many debug forwards (each is a listening socket in every VM's passt).
inline constexpr size_t kMaxDebugForwards = 8;

// The "network" object; unknown keys and bad values are invalid_argument errors.
Result<NetworkConfig> ParseNetworkConfig(const nlohmann::json& j);

// The nameservers in a resolv.conf text (IPv4 and IPv6, in order).
std::vector<std::string> NameserversFromResolvConf(std::string_view text);

}  // namespace berth::network
