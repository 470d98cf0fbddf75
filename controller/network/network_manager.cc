#include "controller/network/network_manager.h"

#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace berth::network {

using workspace::State;
using workspace::Workspace;

namespace {

// States in which the VM may be up, so its resolver must answer.
bool MayRun(State s) {
  return s == State::kStarting || s == State::kRunning || s == State::kStopping || s == State::kHibernating;
}

std::vector<std::string> Upstreams(const NetworkConfig& config) {
  if (!config.upstream_dns.empty()) return config.upstream_dns;
  std::ifstream in("/etc/resolv.conf");
  std::stringstream text;
  text << in.rdbuf();
  return NameserversFromResolvConf(text.str());
}

// libvirt's per-domain state (QEMU's master key) is under `dir`, which Debian makes 0750
// libvirt-qemu: a QEMU running as a workspace uid needs search permission there (o+x, not
// read: nobody lists it), as libvirt's own packaging gives it (0751).
void AllowQemuUidsIn(const std::string& dir) {
  if (dir.empty()) return;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & S_IXOTH)) return;
  if (::chmod(dir.c_str(), (st.st_mode & 07777) | S_IXOTH) == 0) {
    spdlog::info("{} is now searchable by the workspaces' QEMU uids (o+x)", dir);
  } else {
    spdlog::warn("cannot add o+x to {}: QEMU under a workspace uid will not start", dir);
  }
}

}  // namespace

NetworkManager::NetworkManager(NetworkConfig config, store::Store& store, std::function<int64_t()> clock)
    : config_(std::move(config)), store_(store), clock_(std::move(clock)) {
  range_.first = config_.uid_first;
  range_.count = config_.uid_count;
}

NetworkManager::~NetworkManager() = default;

Result<std::unique_ptr<NetworkManager>> NetworkManager::Start(const NetworkConfig& config, store::Store& store,
                                                              std::function<int64_t()> clock) {
  std::unique_ptr<NetworkManager> m(new NetworkManager(config, store, std::move(clock)));
  // With isolation on or off, QEMU runs as the workspace's uid and must reach its master key.
  AllowQemuUidsIn(config.libvirt_qemu_dir);
  if (!config.isolation) {
    spdlog::warn("guest network isolation is off (network.isolation): guests reach the host's "
                 "loopback and every address passt can connect to");
    return m;
  }
  auto firewall = Firewall::Install(m->range_, config.open_cidrs);
  if (!firewall) {
    m->install_error_ = firewall.error();  // the daemon logs it, with what to do
    return m;
  }
  m->firewall_ = std::move(*firewall);
  ResolverHostOptions ropt;
  ropt.upstreams = Upstreams(config);
  if (ropt.upstreams.empty()) {
    spdlog::warn("no upstream DNS server (network.upstream_dns, /etc/resolv.conf): guests resolve nothing");
  }
  Firewall* fw = m->firewall_.get();
  ropt.add_addresses = [fw](uid_t uid, const std::vector<std::string>& v4, const std::vector<std::string>& v6,
                            int ttl) { return fw->AddResolved(uid, v4, v6, ttl); };
  ropt.clock = m->clock_;
  m->resolvers_ = std::make_unique<ResolverHost>(std::move(ropt));
  if (auto s = m->Reconcile(); !s) return Fail(s.error());
  return m;
}

WorkspaceRules NetworkManager::RulesFor(uid_t uid, const Policy& policy, bool flush) const {
  WorkspaceRules r;
  r.uid = uid;
  r.resolver = ResolverAddress(range_, uid);
  r.policy = policy;
  r.flush_resolved = flush;
  return r;
}

Status NetworkManager::Reconcile() {
  if (!firewall_) return {};
  auto all = store_.ListAllWorkspaces();
  if (!all) return Fail(all.error());
  std::set<uid_t> live;
  for (const auto& ws : *all) {
    if (!ws.net_uid || !range_.Contains(*ws.net_uid)) continue;
    auto uid = static_cast<uid_t>(*ws.net_uid);
    live.insert(uid);
    // Addresses resolved before the restart stay: a running guest still holds their answers.
    if (auto s = firewall_->Apply(RulesFor(uid, ws.network, false)); !s) return s;
    if (MayRun(ws.state)) {
      if (auto s = resolvers_->Start(uid, ResolverAddress(range_, uid), ws.network); !s) {
        spdlog::warn("workspace {}: resolver: {}", ws.id, s.error().message);
      }
    }
  }
  auto present = firewall_->WorkspaceUids();
  if (!present) return Fail(present.error());
  for (uid_t uid : *present) {
    if (live.contains(uid) || !range_.Contains(uid)) continue;
    spdlog::info("network: removing the rules of uid {} (no workspace has it)", uid);
    if (auto s = firewall_->Remove(uid, ResolverAddress(range_, uid)); !s) return s;
  }
  return {};
}

Status NetworkManager::BeforeBoot(Workspace& ws) {
  if (config_.isolation && install_error_) {
    // failed_precondition: the boot loop ends the boot in error at once (another attempt
    // would fail the same way).
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("guest network isolation is not in place, so no guest boots: {}", install_error_->message));
  }
  // The workspace's own uid, isolated or not: its QEMU and passt run as it (a workspace made
  // before uids existed gets one now), so one escaped QEMU reaches no other workspace's files.
  auto uid = store_.AssignNetworkUid(ws.id, range_.first, range_.count);
  if (!uid) return Fail(uid.error());
  ws.net_uid = *uid;
  if (!config_.isolation) return {};
  auto u = static_cast<uid_t>(*uid);
  std::lock_guard lock(apply_mutex_);
  // The stored policy, not the caller's copy: a PATCH may have landed since the boot read it.
  auto fresh = store_.GetWorkspaceById(ws.id);
  if (!fresh) return Fail(fresh.error());
  ws.network = fresh->network;
  if (auto s = firewall_->Apply(RulesFor(u, ws.network, true)); !s) return s;
  return resolvers_->Start(u, ResolverAddress(range_, u), ws.network);
}

Status NetworkManager::ApplyPolicy(const Workspace& ws) {
  if (!config_.isolation || !firewall_) return {};
  std::lock_guard lock(apply_mutex_);
  // Re-read under the lock, so of two changes (or a change and a boot) the last applied is the
  // last stored.
  auto fresh = store_.GetWorkspaceById(ws.id);
  if (!fresh) return Fail(fresh.error());
  if (!fresh->net_uid) return {};  // never booted with isolation: its first boot applies it
  auto u = static_cast<uid_t>(*fresh->net_uid);
  // Rules first: once they are in, nothing the old policy allowed and the new one does not
  // can pass, whatever the resolver answers meanwhile.
  if (auto s = firewall_->Apply(RulesFor(u, fresh->network, true)); !s) return s;
  if (resolvers_->Running(u)) {
    if (auto s = resolvers_->SetPolicy(u, fresh->network); !s) return s;
  }
  return {};
}

void NetworkManager::AfterStop(const Workspace& ws) {
  if (!resolvers_ || !ws.net_uid) return;
  resolvers_->Stop(static_cast<uid_t>(*ws.net_uid));
}

Status NetworkManager::Remove(const Workspace& ws) {
  {
    std::lock_guard lock(mutex_);
    denied_.erase(ws.id);
  }
  if (!firewall_ || !ws.net_uid) return {};
  auto u = static_cast<uid_t>(*ws.net_uid);
  resolvers_->Stop(u);
  return firewall_->Remove(u, ResolverAddress(range_, u));
}

Result<NetworkStatus> NetworkManager::Read(const Workspace& ws) {
  NetworkStatus out;
  out.policy = ws.network;
  // A guest that has been running since before it had a uid of its own (berthd upgraded under
  // it) is not filtered until its next boot, and says so.
  out.isolated = config_.isolation && firewall_ != nullptr && (ws.net_uid || !MayRun(ws.state));
  if (!out.isolated || !ws.net_uid) return out;
  auto u = static_cast<uid_t>(*ws.net_uid);
  out.uid = u;
  out.resolver = ResolverAddress(range_, u);
  // A workspace that has a uid but whose rules are not in the table yet (a restart between
  // AssignNetworkUid and the first Apply) reads as zero counters.
  if (auto c = firewall_->Counters(u)) out.counters = *c;
  if (auto r = firewall_->Refused(u, clock_())) out.refused = std::move(*r);
  if (auto d = resolvers_->Stats(u)) out.dns = std::move(*d);
  return out;
}

std::optional<DeniedSummary> NetworkManager::TakeDenied(const Workspace& ws) {
  auto status = Read(ws);
  if (!status || !status->uid) return std::nullopt;
  std::lock_guard lock(mutex_);
  auto& mark = denied_[ws.id];
  int64_t now = clock_();
  // Counters restart from zero when the chain was re-created; so does the mark.
  if (status->counters.refused_packets < mark.connections) mark.connections = 0;
  if (status->dns.refused < mark.names) mark.names = 0;
  uint64_t connections = status->counters.refused_packets - mark.connections;
  uint64_t names = status->dns.refused - mark.names;
  if ((connections == 0 && names == 0) || now - mark.last_event < kDeniedEventEvery) return std::nullopt;
  mark.connections = status->counters.refused_packets;
  mark.names = status->dns.refused;
  mark.last_event = now;
  DeniedSummary d;
  d.connections = connections;
  d.names = names;
  for (size_t i = 0; i < status->refused.size() && i < 5; ++i) d.destinations.push_back(status->refused[i]);
  for (size_t i = 0; i < status->dns.recent_refused.size() && i < 5; ++i) {
    d.refused_names.push_back(status->dns.recent_refused[i]);
  }
  return d;
}

}  // namespace berth::network
