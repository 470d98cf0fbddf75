// The guest network of every workspace, behind the few calls the workspace service makes
// (DESIGN.md, "Guest network"; issue 11). It owns berthd's nftables table (Firewall), the
// filtering resolvers (ResolverHost) and the workspaces' uids (Store::AssignNetworkUid).
//
// Where the service calls it:
//   daemon start        NetworkManager::Start (installs the table, drops the rules of deleted
//                       workspaces, re-applies the others, restarts the resolvers of live VMs)
//   before a boot or    BeforeBoot(ws), before Transport::BeforeStart: assigns ws.net_uid (the
//   a resume            uid its QEMU and passt run as), applies the policy's rules, starts the
//                       resolver
//   policy changed      ApplyPolicy(ws) after the new policy is stored
//   VM stopped/saved    AfterStop(ws)
//   workspace deleted   Remove(ws)
//   API status          Read(ws); the idle loop's TakeDenied(ws) for `egress_denied` events
//
// With network.isolation off nothing is installed and Status says isolated: false, but BeforeBoot
// still assigns the workspace its uid: QEMU and passt run under it either way (issue 12). If the
// table cannot be installed, berthd still serves the API but BeforeBoot fails with that reason,
// so no guest boots unfiltered.
//
// Thread safety: every method may be called from any thread; all of them block (netlink,
// SQLite): call them off I/O threads.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "controller/network/firewall.h"
#include "controller/network/network_config.h"
#include "controller/network/policy.h"
#include "controller/network/resolver.h"
#include "controller/network/uid_range.h"
#include "controller/store/store.h"
#include "controller/workspace/workspace.h"

namespace berth::network {

struct NetworkStatus {
  Policy policy;
  bool isolated = false;
  std::optional<uid_t> uid;
  std::string resolver;  // the workspace's resolver address, when it has a uid
  FirewallCounters counters;
  ResolverStats dns;
  std::vector<RefusedDestination> refused;  // newest first
};

// Refusals since the last TakeDenied, for one `egress_denied` event.
struct DeniedSummary {
  uint64_t connections = 0;  // refused packets (a refused TCP connect is one)
  uint64_t names = 0;
  std::vector<RefusedDestination> destinations;  // the latest few
  std::vector<RefusedName> refused_names;
};

class NetworkManager {
 public:
  // At most one egress_denied event per workspace in this interval.
  static constexpr int64_t kDeniedEventEvery = 60;

  // Installs the table and reconciles it with the store (see the file comment). An install
  // failure is kept (install_error) rather than returned, so berthd can still serve the API;
  // an error here is a broken store or config.
  static Result<std::unique_ptr<NetworkManager>> Start(const NetworkConfig& config, store::Store& store,
                                                       std::function<int64_t()> clock);
  ~NetworkManager();

  bool isolation() const { return config_.isolation; }
  // Why guests cannot boot (the table could not be installed), if so.
  std::optional<Error> install_error() const { return install_error_; }

  // Before a boot or a resume, before the transport starts passt. Sets ws.net_uid (stored; with
  // isolation on or off) and, under isolation, ws.network (re-read from the store, which is what
  // gets applied).
  Status BeforeBoot(workspace::Workspace& ws);
  // The policy stored for `ws` (re-read: the caller stores first, then calls this) applies now:
  // rules rewritten in one transaction (established connections it forbids are cut at their
  // next packet), the addresses resolved under the old policy forgotten, the resolver answering
  // by the new one. A workspace without a uid (never booted with isolation) gets it at its
  // first boot.
  Status ApplyPolicy(const workspace::Workspace& ws);
  // The VM stopped or hibernated: its resolver closes. Its rules stay, so a passt that outlives
  // the VM is still held by them.
  void AfterStop(const workspace::Workspace& ws);
  // The workspace is being deleted: its rules and resolver go. Its uid goes with its record.
  Status Remove(const workspace::Workspace& ws);
  Result<NetworkStatus> Read(const workspace::Workspace& ws);
  // Refusals since the last call, at most once per kDeniedEventEvery seconds per workspace;
  // nullopt when there were none or it is too soon.
  std::optional<DeniedSummary> TakeDenied(const workspace::Workspace& ws);

  // Re-applies every workspace's rules and removes those of uids without one (start-up).
  Status Reconcile();
  const UidRange& uid_range() const { return range_; }

 private:
  NetworkManager(NetworkConfig config, store::Store& store, std::function<int64_t()> clock);
  WorkspaceRules RulesFor(uid_t uid, const Policy& policy, bool flush) const;

  NetworkConfig config_;
  store::Store& store_;
  std::function<int64_t()> clock_;
  UidRange range_;
  std::unique_ptr<Firewall> firewall_;
  std::unique_ptr<ResolverHost> resolvers_;
  std::optional<Error> install_error_;

  // Serializes applying a workspace's policy (boots and changes), each re-reading the stored one.
  std::mutex apply_mutex_;
  std::mutex mutex_;
  struct DeniedMark {
    uint64_t connections = 0;
    uint64_t names = 0;
    int64_t last_event = 0;
  };
  std::map<std::string, DeniedMark> denied_;  // by workspace id
};

}  // namespace berth::network
