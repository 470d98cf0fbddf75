#include "controller/api/json.h"

#include "common/json.h"
#include "common/v1/time.h"
#include "controller/network/policy.h"

namespace berth::api {
namespace {

// The store keeps env and labels as JSON objects of strings (validated on the way in).
v1::StringMap StringMapOf(const nlohmann::json& object) {
  v1::StringMap out;
  if (!object.is_object()) return out;
  for (const auto& [k, v] : object.items()) {
    out.emplace(k, v.is_string() ? v.get<std::string>() : DumpJson(v));
  }
  return out;
}

}  // namespace

std::string IsoTime(int64_t unix_seconds) { return v1::FormatTime(unix_seconds); }

nlohmann::json IsoOrNull(const std::optional<int64_t>& unix_seconds) {
  return v1::TimeOrNull(unix_seconds);
}

Result<int64_t> ParseTime(std::string_view text) { return v1::ParseTimeArgument(text); }

v1::State StateWire(workspace::State state) {
  using workspace::State;
  // A switch, not names: a new state fails to compile here until the wire knows it.
  switch (state) {
    case State::kCreating: return v1::State::kCreating;
    case State::kStarting: return v1::State::kStarting;
    case State::kRunning: return v1::State::kRunning;
    case State::kStopping: return v1::State::kStopping;
    case State::kStopped: return v1::State::kStopped;
    case State::kHibernating: return v1::State::kHibernating;
    case State::kHibernated: return v1::State::kHibernated;
    case State::kDeleting: return v1::State::kDeleting;
    case State::kError: return v1::State::kError;
  }
  return v1::State::kError;
}

v1::Workspace WorkspaceWire(const workspace::Workspace& ws,
                            const std::optional<workspace::AwakeInfo>& awake) {
  v1::Workspace out;
  out.id = ws.id;
  out.name = ws.name;
  out.tenant = ws.tenant_id;
  out.image = ws.image;
  out.image_version = ws.image_version;
  out.size = ws.size;
  out.cpus = ws.vcpus;
  out.memory_mib = ws.memory_mib;
  out.disk_gib = ws.disk_gib;
  out.idle_timeout = ws.idle_timeout_s;
  out.idle_action = ws.idle_action == workspace::IdleAction::kHibernate
                        ? v1::IdleAction::kHibernate
                        : v1::IdleAction::kStop;
  out.max_runtime = ws.max_runtime_s;
  if (ws.checkpoints) out.checkpoints = v1::CheckpointPolicy{ws.checkpoints->every_s, ws.checkpoints->keep};
  out.auto_start = ws.auto_start;
  out.screen = ws.screen;
  out.env = StringMapOf(ws.env);
  out.labels = StringMapOf(ws.labels);
  out.state = StateWire(ws.state);
  out.error = ws.error;
  out.transport = ws.transport;
  out.created_at = ws.created_at;
  out.updated_at = ws.updated_at;
  out.started_at = ws.started_at;
  out.last_active_at = ws.last_active_at;
  out.forked_from = ws.from_checkpoint;
  if (awake && ws.state == workspace::State::kRunning) {
    v1::Awake wire;
    wire.reasons = awake->reasons;
    wire.idle_at = awake->idle_at;
    out.awake = std::move(wire);
  }
  // The policy only; isolation, counters and refusals are GET …/network.
  auto policy = network::PolicyJson(ws.network);
  auto wire_policy = v1::NetworkPolicyFromJson(policy);
  if (wire_policy) out.network = std::move(*wire_policy);
  return out;
}

v1::Tenant TenantWire(const store::Tenant& t) {
  v1::Tenant out;
  out.id = t.id;
  out.name = t.name;
  out.created_at = t.created_at;
  return out;
}

v1::ApiKey KeyWire(const store::ApiKey& k) {
  v1::ApiKey out;
  out.id = k.id;
  out.tenant = k.tenant_id;
  out.prefix = k.prefix;
  // The store holds the scope the Authenticator wrote ("admin" | "write" | "read").
  out.scope = v1::ScopeFromName(k.scope).value_or(v1::Scope::kRead);
  out.name = k.name;
  out.created_at = k.created_at;
  out.last_used_at = k.last_used_at;
  out.revoked_at = k.revoked_at;
  return out;
}

v1::Template TemplateWire(workspace::WorkspaceService& service, const store::Template& t, bool with_log) {
  v1::Template wire;
  wire.id = t.id;
  wire.name = t.name;
  wire.workspace_id = t.workspace_id;
  wire.checkpoint_id = t.checkpoint_id;
  wire.created_by = t.created_by;
  wire.created_at = t.created_at;
  wire.state = t.state;
  if (!t.error.empty()) wire.error = t.error;
  if (!t.build.empty()) {
    // Written by berthd (TemplateBuild::ToJson); read leniently all the same.
    auto build = ParseJson(t.build).value_or(nlohmann::json());
    auto text = [&build](const char* key) -> std::optional<std::string> {
      if (!build.is_object() || !build.contains(key) || !build[key].is_string()) return std::nullopt;
      return build[key].get<std::string>();
    };
    wire.script = text("script");
    wire.start = text("start");
    wire.ready = text("ready");
    if (build.is_object() && build.contains("timeout_s") && build["timeout_s"].is_number_integer()) {
      wire.timeout_s = build["timeout_s"].get<int64_t>();
    }
    if (with_log) wire.build_log = t.build_log;
  }
  if (auto ws = service.Get(t.tenant_id, t.workspace_id)) {
    wire.workspace = ws->name;
    wire.image = ws->image;
    wire.cpus = ws->vcpus;
    wire.memory_mib = ws->memory_mib;
    wire.disk_gib = ws->disk_gib;
  }
  return wire;
}

v1::Checkpoint CheckpointWire(const store::Checkpoint& c, int64_t size_bytes) {
  v1::Checkpoint w;
  w.id = c.id;
  w.workspace_id = c.workspace_id;
  w.name = c.name;
  w.kind = c.kind;
  w.memory = c.memory;
  w.parent = c.parent;
  w.taken_while = c.taken_while;
  w.pause_ms = c.pause_ms;
  w.size_bytes = size_bytes;
  w.created_by = c.created_by;
  w.created_at = c.created_at;
  return w;
}

v1::Event EventWire(const store::Event& e) {
  v1::Event out;
  out.id = e.id;
  out.workspace = e.workspace_id;
  out.at = e.at;
  out.type = e.type;
  out.message = e.message;
  out.data = e.data.is_object() ? e.data : nlohmann::json::object();
  out.actor = e.actor;
  return out;
}

nlohmann::json WorkspaceJson(const workspace::Workspace& ws,
                             const std::optional<workspace::AwakeInfo>& awake) {
  return v1::ToJson(WorkspaceWire(ws, awake));
}

nlohmann::json TenantJson(const store::Tenant& tenant) { return v1::ToJson(TenantWire(tenant)); }

nlohmann::json KeyJson(const store::ApiKey& key) { return v1::ToJson(KeyWire(key)); }

nlohmann::json EventJson(const store::Event& event) { return v1::ToJson(EventWire(event)); }

}  // namespace berth::api
