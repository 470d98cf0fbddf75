// berthd's nftables table (firewall_rules.h says what the rules are), applied through
// libnftables in the calling thread's network namespace, and read back for the API.
// Thread-safe; blocking (netlink), call it off I/O threads.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "controller/network/firewall_rules.h"
#include "controller/network/nft.h"

namespace berth::network {

struct FirewallCounters {
  uint64_t refused_packets = 0;
  uint64_t refused_bytes = 0;
  uint64_t allowed_packets = 0;
  uint64_t allowed_bytes = 0;
};

struct RefusedDestination {
  std::string address;
  uint16_t port = 0;
  int64_t at = 0;  // unix seconds of the last refusal (to within a second)
};

class Firewall {
 public:
  // Opens libnftables and installs the table (InstallBatch). unavailable with nft's message
  // when the kernel or the permissions do not allow it.
  static Result<std::unique_ptr<Firewall>> Install(const UidRange& range, const std::vector<Cidr>& open_cidrs);
  // Deletes berthd's table if it is there (an isolating berthd ran on this host before); true
  // if there was one. For a berthd with isolation off, whose guests' uids the old table's
  // catch-all would refuse.
  static Result<bool> RemoveTable();

  Status Apply(const WorkspaceRules& rules);
  Status Remove(uid_t uid, const std::string& resolver);
  Status AddResolved(uid_t uid, const std::vector<std::string>& v4, const std::vector<std::string>& v6, int ttl_s);
  // The uids that have a workspace chain in the table (to remove those without a workspace).
  Result<std::vector<uid_t>> WorkspaceUids();
  Result<FirewallCounters> Counters(uid_t uid);
  // Newest first, at most kSeenSize per family.
  Result<std::vector<RefusedDestination>> Refused(uid_t uid, int64_t now);
  // The whole table as nft prints it (tests and diagnostics).
  Result<std::string> ListTableForTest();

 private:
  explicit Firewall(std::unique_ptr<Nft> nft) : nft_(std::move(nft)) {}
  std::unique_ptr<Nft> nft_;
};

}  // namespace berth::network
