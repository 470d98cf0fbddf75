// Workspace lifecycle: create, ls, get, start, stop, hibernate, restart, rm.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/terminal.h"

namespace berth::cli {
namespace {

// One call to berthd that is not a wait: generous for a berthd on a loaded host.
constexpr std::chrono::seconds kCallTimeout{120};

Deadline CallDeadline() { return DeadlineIn(kCallTimeout); }

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
  std::string screen;
  std::vector<std::string> env;
  std::vector<std::string> labels;
  std::string idempotency_key;
  std::string template_name;  // `--template`: the workspace is the template's (cmd_forks.cc)
  bool wait = false;
  std::string wait_timeout = "5m";
};

Result<v1::StringMap> KeyValues(const std::vector<std::string>& items, std::string_view flag) {
  v1::StringMap out;
  for (const auto& item : items) {
    auto kv = SplitKeyValue(item, flag);
    if (!kv) return Fail(kv.error());
    out[kv->first] = kv->second;
  }
  return out;
}

// The body of POST /v1/workspaces from the flags.
Result<v1::CreateWorkspace> CreateRequest(const CreateOptions& o) {
  v1::CreateWorkspace request;
  request.name = o.name;
  if (!o.image.empty()) request.image = o.image;
  if (!o.size.empty()) request.size = o.size;
  request.cpus = o.cpus;
  request.memory_mib = o.memory_mib;
  request.disk_gib = o.disk_gib;
  if (!o.idle_timeout.empty()) {
    auto seconds = ParseDuration(o.idle_timeout);
    if (!seconds) return Fail(seconds.error());
    request.idle_timeout = seconds->count();
  }
  if (!o.idle_action.empty()) request.idle_action = v1::IdleActionFromName(o.idle_action);
  if (!o.max_runtime.empty()) {
    auto seconds = ParseDuration(o.max_runtime);
    if (!seconds) return Fail(seconds.error());
    request.max_runtime = seconds->count();
  }
  if (o.no_auto_start) request.auto_start = false;
  if (!o.screen.empty()) request.screen = o.screen;
  if (!o.env.empty()) {
    auto env = KeyValues(o.env, "--env");
    if (!env) return Fail(env.error());
    request.env = std::move(*env);
  }
  if (!o.labels.empty()) {
    auto labels = KeyValues(o.labels, "--label");
    if (!labels) return Fail(labels.error());
    request.labels = std::move(*labels);
  }
  return request;
}

Result<std::chrono::seconds> WaitTimeout(const std::string& text) {
  auto seconds = ParseDuration(text);
  if (!seconds) return Fail(seconds.error());
  if (seconds->count() <= 0) {
    return Fail(ErrorCode::kInvalidArgument, "--wait-timeout must be positive");
  }
  return *seconds;
}

// berthd's deadline_exceeded, said as `--wait` means it.
Error WaitError(const Error& error, std::string_view ws, v1::State state,
                std::chrono::seconds timeout) {
  if (error.code != ErrorCode::kDeadlineExceeded) return error;
  return Error{ErrorCode::kDeadlineExceeded,
               fmt::format("{} did not become {} within {}s: {}", ws, v1::StateName(state),
                           timeout.count(), error.message)};
}

// A workspace made from a template is its template's machine: image, size, settings and env
// come with it, so the flags that would set them are refused rather than ignored.
Status TemplateFlagsOnly(const CreateOptions& o) {
  bool other = !o.image.empty() || !o.size.empty() || o.cpus || o.memory_mib || o.disk_gib ||
               !o.idle_timeout.empty() || !o.idle_action.empty() || !o.max_runtime.empty() || o.no_auto_start ||
               !o.screen.empty() || !o.env.empty() || !o.labels.empty() || !o.idempotency_key.empty();
  if (!other) return {};
  return Fail(ErrorCode::kInvalidArgument,
              "--template gives the workspace its template's image, size, settings, env and labels: only --wait "
              "and --wait-timeout go with it");
}

Result<int> Create(Context& ctx, const CreateOptions& o) {
  auto request = CreateRequest(o);
  if (!request) return Fail(request.error());
  auto wait_timeout = WaitTimeout(o.wait_timeout);
  if (!wait_timeout) return Fail(wait_timeout.error());
  if (!o.template_name.empty()) {
    if (auto s = TemplateFlagsOnly(o); !s) return Fail(s.error());
  }
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto ws = o.template_name.empty() ? berth->CreateWorkspace(*request, CallDeadline(), o.idempotency_key)
                                    : berth->CreateFromTemplate(o.name, o.template_name, CallDeadline());
  if (!ws) return Fail(ws.error());
  if (o.wait) {
    if (!ctx.json()) ctx.Note(fmt::format("created {}; waiting for it to boot…", StateLine(*ws)));
    auto running = berth->Wait(ws->id, v1::State::kRunning, DeadlineIn(*wait_timeout));
    if (!running) {
      return Fail(WaitError(running.error(), ws->id, v1::State::kRunning, *wait_timeout));
    }
    ws = std::move(running);
  }
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*ws));
  } else {
    ctx.out() << StateLine(*ws) << "\n";
  }
  return kExitOk;
}

struct ListOptions {
  std::string state;                // "" for any
  std::vector<std::string> labels;  // "K=V", all must match
};

Result<int> List(Context& ctx, const ListOptions& o) {
  v1::WorkspaceFilter filter;
  if (!o.state.empty()) {
    filter.state = v1::StateFromName(o.state);
    if (!filter.state) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown state '{}'", o.state));
    }
  }
  for (const auto& label : o.labels) {
    auto kv = SplitKeyValue(label, "--label");
    if (!kv) return Fail(kv.error());
    filter.labels.push_back(std::move(*kv));
  }
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  // Every page; each page is one call, the whole walk gets time in proportion.
  auto all = berth->ListWorkspaces(filter, DeadlineIn(kCallTimeout * 10));
  if (!all) return Fail(all.error());
  const auto& workspaces = all->workspaces;
  if (ctx.json()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& ws : workspaces) out.push_back(v1::ToJson(ws));
    ctx.PrintJson(out);
    return kExitOk;
  }
  if (workspaces.empty()) {
    ctx.err() << "no workspaces\n";
    return kExitOk;
  }
  Table table(WorkspaceHeader());
  for (const auto& ws : workspaces) table.AddRow(WorkspaceRow(ws, ctx.now()));
  ctx.out() << table.Render();
  return kExitOk;
}

Result<int> Get(Context& ctx, const std::string& ws_arg) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto ws = berth->GetWorkspace(ws_arg, CallDeadline());
  if (!ws) return Fail(ws.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*ws));
  } else {
    ctx.out() << FormatWorkspace(*ws, ctx.now());
  }
  return kExitOk;
}

enum class Verb { kStart, kStop, kHibernate, kRestart };

struct ActionOptions {
  std::vector<std::string> workspaces;
  bool wait = false;
  std::string wait_timeout = "5m";
  bool force = false;  // stop
};

Result<v1::Workspace> Act(const client::BerthClient& berth, Verb verb, const std::string& ws,
                          bool force) {
  switch (verb) {
    case Verb::kStart: return berth.StartWorkspace(ws, CallDeadline());
    case Verb::kStop: return berth.StopWorkspace(ws, force, CallDeadline());
    case Verb::kHibernate: return berth.HibernateWorkspace(ws, CallDeadline());
    case Verb::kRestart: return berth.RestartWorkspace(ws, CallDeadline());
  }
  return Fail(ErrorCode::kInternal, "unknown action");
}

// start/stop/hibernate/restart on each workspace in turn; the last failure's exit code.
Result<int> Transition(Context& ctx, const ActionOptions& o, Verb verb, v1::State target) {
  auto wait_timeout = WaitTimeout(o.wait_timeout);
  if (!wait_timeout) return Fail(wait_timeout.error());
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  int code = kExitOk;
  nlohmann::json results = nlohmann::json::array();
  for (const auto& name : o.workspaces) {
    auto ws = Act(*berth, verb, name, o.force);
    if (ws && o.wait) {
      ws = berth->Wait(name, target, DeadlineIn(*wait_timeout));
      if (!ws) ws = Fail(WaitError(ws.error(), name, target, *wait_timeout));
    }
    if (!ws) {
      code = ctx.Report(Error{ws.error().code, fmt::format("{}: {}", name, ws.error().message)});
      continue;
    }
    if (ctx.json()) {
      results.push_back(v1::ToJson(*ws));
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

Result<int> Remove(Context& ctx, const RemoveOptions& o) {
  auto wait_timeout = WaitTimeout(o.wait_timeout);
  if (!wait_timeout) return Fail(wait_timeout.error());
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  int code = kExitOk;
  for (const auto& name : o.workspaces) {
    auto ws = berth->GetWorkspace(name, CallDeadline());
    if (!ws) {
      code = ctx.Report(Error{ws.error().code, fmt::format("{}: {}", name, ws.error().message)});
      continue;
    }
    const std::string& id = ws->id;
    if (!o.yes) {
      if (!ctx.env().stdin_tty) {
        return Fail(ErrorCode::kInvalidArgument,
                    fmt::format("not deleting {} without confirmation: pass --yes", name));
      }
      std::string question = fmt::format(
          "Delete workspace {} ({}) and its disks? This cannot be undone.", ws->name, id);
      if (!Confirm(*ctx.env().in, ctx.err(), question)) {
        ctx.err() << "kept " << name << "\n";
        code = kExitError;
        continue;
      }
    }
    auto deleted = berth->DeleteWorkspace(id, CallDeadline());
    Status gone;
    if (deleted && o.wait) {
      gone = berth->WaitDeleted(id, DeadlineIn(*wait_timeout));
      if (!gone && gone.error().code == ErrorCode::kDeadlineExceeded) {
        gone = Fail(ErrorCode::kDeadlineExceeded,
                    fmt::format("{} was not gone within {}s", id, wait_timeout->count()));
      }
    }
    if (!deleted || !gone) {
      const Error& e = !deleted ? deleted.error() : gone.error();
      code = ctx.Report(Error{e.code, fmt::format("{}: {}", name, e.message)});
      continue;
    }
    if (ctx.json()) {
      ctx.PrintJson(v1::ToJson(*deleted));
    } else {
      ctx.out() << fmt::format("{} ({}): {}\n", ws->name, id,
                               o.wait ? "deleted" : v1::StateName(deleted->state));
    }
  }
  return code;
}

void AddTransition(Builder& b, const std::string& name, const std::string& description,
                   Verb verb, v1::State target) {
  auto o = std::make_shared<ActionOptions>();
  auto* cmd = b.Add(name, description, [o, verb, target](Context& ctx) {
    return Transition(ctx, *o, verb, target);
  });
  cmd->add_option("workspace", o->workspaces, "workspace ids or names")->required();
  cmd->add_flag("--wait", o->wait, fmt::format("wait until it is {}", v1::StateName(target)));
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
  create->add_option("--screen", c->screen, "the desktop image's screen, WIDTHxHEIGHT (default 1280x800)");
  // One value per flag, so that a positional after it stays one.
  create->add_option("--env", c->env, "K=V environment for every process (repeatable)")
      ->allow_extra_args(false);
  create->add_option("--label", c->labels, "K=V label (repeatable)")->allow_extra_args(false);
  create->add_option("--idempotency-key", c->idempotency_key,
                     "a retry with the same key returns the same workspace");
  create->add_option("--template", c->template_name,
                     "start from this template (`berth template ls`): its disks and running programs, warm");
  create->add_flag("--wait", c->wait, "wait until it is running");
  create->add_option("--wait-timeout", c->wait_timeout, "how long --wait waits")
      ->capture_default_str();
  b.AddJsonFlag(create);

  auto filter = std::make_shared<ListOptions>();
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

  AddTransition(b, "start", "start workspaces (a hibernated one resumes)", Verb::kStart,
                v1::State::kRunning);
  AddTransition(b, "stop", "stop workspaces (ACPI power-off; the disk stays)", Verb::kStop,
                v1::State::kStopped);
  AddTransition(b, "hibernate", "hibernate workspaces (memory and processes saved to disk)",
                Verb::kHibernate, v1::State::kHibernated);
  AddTransition(b, "restart", "stop, then start workspaces", Verb::kRestart, v1::State::kRunning);

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
