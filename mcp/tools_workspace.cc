// Workspace tools: create, list, get, start, stop, hibernate, delete, and workspace_use (the
// session's default workspace). Each answers with the workspace as berthd returns it, so the
// model always sees its state.
#include <fmt/format.h>

#include "common/json.h"
#include "common/v1/workspace.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

// How long workspace_create/start wait for `running` unless told otherwise. A cold boot is
// under a minute with KVM and about a minute under TCG; the first boot of an image may build it.
constexpr int kDefaultWaitSeconds = 300;
constexpr int kMaxWaitSeconds = 1800;
// workspace_list pages through berthd's list; this bounds what one answer carries.
constexpr int kMaxListed = 1000;
// The bounds berthd puts on max_runtime (request.h), so that the schema tells the model.
constexpr int kMinMaxRuntime = 60;
constexpr int kMaxMaxRuntime = 365 * 24 * 3600;
// Arguments of workspace_create that are the tool's, not the create request's.
constexpr std::string_view kCreateToolArgs[] = {"wait", "timeout"};

// One line a model can act on: "api-server (ws_…): running; image base, small (1 CPU, …)".
std::string Summary(const v1::Workspace& ws) {
  std::string line = fmt::format("{} ({}): {}", ws.name, ws.id, v1::StateName(ws.state));
  if (ws.error) line += fmt::format(" ({})", *ws.error);
  line += fmt::format("; image {}, size {} ({} CPU, {} MiB memory, {} GiB disk)", ws.image,
                      ws.size.value_or("custom"), ws.cpus, ws.memory_mib, ws.disk_gib);
  line += fmt::format("; after {} s idle: {}", ws.idle_timeout, v1::IdleActionName(ws.idle_action));
  if (ws.max_runtime) line += fmt::format("; stops after {} s running", *ws.max_runtime);
  return line;
}

ToolResult WorkspaceResult(const v1::Workspace& ws, std::string_view note = {}) {
  json structured = v1::ToJson(ws);
  std::string text = Summary(ws);
  if (!note.empty()) text += fmt::format("\n{}", note);
  text += "\n" + DumpJson(structured, 2);
  return ToolResult::Text(std::move(text), std::move(structured));
}

int WaitSeconds(const json& args) {
  auto it = args.find("timeout");
  return it != args.end() && it->is_number() ? it->get<int>() : kDefaultWaitSeconds;
}

bool Flag(const json& args, const char* key, bool fallback) {
  auto it = args.find(key);
  return it != args.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

Result<v1::Workspace> Get(ToolContext& ctx, const std::string& ws) {
  return ctx.backend().GetWorkspace(ws, ToolContext::CallDeadline());
}

// Waits until `state`; on failure the error says where the workspace is now.
Result<v1::Workspace> WaitFor(ToolContext& ctx, const std::string& ws, v1::State state,
                              int seconds) {
  auto waited =
      ctx.backend().WaitForState(ws, state, ToolContext::CallDeadline(std::chrono::seconds(seconds)));
  if (waited) return waited;
  std::string now;
  if (auto current = Get(ctx, ws); current) now = fmt::format("; it is now {}", Summary(*current));
  return Fail(waited.error().code,
              fmt::format("workspace {} did not reach '{}': {}{}", ws, v1::StateName(state),
                          waited.error().message, now));
}

json WaitArgs(json properties, std::string_view state, bool wait_default) {
  properties["wait"] = schema::Boolean(
      fmt::format("Wait until the workspace is {} before answering (default {}).", state,
                  wait_default ? "true" : "false"));
  properties["timeout"] = schema::Integer(
      fmt::format("Seconds to wait for '{}' (default {}).", state, kDefaultWaitSeconds), 1,
      kMaxWaitSeconds);
  return properties;
}

json StringMap(std::string_view description) {
  json out = json::object();
  out["type"] = "object";
  out["description"] = std::string(description);
  json values = json::object();
  values["type"] = "string";
  out["additionalProperties"] = values;
  return out;
}

// The create request from the tool's arguments: all of them but the tool's own, read by the
// wire type itself, so an argument the schema offers cannot be dropped on the way.
Result<v1::CreateWorkspace> CreateRequest(const json& args) {
  json body = args;
  for (auto key : kCreateToolArgs) body.erase(std::string(key));
  return v1::CreateWorkspaceFromJson(body);
}

// workspace_create with "template": the template's machine, so only the name goes with it.
Result<v1::Workspace> CreateFromTemplate(ToolContext& ctx, const json& args) {
  for (const auto& [key, value] : args.items()) {
    bool own = key == "name" || key == "template" ||
               std::find(std::begin(kCreateToolArgs), std::end(kCreateToolArgs), key) != std::end(kCreateToolArgs);
    if (!own) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("'{}' cannot be given with 'template': a workspace made from a template has its image, "
                              "size, settings, env and labels",
                              key));
    }
  }
  if (!args["template"].is_string() || !args.contains("name") || !args["name"].is_string()) {
    return Fail(ErrorCode::kInvalidArgument, "'name' and 'template' must be strings");
  }
  return ctx.backend().CreateFromTemplate(args["name"].get<std::string>(), args["template"].get<std::string>(),
                                          ToolContext::CallDeadline());
}

Result<ToolResult> Create(ToolContext& ctx, const json& args) {
  Result<v1::Workspace> created = Fail(ErrorCode::kInternal, "not created");
  if (args.contains("template")) {
    created = CreateFromTemplate(ctx, args);
  } else {
    auto request = CreateRequest(args);
    if (!request) return Fail(request.error());
    created = ctx.backend().CreateWorkspace(*request, ToolContext::CallDeadline());
  }
  if (!created) {
    if (created.error().code == ErrorCode::kAlreadyExists) {
      return Fail(ErrorCode::kAlreadyExists,
                  fmt::format("{}; to work in the existing one call workspace_use with "
                              "workspace '{}'",
                              created.error().message, args.value("name", std::string())));
    }
    return Fail(created.error());
  }
  std::string id = created->id;
  ctx.state().set_default_workspace(id);
  std::string note = "It is now this session's default workspace.";
  if (!Flag(args, "wait", true)) {
    note += " It boots in the background: workspace_get shows when it is running.";
    return WorkspaceResult(*created, note);
  }
  auto running = WaitFor(ctx, id, v1::State::kRunning, WaitSeconds(args));
  if (!running) return Fail(running.error());
  note = "It is running and is now this session's default workspace: exec and the file tools "
         "use it when given no 'workspace'.";
  return WorkspaceResult(*running, note);
}

Result<v1::WorkspaceFilter> FilterFrom(const json& args) {
  v1::WorkspaceFilter filter;
  if (args.contains("state")) {
    std::string name = args["state"].get<std::string>();
    filter.state = v1::StateFromName(name);
    if (!filter.state) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("unknown state '{}' (creating, starting, running, stopping, "
                              "stopped, hibernating, hibernated, deleting, error)",
                              name));
    }
  }
  if (args.contains("label")) {
    std::string label = args["label"].get<std::string>();
    auto eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Fail(ErrorCode::kInvalidArgument, "label filters are KEY=VALUE");
    }
    filter.labels.emplace_back(label.substr(0, eq), label.substr(eq + 1));
  }
  return filter;
}

Result<ToolResult> List(ToolContext& ctx, const json& args) {
  int limit = args.contains("limit") ? args["limit"].get<int>() : 100;
  auto filter = FilterFrom(args);
  if (!filter) return Fail(filter.error());
  bool filtered = filter->state || !filter->labels.empty();
  auto listed = ctx.backend().ListWorkspaces(*filter, static_cast<size_t>(limit),
                                             ToolContext::CallDeadline());
  if (!listed) return Fail(listed.error());
  const auto& all = listed->workspaces;
  std::string chosen = ctx.state().default_workspace();
  std::string text;
  if (all.empty()) {
    text = "No workspaces" + std::string(filtered ? " match" : "") +
           ". Create one with workspace_create.\n";
  } else {
    text = fmt::format("{} workspace{}{}:\n", all.size(), all.size() == 1 ? "" : "s",
                       listed->more ? " (more exist: raise 'limit' or filter by 'state'/'label')"
                                    : "");
    for (const auto& ws : all) {
      bool is_default = !chosen.empty() && (chosen == ws.id || chosen == ws.name);
      text += fmt::format("- {}{}\n", Summary(ws), is_default ? " [session default]" : "");
    }
  }
  text += chosen.empty() ? "No default workspace is chosen for this session (workspace_use)."
                         : fmt::format("Session default workspace: {}", chosen);
  json items = json::array();
  for (const auto& ws : all) items.push_back(v1::ToJson(ws));
  json structured = json::object();
  structured["workspaces"] = std::move(items);
  structured["more"] = listed->more;
  structured["default_workspace"] = chosen.empty() ? json(nullptr) : json(chosen);
  return ToolResult::Text(std::move(text), structured);
}

Result<ToolResult> GetTool(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto got = Get(ctx, *ws);
  if (!got) return Fail(got.error());
  return WorkspaceResult(*got);
}

Result<ToolResult> Start(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto started = ctx.backend().StartWorkspace(*ws, ToolContext::CallDeadline());
  if (!started) {
    // Starting a running workspace is not worth an error for the model.
    auto current = Get(ctx, *ws);
    if (current && current->state == v1::State::kRunning) {
      return WorkspaceResult(*current, "It was already running.");
    }
    return Fail(started.error());
  }
  if (!Flag(args, "wait", true)) return WorkspaceResult(*started, "It is starting.");
  auto running = WaitFor(ctx, *ws, v1::State::kRunning, WaitSeconds(args));
  if (!running) return Fail(running.error());
  return WorkspaceResult(*running, "It is running.");
}

// stop and hibernate: ask for the transition, optionally wait for where it lands.
Result<ToolResult> Transition(ToolContext& ctx, const json& args, v1::State final_state,
                              const std::function<Result<v1::Workspace>(const std::string&)>& act) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto answer = act(*ws);
  std::string_view final_name = v1::StateName(final_state);
  if (!answer) {
    auto current = Get(ctx, *ws);
    if (current && current->state == final_state) {
      return WorkspaceResult(*current, fmt::format("It was already {}.", final_name));
    }
    return Fail(answer.error());
  }
  if (!Flag(args, "wait", false)) {
    return WorkspaceResult(*answer, fmt::format("It will be {} shortly (pass wait to wait for it).",
                                                final_name));
  }
  auto done = WaitFor(ctx, *ws, final_state, WaitSeconds(args));
  if (!done) return Fail(done.error());
  return WorkspaceResult(*done);
}

Result<ToolResult> Stop(ToolContext& ctx, const json& args) {
  bool force = Flag(args, "force", false);
  return Transition(ctx, args, v1::State::kStopped, [&](const std::string& ws) {
    return ctx.backend().StopWorkspace(ws, force, ToolContext::CallDeadline());
  });
}

Result<ToolResult> Hibernate(ToolContext& ctx, const json& args) {
  return Transition(ctx, args, v1::State::kHibernated, [&](const std::string& ws) {
    return ctx.backend().HibernateWorkspace(ws, ToolContext::CallDeadline());
  });
}

Result<ToolResult> Delete(ToolContext& ctx, const json& args) {
  std::string ws = args["workspace"].get<std::string>();
  auto answer = ctx.backend().DeleteWorkspace(ws, ToolContext::CallDeadline());
  if (!answer) return Fail(answer.error());
  ctx.state().ForgetWorkspace(answer->id, answer->name);
  ctx.state().ForgetWorkspace(ws, ws);
  return WorkspaceResult(*answer, "It is being deleted with its disks; this cannot be undone.");
}

Result<ToolResult> Use(ToolContext& ctx, const json& args) {
  std::string ws = args["workspace"].get<std::string>();
  auto got = Get(ctx, ws);
  if (!got) return Fail(got.error());
  // The id, not the name: it still names the same workspace if the workspace is renamed.
  ctx.state().set_default_workspace(got->id);
  return WorkspaceResult(*got,
                         "This session now uses it by default: exec, the process, file and "
                         "port tools act on it when given no 'workspace'.");
}

}  // namespace

std::vector<Tool> WorkspaceTools() {
  std::vector<Tool> tools;

  json create = json::object();
  create["name"] = schema::String(
      "A name for the workspace, unique among yours (letters, digits, '-'), e.g. the project "
      "name. You can use it wherever a workspace is asked for.");
  create["image"] = schema::String("Guest image: 'base' (default: Debian 12 with git, build "
                                   "tools, Python, Node.js) or 'desktop' (base plus a desktop "
                                   "and Chromium).");
  create["size"] = schema::String("Size preset (default 'small': 1 CPU, 1 GiB memory). Or give "
                                  "cpus/memory_mib/disk_gib.");
  create["cpus"] = schema::Integer("Virtual CPUs.", 1, 64);
  create["memory_mib"] = schema::Integer("Memory in MiB.", 256, 262144);
  create["disk_gib"] = schema::Integer("Size of /workspace, the durable disk, in GiB (default 10).",
                                       1, 4096);
  create["idle_timeout"] = schema::Integer(
      "Seconds without activity before idle_action runs (default 1800).", 60, 30 * 24 * 3600);
  create["idle_action"] = schema::String("What happens when idle: 'stop' (default) or "
                                         "'hibernate' (keeps running processes).");
  create["idle_action"]["enum"] = {"stop", "hibernate"};
  create["max_runtime"] = schema::Integer(
      "Seconds it may run before it is stopped, whatever keeps it busy (default: no limit).",
      kMinMaxRuntime, kMaxMaxRuntime);
  create["auto_start"] = schema::Boolean(
      "Start the workspace automatically when a call needs it (default true).");
  create["screen"] = schema::String("The desktop image's screen, WIDTHxHEIGHT (default 1280x800; the width a "
                                    "multiple of 8), e.g. 1920x1080.");
  create["screen"]["pattern"] = "^[1-9][0-9]{2,3}x[1-9][0-9]{2,3}$";
  create["env"] = StringMap("Environment variables for every command run in it.");
  create["labels"] = StringMap("Labels to find it by (workspace_list label=K=V).");
  create["template"] = schema::String(
      "Start from this template (template_list): a copy of a prepared workspace resumed with its programs "
      "running, in seconds. Its image, size and settings are the template's: give only 'name' with it.");
  tools.push_back(Tool{
      "workspace_create", "Create a workspace",
      "Create a workspace: a Linux VM of your own with a durable disk at /workspace, where you "
      "can run commands, install packages and keep files across sessions. Waits until it is "
      "running (unless wait is false) and makes it this session's default workspace, so exec "
      "and the file tools can use it at once. Check workspace_list first: a workspace for this "
      "project may already exist.",
      schema::Object(WaitArgs(create, "running", true), {"name"}), Mutating(false, false), Create});

  json list = json::object();
  list["state"] = schema::String("Only workspaces in this state (running, stopped, hibernated, "
                                 "error, ...).");
  list["label"] = schema::String("Only workspaces with this label, as KEY=VALUE.");
  list["limit"] = schema::Integer("At most this many (default 100).", 1, kMaxListed);
  tools.push_back(Tool{"workspace_list", "List workspaces",
                       "List your workspaces with their state (running, stopped, hibernated, "
                       "...), size and idle policy, and which one this session uses by default.",
                       schema::Object(list), ReadOnly(), List});

  json one = json::object();
  one["workspace"] = schema::WorkspaceArg();
  tools.push_back(Tool{"workspace_get", "Show a workspace",
                       "Show one workspace: its state, its error if any, size, idle policy, and "
                       "while running what keeps it awake ('awake').",
                       schema::Object(one), ReadOnly(), GetTool});

  tools.push_back(Tool{
      "workspace_start", "Start a workspace",
      "Start a stopped or hibernated workspace (a hibernated one resumes its processes) and wait "
      "until it is running. Rarely needed: exec and the file tools start a stopped workspace "
      "by themselves.",
      schema::Object(WaitArgs(one, "running", true)), Mutating(false, true), Start});

  json stop = one;
  stop["force"] = schema::Boolean("Power off at once instead of a clean shutdown.");
  tools.push_back(Tool{
      "workspace_stop", "Stop a workspace",
      "Shut a workspace down. Its disk is kept (installed packages and files stay); running "
      "processes end. It starts again on the next exec or file call, or with workspace_start.",
      schema::Object(WaitArgs(stop, "stopped", false)), Mutating(true, true), Stop});

  tools.push_back(Tool{
      "workspace_hibernate", "Hibernate a workspace",
      "Save a workspace's memory and running processes to disk and stop it; starting it again "
      "resumes everything where it was. Use it to pause long-running work without losing it.",
      schema::Object(WaitArgs(one, "hibernated", false)), Mutating(false, true), Hibernate});

  json del = json::object();
  del["workspace"] = schema::String(
      "The workspace to delete: its id (ws_...) or name. Required: there is no default here.");
  tools.push_back(Tool{
      "workspace_delete", "Delete a workspace",
      "Delete a workspace with its disks: every file in it is lost for good. Only when the user "
      "asked for it or the workspace was made for a task that is over.",
      schema::Object(del, {"workspace"}), Mutating(true, true), Delete});

  json use = json::object();
  use["workspace"] = schema::String("The workspace to use: its id (ws_...) or name.");
  tools.push_back(Tool{
      "workspace_use", "Choose the default workspace",
      "Choose the workspace this session works in: exec, the process, file and port tools act "
      "on it when they are given no 'workspace'. Answers the workspace and its state.",
      schema::Object(use, {"workspace"}), Mutating(false, true), Use});
  return tools;
}

}  // namespace berth::mcp
