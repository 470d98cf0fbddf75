// Workspace lifecycle: create, ls, get, start, stop, hibernate, restart, rm.
#include <thread>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/terminal.h"
#include "cli/workspace_api.h"

namespace berth::cli {
namespace {

using boost::beast::http::verb;

struct CreateOptions {
  std::string name;
  std::string image;
  std::string size;
  std::optional<int> cpus;
  std::optional<int> memory_mib;
  std::optional<int> disk_gib;
  std::string idle_timeout;
  std::string idle_action;
  std::string max_runtime;
  bool no_auto_start = false;
  std::vector<std::string> env;
  std::vector<std::string> labels;
  std::string idempotency_key;
  bool wait = false;
  std::string wait_timeout = "5m";
};

// The body of POST /v1/workspaces from the flags.
Result<nlohmann::json> CreateBody(const CreateOptions& o) {
  nlohmann::json body = {{"name", o.name}};
  if (!o.image.empty()) body["image"] = o.image;
  if (!o.size.empty()) body["size"] = o.size;
  if (o.cpus) body["cpus"] = *o.cpus;
  if (o.memory_mib) body["memory_mib"] = *o.memory_mib;
  if (o.disk_gib) body["disk_gib"] = *o.disk_gib;
  if (!o.idle_timeout.empty()) {
    auto seconds = ParseDuration(o.idle_timeout);
    if (!seconds) return Fail(seconds.error());
    body["idle_timeout"] = *seconds;
  }
  if (!o.idle_action.empty()) body["idle_action"] = o.idle_action;
  if (!o.max_runtime.empty()) {
    auto seconds = ParseDuration(o.max_runtime);
    if (!seconds) return Fail(seconds.error());
    body["max_runtime"] = *seconds;
  }
  if (o.no_auto_start) body["auto_start"] = false;
  auto map = [](const std::vector<std::string>& items,
                std::string_view flag) -> Result<nlohmann::json> {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& item : items) {
      auto kv = SplitKeyValue(item, flag);
      if (!kv) return Fail(kv.error());
      out[kv->first] = kv->second;
    }
    return out;
  };
  if (!o.env.empty()) {
    auto env = map(o.env, "--env");
    if (!env) return Fail(env.error());
    body["env"] = *env;
  }
  if (!o.labels.empty()) {
    auto labels = map(o.labels, "--label");
    if (!labels) return Fail(labels.error());
    body["labels"] = *labels;
  }
  return body;
}

Result<int64_t> WaitSeconds(const std::string& text) {
  auto seconds = ParseDuration(text);
  if (!seconds) return Fail(seconds.error());
  if (*seconds <= 0) return Fail(ErrorCode::kInvalidArgument, "--wait-timeout must be positive");
  return *seconds;
}

Result<int> Create(Context& ctx, const CreateOptions& o) {
  auto body = CreateBody(o);
  if (!body) return Fail(body.error());
  auto wait_seconds = WaitSeconds(o.wait_timeout);
  if (!wait_seconds) return Fail(wait_seconds.error());
  auto client = ctx.Client();
  if (!client) return Fail(client.error());
  client::Headers headers;
  if (!o.idempotency_key.empty()) headers.emplace_back("Idempotency-Key", o.idempotency_key);
  auto ws = client->Json(verb::post, ctx.Route("/v1/workspaces"), *body, headers);
  if (!ws) return Fail(ws.error());
  if (o.wait) {
    if (!ctx.json()) ctx.Note(fmt::format("created {}; waiting for it to boot…", StateLine(*ws)));
    auto id = ws->value("id", o.name);
    auto running = WaitForState(ctx, id, "running", *wait_seconds);
    if (!running) return Fail(running.error());
    ws = std::move(running);
  }
  if (ctx.json()) {
    ctx.PrintJson(*ws);
  } else {
    ctx.out() << StateLine(*ws) << "\n";
  }
  return kExitOk;
}

Result<int> List(Context& ctx, const ListFilter& filter) {
  auto all = ListWorkspaces(ctx, filter);
  if (!all) return Fail(all.error());
  if (ctx.json()) {
    ctx.PrintJson(nlohmann::json(*all));
    return kExitOk;
  }
  if (all->empty()) {
    ctx.err() << "no workspaces\n";
    return kExitOk;
  }
  Table table(WorkspaceHeader());
  for (const auto& ws : *all) table.AddRow(WorkspaceRow(ws, ctx.now()));
  ctx.out() << table.Render();
  return kExitOk;
}

Result<int> Get(Context& ctx, const std::string& ws_arg) {
  auto ws = GetWorkspace(ctx, ws_arg);
  if (!ws) return Fail(ws.error());
  if (ctx.json()) {
    ctx.PrintJson(*ws);
  } else {
    ctx.out() << FormatWorkspace(*ws, ctx.now());
  }
  return kExitOk;
}

struct ActionOptions {
  std::vector<std::string> workspaces;
  bool wait = false;
  std::string wait_timeout = "5m";
  bool force = false;  // stop
};

// start/stop/hibernate/restart on each workspace in turn; the last failure's exit code.
Result<int> Transition(Context& ctx, const ActionOptions& o, const std::string& action,
                       const std::string& target_state) {
  auto wait_seconds = WaitSeconds(o.wait_timeout);
  if (!wait_seconds) return Fail(wait_seconds.error());
  int code = kExitOk;
  nlohmann::json results = nlohmann::json::array();
  for (const auto& name : o.workspaces) {
    std::optional<nlohmann::json> body;
    if (action == "stop" && o.force) body = nlohmann::json{{"force", true}};
    auto ws = ctx.Call(verb::post, ctx.WorkspaceRoute(name, "/" + action), body);
    if (ws && o.wait) ws = WaitForState(ctx, name, target_state, *wait_seconds);
    if (!ws) {
      code = ctx.Report(Error{ws.error().code, fmt::format("{}: {}", name, ws.error().message)});
      continue;
    }
    if (ctx.json()) {
      results.push_back(*ws);
    } else {
      ctx.out() << StateLine(*ws) << "\n";
    }
  }
  if (ctx.json()) ctx.PrintJson(results.size() == 1 ? results[0] : results);
  return code;
}

struct RemoveOptions {
  std::vector<std::string> workspaces;
  bool yes = false;
  bool wait = false;
  std::string wait_timeout = "5m";
};

// Polls until GET answers 404: deletion has no state to wait for with /wait.
Status WaitGone(Context& ctx, const std::string& id, int64_t timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    auto ws = GetWorkspace(ctx, id);
    if (!ws && ws.error().code == ErrorCode::kNotFound) return {};
    if (!ws) return Fail(ws.error());
    // Anything but "deleting" means the deletion will not happen: no point waiting for it.
    std::string state = ws->value("state", "");
    if (state != "deleting") {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{} is {} again instead of being deleted", id, state));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return Fail(ErrorCode::kDeadlineExceeded,
              fmt::format("{} was not gone within {}s", id, timeout_s));
}

Result<int> Remove(Context& ctx, const RemoveOptions& o) {
  auto wait_seconds = WaitSeconds(o.wait_timeout);
  if (!wait_seconds) return Fail(wait_seconds.error());
  int code = kExitOk;
  for (const auto& name : o.workspaces) {
    auto ws = GetWorkspace(ctx, name);
    if (!ws) {
      code = ctx.Report(Error{ws.error().code, fmt::format("{}: {}", name, ws.error().message)});
      continue;
    }
    std::string id = ws->value("id", name);
    if (!o.yes) {
      if (!ctx.env().stdin_tty) {
        return Fail(ErrorCode::kInvalidArgument,
                    fmt::format("not deleting {} without confirmation: pass --yes", name));
      }
      std::string question = fmt::format(
          "Delete workspace {} ({}) and its disks? This cannot be undone.", ws->value("name", name),
          id);
      if (!Confirm(*ctx.env().in, ctx.err(), question)) {
        ctx.err() << "kept " << name << "\n";
        code = kExitError;
        continue;
      }
    }
    auto deleted = ctx.Call(verb::delete_, ctx.WorkspaceRoute(id));
    Status gone;
    if (deleted && o.wait) gone = WaitGone(ctx, id, *wait_seconds);
    if (!deleted || !gone) {
      const Error& e = !deleted ? deleted.error() : gone.error();
      code = ctx.Report(Error{e.code, fmt::format("{}: {}", name, e.message)});
      continue;
    }
    if (ctx.json()) {
      ctx.PrintJson(*deleted);
    } else {
      ctx.out() << fmt::format("{} ({}): {}\n", ws->value("name", name), id,
                               o.wait ? "deleted" : deleted->value("state", "deleting"));
    }
  }
  return code;
}

void AddTransition(Builder& b, const std::string& name, const std::string& description,
                   const std::string& target_state) {
  auto o = std::make_shared<ActionOptions>();
  auto* cmd = b.Add(name, description, [o, name, target_state](Context& ctx) {
    return Transition(ctx, *o, name, target_state);
  });
  cmd->add_option("workspace", o->workspaces, "workspace ids or names")->required();
  cmd->add_flag("--wait", o->wait, fmt::format("wait until it is {}", target_state));
  cmd->add_option("--wait-timeout", o->wait_timeout, "how long --wait waits")
      ->capture_default_str();
  if (name == "stop") cmd->add_flag("--force", o->force, "power off at once, no ACPI shutdown");
  b.AddJsonFlag(cmd);
}

}  // namespace

void AddWorkspaceCommands(Builder& b) {
  auto c = std::make_shared<CreateOptions>();
  auto* create = b.Add("create", "create a workspace (it boots in the background; --wait waits)",
                       [c](Context& ctx) { return Create(ctx, *c); });
  create->add_option("name", c->name, "the workspace's name, unique in your tenant")->required();
  create->add_option("--image", c->image, "guest image (default base)");
  create->add_option("--size", c->size, "size class (default small)");
  create->add_option("--cpus", c->cpus, "vCPUs, instead of --size");
  create->add_option("--memory", c->memory_mib, "memory in MiB, instead of --size");
  create->add_option("--disk", c->disk_gib, "data disk in GiB");
  create->add_option("--idle-timeout", c->idle_timeout,
                     "idle time before the idle action (30m, 2h)");
  create->add_option("--idle-action", c->idle_action, "stop | hibernate")
      ->check(CLI::IsMember({"stop", "hibernate"}));
  create->add_option("--max-runtime", c->max_runtime, "stop after this long running (8h)");
  create->add_flag("--no-auto-start", c->no_auto_start, "do not start it on exec or file calls");
  // One value per flag, so that a positional after it stays one.
  create->add_option("--env", c->env, "K=V environment for every process (repeatable)")
      ->allow_extra_args(false);
  create->add_option("--label", c->labels, "K=V label (repeatable)")->allow_extra_args(false);
  create->add_option("--idempotency-key", c->idempotency_key,
                     "a retry with the same key returns the same workspace");
  create->add_flag("--wait", c->wait, "wait until it is running");
  create->add_option("--wait-timeout", c->wait_timeout, "how long --wait waits")
      ->capture_default_str();
  b.AddJsonFlag(create);

  auto filter = std::make_shared<ListFilter>();
  auto* ls = b.Add("ls", "list workspaces", [filter](Context& ctx) { return List(ctx, *filter); });
  ls->alias("list");
  ls->add_option("--state", filter->state, "only workspaces in this state");
  ls->add_option("--label", filter->labels, "only workspaces with label K=V (repeatable)")
      ->allow_extra_args(false);
  b.AddJsonFlag(ls);

  auto ws = std::make_shared<std::string>();
  auto* get = b.Add("get", "show a workspace", [ws](Context& ctx) { return Get(ctx, *ws); });
  get->add_option("workspace", *ws, "workspace id or name")->required();
  b.AddJsonFlag(get);

  AddTransition(b, "start", "start workspaces (a hibernated one resumes)", "running");
  AddTransition(b, "stop", "stop workspaces (ACPI power-off; the disk stays)", "stopped");
  AddTransition(b, "hibernate", "hibernate workspaces (memory and processes saved to disk)",
                "hibernated");
  AddTransition(b, "restart", "stop, then start workspaces", "running");

  auto r = std::make_shared<RemoveOptions>();
  auto* rm = b.Add("rm", "delete workspaces and their disks (asks first unless --yes)",
                   [r](Context& ctx) { return Remove(ctx, *r); });
  rm->alias("delete");
  rm->add_option("workspace", r->workspaces, "workspace ids or names")->required();
  rm->add_flag("-y,--yes", r->yes, "do not ask");
  rm->add_flag("--wait", r->wait, "wait until it is gone");
  rm->add_option("--wait-timeout", r->wait_timeout, "how long --wait waits")
      ->capture_default_str();
  b.AddJsonFlag(rm);
}

}  // namespace berth::cli
