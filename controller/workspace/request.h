// The bodies of POST /v1/workspaces and PATCH /v1/workspaces/{id}, parsed and validated. Pure:
// JSON in, a typed request or an invalid_argument error out.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/workspace/workspace.h"

namespace berth::workspace {

// Bounds, each with its reason.
inline constexpr int kMaxCpus = 16;              // well past any single-host workspace
inline constexpr int kMinMemoryMib = 512;        // Debian with systemd needs this much to boot
inline constexpr int kMaxMemoryMib = 64 * 1024;
inline constexpr int kMaxDiskGib = 2048;         // qcow2 is sparse; this only caps a typo
inline constexpr int64_t kMinIdleTimeout = 10;   // shorter would stop a VM still booting tools
inline constexpr int64_t kMaxDuration = 365LL * 24 * 3600;
// Rolling checkpoints: at most one a minute, at most this many kept.
inline constexpr int64_t kMinCheckpointEvery = 60;
inline constexpr int kMaxCheckpointKeep = 100;
// `checkpoints`: {"every": seconds, "keep": N}, or null for none.
Result<std::optional<CheckpointPolicy>> ParseCheckpointPolicy(const nlohmann::json& value);
inline constexpr size_t kMaxEnvEntries = 256;
// The env travels to the agent in one request header (Berth-Env), under the agent's 16 KiB
// header limit with room for the rest of the request.
inline constexpr size_t kMaxEnvBytes = 12 * 1024;
inline constexpr size_t kMaxLabels = 64;
inline constexpr size_t kMaxLabelBytes = 256;    // each key and each value

struct CreateRequest {
  // Who asks, for the "created" event (store/event_filter.h); empty: berthd.
  std::string by;
  std::string name;
  std::string image = "base";
  std::optional<std::string> size = "small";
  int vcpus = 1;
  int memory_mib = 1024;
  int disk_gib = 10;
  int64_t idle_timeout_s = 1800;
  IdleAction idle_action = IdleAction::kStop;
  std::optional<int64_t> max_runtime_s;
  std::optional<CheckpointPolicy> checkpoints;
  bool auto_start = true;
  std::string screen = "1280x800";
  nlohmann::json env = nlohmann::json::object();
  nlohmann::json labels = nlohmann::json::object();
  // The guest's egress policy ("network": {...}, controller/network/policy.h); open by default.
  network::Policy network;
};
Result<CreateRequest> ParseCreateRequest(const nlohmann::json& body);

// A fork (forks.cc): POST /v1/workspaces {"name", "from": {"workspace", "checkpoint"?},
// "labels"?} and POST /v1/workspaces/{ws}/checkpoints/{cp}/fork {"name", "count"?, "labels"?}.
// A fork is its source's machine: image, size, settings, env and network policy are the
// source's; only the name and labels are its own. With `count` > 1 the forks are named
// "<name>-1" ... "<name>-<count>".
inline constexpr int kMaxForksAtOnce = 16;
struct ForkRequest {
  std::string by;                         // as CreateRequest's
  std::string name;
  int count = 1;
  std::string source;                     // the workspace forked (id or name)
  std::optional<std::string> checkpoint;  // none: one is taken now (with memory when it runs or sleeps)
  std::optional<nlohmann::json> labels;   // none: the source's
  std::string template_name;              // POST /v1/workspaces {"template"}: the source and checkpoint are its
  // POST /v1/workspaces's Idempotency-Key (a fork of count 1): a retry with the same key gets
  // the workspace the first made, and takes no second checkpoint.
  std::string idempotency_key;
};
// Whether a POST /v1/workspaces body asks for a fork (it has "from" or "template").
bool IsForkRequest(const nlohmann::json& body);
Result<ForkRequest> ParseForkRequest(const nlohmann::json& body);
Result<ForkRequest> ParseForkCheckpointRequest(const nlohmann::json& body, std::string source, std::string checkpoint);

// A template built from a setup script (templates.cc): a new workspace of `image` and `size`
// (berthd's, named kTemplateBuilderPrefix + the template's name) runs `script` with bash -e in
// /workspace as its user; then `start` is left running in the background, and `ready` is run
// until it exits 0; then its memory is checkpointed. All within `timeout_s`.
inline constexpr std::string_view kTemplateBuilderPrefix = "template-";
inline constexpr size_t kMaxTemplateScript = 64 * 1024;
inline constexpr int64_t kMaxTemplateBuild = 7200;
struct TemplateBuild {
  std::string script;
  std::string start;  // empty: none
  std::string ready;  // empty: none
  std::string image = "base";
  std::string size = "small";
  int64_t timeout_s = 1800;
  nlohmann::json ToJson() const;
};

// POST /v1/templates {"name", "from": {"workspace", "checkpoint"?}}: a checkpoint with memory
// published under a name; or {"name", "script", "start"?, "ready"?, "image"?, "size"?,
// "timeout_s"?}: one built (templates.cc).
struct TemplateRequest {
  std::string by;
  std::string name;
  std::string workspace;
  std::optional<std::string> checkpoint;  // none: one with memory is taken now
  std::optional<TemplateBuild> build;     // a script's instead of a workspace's
};
Result<TemplateRequest> ParseTemplateRequest(const nlohmann::json& body);
// A desktop screen size, "WIDTHxHEIGHT": width 640-3840 and a multiple of 8 (the guest's video
// mode is), height 480-2160.
Status ValidateScreen(std::string_view screen);

// Applies a PATCH body (name, labels, env, idle_timeout, idle_action, max_runtime, auto_start,
// and the size: size or cpus/memory_mib, disk_gib, which may only grow) to `ws`. Unknown
// fields are an error, so a typo is not silently ignored. Whether the size may change now
// (the workspace is stopped) and fits the tenant's limits is the service's to say.
Status ApplyPatch(const nlohmann::json& body, Workspace& ws);
// Whether a patch changed what the VM is made of (vCPUs, memory, disk).
bool SizeChanged(const Workspace& before, const Workspace& after);

std::string_view IdleActionName(IdleAction action);

}  // namespace berth::workspace
