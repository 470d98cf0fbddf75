// A workspace as the controller stores it, and its states (DESIGN.md, "Workspace
// lifecycle").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/network/policy.h"

namespace berth::workspace {

enum class State {
  kCreating,
  kStarting,
  kRunning,
  kStopping,
  kStopped,
  kHibernating,
  kHibernated,
  kDeleting,
  kError,
};
std::string_view StateName(State state);
std::optional<State> StateFromName(std::string_view name);
// States in which an operation is under way (a crash during one needs reconciling).
bool IsTransitional(State state);

enum class IdleAction { kStop, kHibernate };

struct Size {
  std::string_view name;
  int vcpus;
  int memory_mib;
};
// small (1 vCPU, 1 GiB), medium (2, 2 GiB), large (2, 4 GiB).
std::optional<Size> SizeByName(std::string_view name);

// Rolling checkpoints (`checkpoints: {every, keep}`, checkpoints.cc): a disk checkpoint of the
// running workspace every `every_s` seconds it was active, the newest `keep` of them kept.
struct CheckpointPolicy {
  int64_t every_s = 3600;
  int keep = 24;
  bool operator==(const CheckpointPolicy&) const = default;
};

struct Workspace {
  std::string id;         // "ws_" + 16 hex characters
  std::string tenant_id;
  std::string name;       // unique within the tenant
  std::string image;      // "base", "desktop"
  std::string image_version;
  std::optional<std::string> size;
  int vcpus = 1;
  int memory_mib = 1024;
  int disk_gib = 10;
  int64_t idle_timeout_s = 1800;
  IdleAction idle_action = IdleAction::kStop;
  std::optional<int64_t> max_runtime_s;
  std::optional<CheckpointPolicy> checkpoints;  // none: no rolling checkpoints
  bool auto_start = true;
  // The desktop's screen, "WIDTHxHEIGHT", chosen at create; the guest sets it from fw_cfg.
  std::string screen = "1280x800";
  nlohmann::json env = nlohmann::json::object();
  nlohmann::json labels = nlohmann::json::object();
  State state = State::kCreating;
  std::optional<std::string> error;
  std::string transport;  // "vsock" | "forward"
  std::string uuid;
  std::optional<int64_t> vsock_cid;
  int64_t created_at = 0;  // unix seconds
  int64_t updated_at = 0;
  std::optional<int64_t> started_at;
  std::optional<int64_t> last_active_at;
  std::optional<int64_t> agent_port;  // forward transport: host 127.0.0.1 port of this boot
  // Guest network: the egress policy, and the workspace's own uid from the reserved range
  // (assigned by Store::AssignNetworkUid on its first boot with isolation; never by
  // UpdateWorkspace, so a stale copy cannot drop it).
  network::Policy network;
  std::optional<int64_t> net_uid;
  // The disks' current top layers (layout.h) and the checkpoint they are overlays on (none:
  // the image). Written only with the checkpoints they concern (Store::CommitDisks), never by
  // UpdateWorkspace.
  int64_t disk_gen = 0;
  std::optional<std::string> disk_parent;
  // A restored checkpoint with memory: its id, until the start that resumes its memory (on
  // `disk_gen`'s layers, which are overlays on the ones the memory matches) runs.
  std::optional<std::string> resume_memory;
  // A fork (forks.cc): the checkpoint, another workspace's, its generation-0 layers are
  // overlays on; set at create and never changed. `fresh_identity`: its guest still holds the
  // identity of the machine it was forked from (hostname, machine-id, SSH host keys, MAC, the
  // agent token), until the boot that gives it its own; no request reaches it before.
  std::optional<std::string> from_checkpoint;
  bool fresh_identity = false;

  // The libvirt domain name.
  std::string DomainName() const { return "berth-" + id; }
};

// Names become hostnames and preview subdomains.
// A name of 1 to `max` characters (a DNS label's, 63, for tenants), lowercase letters,
// digits and '-', not starting or ending with '-'.
Status ValidateName(std::string_view name, size_t max = 63);
// A workspace's name: ValidateName, and short enough that `{port}-{name}` is one DNS label for
// every port (57), so every workspace has a working preview host (controller/preview/).
inline constexpr size_t kMaxWorkspaceName = 57;
inline Status ValidateWorkspaceName(std::string_view name) { return ValidateName(name, kMaxWorkspaceName); }

}  // namespace berth::workspace
