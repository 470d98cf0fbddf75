// Forks and templates (docs/api.md, "Forks"): `berth fork SOURCE NAME` makes new workspaces
// from a checkpoint of another (its disks, and its running programs when the checkpoint has
// memory), each with its own identity (machine-id, SSH host keys, MAC, token, fresh entropy);
// `berth template create NAME --from WS` publishes a checkpoint with memory under a name, and
// `berth create NAME --template T` (cmd_workspaces.cc) starts a workspace from it; `berth
// template ls|rm` list and delete them.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/duration.h"

namespace berth::cli {
namespace {

// A fork without a checkpoint takes one first, and a template without one too: each waits
// behind the source's queued operations.
constexpr std::chrono::seconds kCallTimeout{120};

struct ForkOptions {
  std::string source;
  std::string name;
  std::string checkpoint;  // empty: berthd checkpoints the source now
  int count = 1;
  bool wait = false;
  std::string wait_timeout = "5m";
};

struct TemplateOptions {
  std::string name;
  std::string workspace;
  std::string checkpoint;  // empty: berthd takes one with memory now
};

Result<int> Fork(Context& ctx, const ForkOptions& o) {
  if (o.count > 1 && o.checkpoint.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "--count needs --checkpoint: forks made together start from one checkpoint (take one with "
                "`berth checkpoint --memory`)");
  }
  auto wait_timeout = ParseDuration(o.wait_timeout);
  if (!wait_timeout) return Fail(wait_timeout.error());
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  std::vector<v1::Workspace> forks;
  if (o.checkpoint.empty()) {
    auto one = berth->ForkWorkspace(o.name, o.source, DeadlineIn(kCallTimeout));
    if (!one) return Fail(one.error());
    forks.push_back(std::move(*one));
  } else {
    auto made = berth->ForkCheckpoint(o.source, o.checkpoint, o.name, o.count, DeadlineIn(kCallTimeout));
    if (!made) return Fail(made.error());
    forks = std::move(*made);
  }
  if (o.wait) {
    if (!ctx.json()) ctx.Note(fmt::format("forked {}; waiting for {} to run…", o.source, forks.size() == 1 ? "it" : "them"));
    auto until = DeadlineIn(*wait_timeout);
    for (auto& ws : forks) {
      auto running = berth->Wait(ws.id, v1::State::kRunning, until);
      if (!running) return Fail(running.error());
      ws = std::move(*running);
    }
  }
  if (ctx.json()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& ws : forks) out.push_back(v1::ToJson(ws));
    ctx.PrintJson(out);
    return kExitOk;
  }
  for (const auto& ws : forks) ctx.out() << StateLine(ws) << "\n";
  return kExitOk;
}

Result<int> MakeTemplate(Context& ctx, const TemplateOptions& o) {
  v1::CreateTemplate request;
  request.name = o.name;
  request.workspace = o.workspace;
  if (!o.checkpoint.empty()) request.checkpoint = o.checkpoint;
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto made = berth->CreateTemplate(request, DeadlineIn(kCallTimeout));
  if (!made) return Fail(made.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*made));
    return kExitOk;
  }
  ctx.out() << made->name << "\n";
  ctx.out().flush();
  ctx.Note(fmt::format("template {} ({}) is checkpoint {} of {}; start one with: berth create NAME --template {}",
                       made->name, made->id, made->checkpoint_id, made->workspace.value_or(made->workspace_id),
                       made->name));
  return kExitOk;
}

Result<int> RemoveTemplates(Context& ctx, const std::vector<std::string>& names) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  int code = kExitOk;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& name : names) {
    auto gone = berth->DeleteTemplate(name, DeadlineIn(kCallTimeout));
    if (!gone) {
      code = ctx.Report(Error{gone.error().code, fmt::format("{}: {}", name, gone.error().message)});
      continue;
    }
    if (ctx.json()) {
      out.push_back(v1::ToJson(*gone));
    } else {
      ctx.out() << name << ": deleted\n";
    }
  }
  if (ctx.json()) ctx.PrintJson(out);
  return code;
}

Result<int> ListTemplates(Context& ctx) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto listed = berth->ListTemplates(DeadlineIn(kCallTimeout));
  if (!listed) return Fail(listed.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::TemplateListJson(*listed));
    return kExitOk;
  }
  Table table({"NAME", "ID", "WORKSPACE", "CHECKPOINT", "IMAGE", "CREATED"});
  for (const auto& t : *listed) {
    table.AddRow({t.name, t.id, t.workspace.value_or(t.workspace_id), t.checkpoint_id, t.image.value_or("-"),
                  FormatAge(t.created_at, ctx.now()) + " ago"});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

}  // namespace

void AddForkCommands(Builder& b) {
  auto f = std::make_shared<ForkOptions>();
  auto* fork = b.Add("fork",
                     "new workspaces from a checkpoint of another: its disks, and its running programs when the "
                     "checkpoint has memory, each with its own machine-id, SSH host keys, MAC and entropy",
                     [f](Context& ctx) { return Fork(ctx, *f); });
  fork->add_option("source", f->source, "the workspace forked (id or name)")->required();
  fork->add_option("name", f->name, "the new workspace's name; with --count N, NAME-1 … NAME-N")->required();
  fork->add_option("--checkpoint", f->checkpoint,
                   "fork this checkpoint (id or name; default: checkpoint the source now, with memory when it runs)");
  fork->add_option("--count", f->count, "how many forks (1-16; needs --checkpoint)");
  fork->add_flag("--wait", f->wait, "wait until they are running");
  fork->add_option("--wait-timeout", f->wait_timeout, "how long --wait waits");
  b.AddJsonFlag(fork);

  auto* group = b.Group("template", "templates: checkpoints with memory published under a name, that `berth create "
                                    "NAME --template T` starts from warm, in seconds");
  auto t = std::make_shared<TemplateOptions>();
  auto* create = b.Add("create", "publish a workspace's checkpoint with memory as a template",
                       [t](Context& ctx) { return MakeTemplate(ctx, *t); }, group);
  create->add_option("name", t->name, "the template's name, unique in your tenant")->required();
  create->add_option("--from", t->workspace, "the workspace it is made from (id or name)")->required();
  create->add_option("--checkpoint", t->checkpoint,
                     "a checkpoint of it with memory (default: take one now; the workspace must be running)");
  b.AddJsonFlag(create);

  auto* ls = b.Add("ls", "list your tenant's templates",
                   [](Context& ctx) { return ListTemplates(ctx); }, group);
  b.AddJsonFlag(ls);

  auto r = std::make_shared<std::vector<std::string>>();
  auto* rm = b.Add("rm", "delete templates (the workspaces made from them go on)",
                   [r](Context& ctx) { return RemoveTemplates(ctx, *r); }, group);
  rm->add_option("template", *r, "template names or ids")->required();
  b.AddJsonFlag(rm);
}

}  // namespace berth::cli
