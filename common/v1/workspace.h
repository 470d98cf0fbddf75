// Wire types of berthd's workspace routes (docs/api.md, "Workspaces"): the workspace as every
// route answers it, the create and patch bodies, the list filter and its pages, and the wait
// body. JSON both ways; parsers are strict (types, bounds, required fields) and never throw.
//
//   POST  /v1/workspaces                CreateWorkspace -> 201 Workspace (200 on an idempotent retry)
//   GET   /v1/workspaces?FILTER         -> WorkspacePage {workspaces, next}
//   GET   /v1/workspaces/{ws}           -> Workspace
//   PATCH /v1/workspaces/{ws}           PatchWorkspace -> Workspace
//   DELETE, POST …/start|stop|hibernate|restart  -> 202 Workspace; …/keepalive -> 200
//   POST  /v1/workspaces/{ws}/wait      WaitRequest -> Workspace | 409 | 504
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/v1/reader.h"

namespace berth::v1 {

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
// Whether a workspace in `state` stays there until someone acts (stopped, hibernated, running,
// error), rather than moving on by itself (creating, starting, stopping, hibernating, deleting).
bool IsSettled(State state);

enum class IdleAction { kStop, kHibernate };
std::string_view IdleActionName(IdleAction action);
std::optional<IdleAction> IdleActionFromName(std::string_view name);

// Why a running workspace is awake: what keeps it so now (empty: nothing, the idle timer runs)
// and when its idle action runs if nothing happens.
struct Awake {
  Awake() = default;
  std::vector<std::string> reasons;
  std::optional<int64_t> idle_at;  // unix seconds
};

// A workspace's egress policy (docs/api.md, "Network"): "open" | "none" | "allowlist", and the
// names (exact or "*.") and CIDRs an allowlist lets through. berthd validates them.
struct NetworkPolicy {
  NetworkPolicy() = default;
  std::string egress = "open";
  std::vector<std::string> allow;
};
nlohmann::json ToJson(const NetworkPolicy& policy);
Result<NetworkPolicy> NetworkPolicyFromJson(const nlohmann::json& json);

// Rolling checkpoints: a disk checkpoint every `every` seconds the workspace was active, the
// newest `keep` kept.
struct CheckpointPolicy {
  int64_t every = 0;
  int64_t keep = 0;
};

struct Workspace {
  Workspace() = default;
  std::string id;  // "ws_" + 16 hex
  std::string name;
  std::string tenant;
  std::string image;
  std::string image_version;
  std::optional<std::string> size;  // null for a custom cpus/memory_mib
  int cpus = 1;
  int memory_mib = 1024;
  int disk_gib = 10;
  int64_t idle_timeout = 1800;  // seconds
  IdleAction idle_action = IdleAction::kStop;
  std::optional<int64_t> max_runtime;  // seconds
  std::optional<CheckpointPolicy> checkpoints;  // rolling checkpoints; none: off
  bool auto_start = true;
  std::string screen = "1280x800";  // the desktop's, WIDTHxHEIGHT
  StringMap env;
  StringMap labels;
  State state = State::kCreating;
  std::optional<std::string> error;
  std::string transport;
  int64_t created_at = 0;  // unix seconds; ISO 8601 on the wire
  int64_t updated_at = 0;
  std::optional<int64_t> started_at;
  std::optional<int64_t> last_active_at;
  std::optional<Awake> awake;  // only while running
  std::optional<NetworkPolicy> network;
  // A fork's: the checkpoint (another workspace's) its disks were made on; null otherwise.
  std::optional<std::string> forked_from;
};
nlohmann::json ToJson(const Workspace& ws);
Result<Workspace> WorkspaceFromJson(const nlohmann::json& json);

// The body of POST /v1/workspaces: unset fields take berthd's defaults (image base, size
// small, disk 10 GiB, idle 1800 s, stop). Ranges are berthd's to check.
struct CreateWorkspace {
  CreateWorkspace() = default;
  std::string name;
  std::optional<std::string> image;
  std::optional<std::string> size;  // or cpus / memory_mib
  std::optional<int> cpus;
  std::optional<int> memory_mib;
  std::optional<int> disk_gib;
  std::optional<int64_t> idle_timeout;  // seconds
  std::optional<IdleAction> idle_action;
  std::optional<int64_t> max_runtime;  // seconds
  std::optional<bool> auto_start;
  std::optional<std::string> screen;  // the desktop's, "1920x1080"
  std::optional<StringMap> env;
  std::optional<StringMap> labels;
};
nlohmann::json ToJson(const CreateWorkspace& request);
// Unknown fields are an error, as berthd answers them.
Result<CreateWorkspace> CreateWorkspaceFromJson(const nlohmann::json& json);

// The body of PATCH /v1/workspaces/{ws}: only the fields that are set change.
struct PatchWorkspace {
  PatchWorkspace() = default;
  std::optional<std::string> name;
  std::optional<StringMap> labels;
  std::optional<StringMap> env;  // replaces the whole env
  std::optional<int64_t> idle_timeout;
  std::optional<IdleAction> idle_action;
  // Outer nullopt: unchanged; an inner nullopt: cleared (null on the wire).
  std::optional<std::optional<int64_t>> max_runtime;
  std::optional<bool> auto_start;
  // The size, for a stopped workspace (it applies at its next start); disk_gib only grows.
  std::optional<std::string> size;  // or cpus / memory_mib
  std::optional<int> cpus;
  std::optional<int> memory_mib;
  std::optional<int> disk_gib;
};
nlohmann::json ToJson(const PatchWorkspace& patch);
Result<PatchWorkspace> PatchWorkspaceFromJson(const nlohmann::json& json);

// GET /v1/workspaces filters: every condition must hold.
struct WorkspaceFilter {
  WorkspaceFilter() = default;
  std::optional<State> state;
  std::vector<std::pair<std::string, std::string>> labels;  // label=K=V
};
// The largest page berthd serves (?limit= 1..1000).
inline constexpr int kMaxPageSize = 1000;
// "?limit=N[&state=S][&label=K%3DV…][&after=ID]", percent-encoded.
std::string ListQuery(const WorkspaceFilter& filter, int limit, std::string_view after = {});

// One page: workspaces in id order, and the cursor of the next page (pass it as `after`).
struct WorkspacePage {
  WorkspacePage() = default;
  std::vector<Workspace> workspaces;
  std::optional<std::string> next;
};
nlohmann::json ToJson(const WorkspacePage& page);
Result<WorkspacePage> WorkspacePageFromJson(const nlohmann::json& json);

// The body of POST …/wait. berthd takes 0..kMaxWaitSeconds.
inline constexpr int64_t kMaxWaitSeconds = 3600;
struct WaitRequest {
  WaitRequest() = default;
  WaitRequest(State s, int64_t t) : state(s), timeout_s(t) {}
  State state = State::kRunning;
  int64_t timeout_s = 300;
};
nlohmann::json ToJson(const WaitRequest& request);

}  // namespace berth::v1
