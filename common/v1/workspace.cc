#include "common/v1/workspace.h"

#include <array>

#include "common/http/url.h"
#include "common/v1/time.h"

namespace berth::v1 {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<State, std::string_view>, 9> kStates = {{
    {State::kCreating, "creating"},
    {State::kStarting, "starting"},
    {State::kRunning, "running"},
    {State::kStopping, "stopping"},
    {State::kStopped, "stopped"},
    {State::kHibernating, "hibernating"},
    {State::kHibernated, "hibernated"},
    {State::kDeleting, "deleting"},
    {State::kError, "error"},
}};

// Bounds of what a workspace answer may say; berthd's own limits are tighter.
constexpr int64_t kMaxCount = 1 << 20;                   // cpus, MiB, GiB
constexpr int64_t kMaxSeconds = 100LL * 366 * 24 * 3600;  // timeouts and runtimes
constexpr size_t kMaxAwakeReasons = 1024;
// A page of at most kMaxPageSize; berthd has answered one more to find `next` in the past.
constexpr size_t kMaxPageEntries = kMaxPageSize + 1;

json OptionalJson(const auto& value) { return value ? json(*value) : json(nullptr); }

void ReadState(Reader& r, State& out) {
  std::string name;
  r.String("state", name);
  if (!r.ok()) return;
  auto state = StateFromName(name);
  if (!state) {
    r.Problem(fmt::format("'state' is not a known state ('{}')", name));
    return;
  }
  out = *state;
}

void ReadIdleAction(Reader& r, std::optional<IdleAction>& out, bool required) {
  std::optional<std::string> name;
  if (required) {
    std::string value;
    r.String("idle_action", value);
    if (r.ok()) name = value;
  } else {
    r.OptString("idle_action", name);
  }
  if (!r.ok() || !name) return;
  auto action = IdleActionFromName(*name);
  if (!action) {
    r.Problem("'idle_action' must be \"stop\" or \"hibernate\"");
    return;
  }
  out = *action;
}

Result<Awake> AwakeFromJson(const json& j) {
  Awake out;
  Reader r(j, "awake");
  r.OptTime("idle_at", out.idle_at);
  const json* reasons = r.Find("reasons");
  if (r.ok()) {
    if (!reasons || !reasons->is_array() || reasons->size() > kMaxAwakeReasons) {
      r.Problem("'reasons' must be an array of strings");
    } else {
      for (const auto& reason : *reasons) {
        if (!reason.is_string() || reason.get_ref<const std::string&>().size() > kMaxTextBytes) {
          r.Problem("'reasons' must be an array of strings");
          break;
        }
        out.reasons.push_back(reason.get<std::string>());
      }
    }
  }
  if (auto done = r.Done(); !done) return Fail(done.error());
  return out;
}

}  // namespace

std::string_view StateName(State state) {
  for (const auto& [s, name] : kStates) {
    if (s == state) return name;
  }
  return "error";
}

std::optional<State> StateFromName(std::string_view name) {
  for (const auto& [s, n] : kStates) {
    if (n == name) return s;
  }
  return std::nullopt;
}

bool IsSettled(State state) {
  return state == State::kRunning || state == State::kStopped || state == State::kHibernated ||
         state == State::kError;
}

std::string_view IdleActionName(IdleAction action) {
  return action == IdleAction::kHibernate ? "hibernate" : "stop";
}

std::optional<IdleAction> IdleActionFromName(std::string_view name) {
  if (name == "stop") return IdleAction::kStop;
  if (name == "hibernate") return IdleAction::kHibernate;
  return std::nullopt;
}

json ToJson(const NetworkPolicy& policy) {
  json j = json::object();
  j["egress"] = policy.egress;
  j["allow"] = policy.allow;
  return j;
}

Result<NetworkPolicy> NetworkPolicyFromJson(const json& j) {
  NetworkPolicy policy;
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "network: not an object");
  auto egress = j.find("egress");
  if (egress == j.end() || !egress->is_string() || egress->get_ref<const std::string&>().size() > 32) {
    return Fail(ErrorCode::kInvalidArgument, "network.egress: not a string");
  }
  policy.egress = egress->get<std::string>();
  if (auto allow = j.find("allow"); allow != j.end()) {
    // The server's own limit is 256 entries of at most 253 bytes (a DNS name).
    if (!allow->is_array() || allow->size() > 1024) {
      return Fail(ErrorCode::kInvalidArgument, "network.allow: not a list of at most 1024 entries");
    }
    for (const auto& a : *allow) {
      if (!a.is_string() || a.get_ref<const std::string&>().size() > 512) {
        return Fail(ErrorCode::kInvalidArgument, "network.allow: entries must be strings");
      }
      policy.allow.push_back(a.get<std::string>());
    }
  }
  return policy;
}

json ToJson(const Workspace& ws) {
  json j = json::object();
  j["id"] = ws.id;
  j["name"] = ws.name;
  j["tenant"] = ws.tenant;
  j["image"] = ws.image;
  j["image_version"] = ws.image_version;
  j["size"] = OptionalJson(ws.size);
  j["cpus"] = ws.cpus;
  j["memory_mib"] = ws.memory_mib;
  j["disk_gib"] = ws.disk_gib;
  j["idle_timeout"] = ws.idle_timeout;
  j["idle_action"] = IdleActionName(ws.idle_action);
  j["max_runtime"] = OptionalJson(ws.max_runtime);
  j["checkpoints"] = ws.checkpoints ? json{{"every", ws.checkpoints->every}, {"keep", ws.checkpoints->keep}} : json();
  j["auto_start"] = ws.auto_start;
  j["screen"] = ws.screen;
  j["env"] = ToJson(ws.env);
  j["labels"] = ToJson(ws.labels);
  j["state"] = StateName(ws.state);
  j["error"] = OptionalJson(ws.error);
  j["transport"] = ws.transport;
  j["created_at"] = FormatTime(ws.created_at);
  j["updated_at"] = FormatTime(ws.updated_at);
  j["started_at"] = TimeOrNull(ws.started_at);
  j["last_active_at"] = TimeOrNull(ws.last_active_at);
  if (ws.awake) {
    json awake = json::object();
    awake["reasons"] = ws.awake->reasons;
    awake["idle_at"] = TimeOrNull(ws.awake->idle_at);
    j["awake"] = std::move(awake);
  }
  if (ws.network) j["network"] = ToJson(*ws.network);
  j["forked_from"] = OptionalJson(ws.forked_from);
  return j;
}

Result<Workspace> WorkspaceFromJson(const json& j) {
  Workspace ws;
  Reader r(j, "workspace");
  std::optional<IdleAction> idle_action;
  std::optional<std::string> screen;  // absent from a berthd older than the setting
  r.String("id", ws.id)
      .String("name", ws.name)
      .String("tenant", ws.tenant)
      .String("image", ws.image)
      .String("image_version", ws.image_version)
      .OptString("size", ws.size)
      .Integer("cpus", ws.cpus, 1, kMaxCount)
      .Integer("memory_mib", ws.memory_mib, 1, kMaxCount)
      .Integer("disk_gib", ws.disk_gib, 1, kMaxCount)
      .Integer("idle_timeout", ws.idle_timeout, 0, kMaxSeconds)
      .OptInteger("max_runtime", ws.max_runtime, 0, kMaxSeconds)
      .Bool("auto_start", ws.auto_start)
      .OptString("screen", screen)
      .Strings("env", ws.env)
      .Strings("labels", ws.labels)
      .OptString("error", ws.error, kMaxTextBytes)
      .String("transport", ws.transport)
      .Time("created_at", ws.created_at)
      .Time("updated_at", ws.updated_at)
      .OptTime("started_at", ws.started_at)
      .OptTime("last_active_at", ws.last_active_at)
      .OptString("forked_from", ws.forked_from);
  ReadIdleAction(r, idle_action, true);
  ReadState(r, ws.state);
  if (r.ok() && idle_action) ws.idle_action = *idle_action;
  if (screen) ws.screen = *screen;
  if (const json* policy = r.Find("checkpoints"); r.ok() && policy && !policy->is_null()) {
    Reader p(*policy, "checkpoints");
    CheckpointPolicy c;
    p.Integer("every", c.every, 0, kMaxSeconds).Integer("keep", c.keep, 0, kMaxCount);
    if (auto done = p.Done(); !done) return Fail(done.error());
    ws.checkpoints = c;
  }
  if (const json* awake = r.Find("awake"); r.ok() && awake) {
    auto parsed = AwakeFromJson(*awake);
    if (!parsed) {
      r.Problem(parsed.error().message);
    } else {
      ws.awake = std::move(*parsed);
    }
  }
  if (const json* network = r.Find("network"); r.ok() && network) {
    auto parsed = NetworkPolicyFromJson(*network);
    if (!parsed) {
      r.Problem(parsed.error().message);
    } else {
      ws.network = std::move(*parsed);
    }
  }
  if (auto done = r.Done(); !done) return Fail(done.error());
  return ws;
}

json ToJson(const CreateWorkspace& c) {
  json j = json::object();
  j["name"] = c.name;
  if (c.image) j["image"] = *c.image;
  if (c.size) j["size"] = *c.size;
  if (c.cpus) j["cpus"] = *c.cpus;
  if (c.memory_mib) j["memory_mib"] = *c.memory_mib;
  if (c.disk_gib) j["disk_gib"] = *c.disk_gib;
  if (c.idle_timeout) j["idle_timeout"] = *c.idle_timeout;
  if (c.idle_action) j["idle_action"] = IdleActionName(*c.idle_action);
  if (c.max_runtime) j["max_runtime"] = *c.max_runtime;
  if (c.auto_start) j["auto_start"] = *c.auto_start;
  if (c.screen) j["screen"] = *c.screen;
  if (c.env) j["env"] = ToJson(*c.env);
  if (c.labels) j["labels"] = ToJson(*c.labels);
  return j;
}

Result<CreateWorkspace> CreateWorkspaceFromJson(const json& j) {
  CreateWorkspace c;
  Reader r(j, "create request");
  r.OnlyFields({"name", "image", "size", "cpus", "memory_mib", "disk_gib", "idle_timeout",
                "idle_action", "max_runtime", "auto_start", "screen", "env", "labels"})
      .String("name", c.name)
      .OptString("image", c.image)
      .OptString("size", c.size)
      .OptInteger("cpus", c.cpus, 1, kMaxCount)
      .OptInteger("memory_mib", c.memory_mib, 1, kMaxCount)
      .OptInteger("disk_gib", c.disk_gib, 1, kMaxCount)
      .OptInteger("idle_timeout", c.idle_timeout, 0, kMaxSeconds)
      .OptInteger("max_runtime", c.max_runtime, 0, kMaxSeconds)
      .OptBool("auto_start", c.auto_start)
      .OptString("screen", c.screen)
      .OptStrings("env", c.env)
      .OptStrings("labels", c.labels);
  ReadIdleAction(r, c.idle_action, false);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return c;
}

json ToJson(const PatchWorkspace& p) {
  json j = json::object();
  if (p.name) j["name"] = *p.name;
  if (p.labels) j["labels"] = ToJson(*p.labels);
  if (p.env) j["env"] = ToJson(*p.env);
  if (p.idle_timeout) j["idle_timeout"] = *p.idle_timeout;
  if (p.idle_action) j["idle_action"] = IdleActionName(*p.idle_action);
  if (p.max_runtime) j["max_runtime"] = OptionalJson(*p.max_runtime);
  if (p.auto_start) j["auto_start"] = *p.auto_start;
  if (p.size) j["size"] = *p.size;
  if (p.cpus) j["cpus"] = *p.cpus;
  if (p.memory_mib) j["memory_mib"] = *p.memory_mib;
  if (p.disk_gib) j["disk_gib"] = *p.disk_gib;
  return j;
}

Result<PatchWorkspace> PatchWorkspaceFromJson(const json& j) {
  PatchWorkspace p;
  Reader r(j, "patch request");
  r.OnlyFields({"name", "labels", "env", "idle_timeout", "idle_action", "max_runtime",
                "auto_start", "size", "cpus", "memory_mib", "disk_gib"})
      .OptString("name", p.name)
      .OptStrings("labels", p.labels)
      .OptStrings("env", p.env)
      .OptInteger("idle_timeout", p.idle_timeout, 0, kMaxSeconds)
      .OptBool("auto_start", p.auto_start)
      .OptString("size", p.size)
      .OptInteger("cpus", p.cpus, 1, kMaxCount)
      .OptInteger("memory_mib", p.memory_mib, 1, kMaxCount)
      .OptInteger("disk_gib", p.disk_gib, 1, kMaxCount);
  ReadIdleAction(r, p.idle_action, false);
  if (r.ok() && j.contains("max_runtime")) {
    std::optional<int64_t> runtime;
    r.OptInteger("max_runtime", runtime, 0, kMaxSeconds);
    p.max_runtime = runtime;  // null clears it
  }
  if (auto done = r.Done(); !done) return Fail(done.error());
  return p;
}

std::string ListQuery(const WorkspaceFilter& filter, int limit, std::string_view after) {
  std::string query = fmt::format("?limit={}", limit);
  if (filter.state) query += fmt::format("&state={}", StateName(*filter.state));
  for (const auto& [k, v] : filter.labels) {
    query += "&label=" + http::PercentEncode(k + "=" + v, false);
  }
  if (!after.empty()) query += "&after=" + http::PercentEncode(after, false);
  return query;
}

json ToJson(const WorkspacePage& page) {
  json items = json::array();
  for (const auto& ws : page.workspaces) items.push_back(ToJson(ws));
  json j = json::object();
  j["workspaces"] = std::move(items);
  j["next"] = OptionalJson(page.next);
  return j;
}

Result<WorkspacePage> WorkspacePageFromJson(const json& j) {
  WorkspacePage page;
  if (auto listed = ReadList(j, "workspaces", "workspace list", kMaxPageEntries,
                             WorkspaceFromJson, page.workspaces);
      !listed) {
    return Fail(listed.error());
  }
  Reader r(j, "workspace list");
  r.OptString("next", page.next);
  if (auto done = r.Done(); !done) return Fail(done.error());
  if (page.next && page.next->empty()) page.next.reset();
  return page;
}

json ToJson(const WaitRequest& request) {
  json j = json::object();
  j["state"] = StateName(request.state);
  j["timeout_s"] = request.timeout_s;
  return j;
}

}  // namespace berth::v1
