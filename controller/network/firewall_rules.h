// The nftables rules of guest network isolation, as text (the `nft -f` language), one atomic
// batch per change. Pure, so the rules are golden-file tested (tests/unit/golden/nft_*.nft).
//
// berthd owns the table `inet berth` and nothing else in the ruleset. Its `output` chain sends
// every packet of a workspace uid (passt's and QEMU's sockets) to that workspace's chain
// `w<uid>` through the verdict map `ws_filter`; a uid of the reserved range with no workspace
// is refused outright. A workspace chain, in order:
//   1. replies on connections made *to* passt (berthd reaching the agent's forward) pass;
//   2. DNS to the workspace's own resolver passes (the `dns_nat` chain has already turned any
//      port-53 destination of the uid into that resolver); any other UDP, and TCP to port 53
//      anywhere else, is refused;
//   3. host protection: any address of the host itself (`fib daddr type local`, so addresses
//      that change are covered), broadcast and multicast; loopback and the closed ranges
//      (`closed4`/`closed6`: RFC 1918, 100.64.0.0/10, link-local, fc00::/7, ...) unless the
//      operator opened them (`open4`/`open6`);
//   4. the policy: open accepts, none refuses, allowlist accepts the workspace's CIDRs
//      (`w<uid>_net4/6`) and the addresses its resolver answered (`w<uid>_dns4/6`, each with
//      the record's TTL as timeout), and refuses the rest.
// Every packet is judged, not only new connections, so a policy change cuts established
// connections at their next packet. Refusals are TCP resets (ICMP otherwise) so passt, and the
// guest, learn at once; they are counted (`w<uid>_refused`) and the destination recorded with
// its time in `w<uid>_seen4/6` (bounded, an hour each).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "controller/network/policy.h"
#include "controller/network/uid_range.h"

namespace berth::network {

inline constexpr std::string_view kTableFamily = "inet";
inline constexpr std::string_view kTableName = "berth";
// How many refused destinations a workspace remembers, and for how long.
inline constexpr int kSeenSize = 64;
inline constexpr int kSeenTimeoutS = 3600;

std::string WorkspaceChain(uid_t uid);  // "w2000001"

// Creates the table and its shared chains, maps and sets if they are missing, and rewrites the
// shared rules and sets; workspace chains and their elements are left as they are. Idempotent.
std::string InstallBatch(const UidRange& range, const std::vector<Cidr>& open_cidrs);

struct WorkspaceRules {
  uid_t uid = 0;
  std::string resolver;  // its filtering resolver's IPv4 address (ResolverAddress)
  Policy policy;
  // Forget the addresses the resolver added (the allowed names changed); at boot and on every
  // policy change.
  bool flush_resolved = true;
};
// Creates or rewrites a workspace's chains and sets and points its uid at them. Idempotent.
std::string WorkspaceBatch(const WorkspaceRules& rules);
// Removes everything of a workspace; idempotent (objects are created first if missing, so the
// deletes cannot fail on something already gone).
std::string RemoveWorkspaceBatch(uid_t uid, const std::string& resolver);
// Adds addresses the resolver answered for an allowed name, each for `ttl_s` seconds
// (re-adding refreshes the timeout).
std::string ResolvedBatch(uid_t uid, const std::vector<std::string>& v4,
                          const std::vector<std::string>& v6, int ttl_s);

}  // namespace berth::network
