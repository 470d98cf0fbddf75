// How a workspace's VM gets its network and how berthd reaches its agent (DESIGN.md, "Host ↔
// guest transport"). Chosen once at start-up:
//   vsock    production: the agent on (CID, 1024); passt gives the guest outbound network.
//   forward  hosts without /dev/vhost-vsock: passt also forwards 127.0.0.1:PORT (a fresh port
//            per boot) to the agent's TCP port.
//   unix     tests: berth-agent runs as an ordinary host process on a unix socket next to the
//            disks (the hypervisor is libvirt's test driver, which runs no guest).
// Blocking; called from the workspace service's operation threads.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/endpoint.h"
#include "common/error.h"
#include "controller/hypervisor/domain_spec.h"
#include "controller/workspace/layout.h"
#include "controller/workspace/workspace.h"

namespace berth::workspace {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  // Before a boot (`resume` false) or a resume from hibernation: starts what the VM needs
  // (passt, a host agent), fills the transport fields of `spec` and may set ws.agent_port
  // (the caller persists it).
  virtual Status BeforeStart(Workspace& ws, const Layout& layout, bool resume,
                             hypervisor::DomainSpec& spec) = 0;
  // After the VM stopped (`saved` false) or was hibernated: ends what BeforeStart started if it
  // is still there.
  virtual void AfterStop(const Workspace& ws, const Layout& layout, bool saved) = 0;
  // While the VM runs, after a checkpoint moved its disks to generation ws.disk_gen: gives
  // those layers to its QEMU and the ones under them read-only (what BeforeStart does at a
  // boot). Called before the move too, so the QEMU can open the new layers.
  virtual Status AdoptLayers(const Workspace& /*ws*/, const Layout& /*layout*/) { return {}; }
  // While the VM runs: gives it a file of berthd's it is to open read-write for a while (a
  // diff's scratch overlay, diff.cc), as BeforeStart gives it its top layers.
  virtual Status AdoptScratch(const Workspace& /*ws*/, const std::filesystem::path& /*path*/) { return {}; }
  // Where the agent answers while the VM runs.
  virtual Result<Endpoint> AgentEndpoint(const Workspace& ws, const Layout& layout) const = 0;
  // True when the "guest" is the host itself (the unix transport): its CPU load says nothing
  // about the workspace, so it must not keep one awake.
  virtual bool SharesHostCpu() const { return false; }
};

struct TransportOptions {
  std::string name = "auto";    // which transport: auto | vsock | forward | unix
  std::string passt_binary = "/usr/bin/passt";
  std::string agent_binary;     // unix: the berth-agent to run
  std::string agent_user;       // unix: its --default-user
  // vsock and forward: every workspace's passt and QEMU run as the workspace's own uid
  // (ws.net_uid, which NetworkManager::BeforeBoot assigns before the transport's BeforeStart,
  // with isolation on or off); run/ belongs to that uid and the disks and token are made
  // private to it (0600). QEMU's group is `qemu_group` (Debian's /dev/kvm is root:kvm 0660; with
  // the uid's own gid QEMU fails "failed to initialize kvm: Permission denied", measured), or
  // the uid's own gid when no such group exists. passt's group is always the uid's own.
  std::string qemu_group = "kvm";
  // unix: host-process agents; when its hypervisor is a real one (the crash suite runs real
  // QEMU domains with a stub guest) QEMU runs as libvirt's own user and makes its VNC socket in
  // run/, which is given to this user (when it exists).
  std::string qemu_user = "libvirt-qemu";
  // Guest network isolation (controller/network/network_manager.h): passt points the guest's
  // DNS at the filtering resolver.
  bool network_isolation = false;
  // vsock and forward: guest ports passt also forwards from a fresh 127.0.0.1 port per boot,
  // logged (network.debug_forwards: benchmarks and debugging only, network_config.h says what
  // it opens). The unix transport has no guest network and ignores them.
  std::vector<uint16_t> debug_forwards;
};

// "auto" is vsock when /dev/vhost-vsock exists, forward otherwise.
Result<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options);

// The layers of other workspaces under a workspace's disks (a fork's: its source's checkpoint
// layers and theirs down to the image), from the qcow2 headers of the chain that starts at
// generation `top_gen`. The transports let the workspace's uid read them at each boot.
std::vector<std::filesystem::path> SharedLayersUnder(const Layout& layout, int64_t top_gen);
// Takes a deleted fork's uid off those layers' readers (a uid is given to another workspace
// later). Failures are logged.
void ForgetSharedLayers(const Layout& layout, int64_t top_gen, uid_t uid);

// A free TCP port on 127.0.0.1 (bound and released; passt binds it right after).
Result<uint16_t> PickLoopbackPort();

}  // namespace berth::workspace
