// Forks and templates (docs/api.md, "Forks"): `berth fork SOURCE NAME` makes new workspaces
// from a checkpoint of another (its disks, and its running programs when the checkpoint has
// memory), each with its own identity (machine-id, SSH host keys, MAC, token, fresh entropy);
// `berth template create NAME --from WS` publishes a checkpoint with memory under a name (or
// `--script FILE` has berthd build one: a workspace of its own runs the script, and its memory
// afterwards is the template), and `berth create NAME --template T` (cmd_workspaces.cc) starts
// a workspace from it; `berth template ls|rm` list and delete them.
#include <fstream>
#include <iostream>
#include <thread>

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
  // Or built from a script (a file, "-": stdin).
  std::string script;
  std::string start;
  std::string ready;
  std::string image;
  std::string size;
  std::string timeout;
  bool wait = false;
  std::string wait_timeout = "60m";
};

// A build's script: the file, or stdin for "-"; berthd takes up to 64 KiB.
Result<std::string> ReadScript(const std::string& path) {
  constexpr size_t kMax = 64 * 1024;
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Fail(ErrorCode::kInvalidArgument, fmt::format("cannot read the script {}", path));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.empty()) return Fail(ErrorCode::kInvalidArgument, "the script is empty");
  if (text.size() > kMax) return Fail(ErrorCode::kInvalidArgument, "the script is larger than 64 KiB");
  return text;
}

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
  if (o.script.empty() == o.workspace.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "give either --from WORKSPACE or --script FILE");
  }
  std::optional<std::chrono::seconds> wait_timeout;
  if (!o.script.empty()) {
    if (!o.checkpoint.empty()) return Fail(ErrorCode::kInvalidArgument, "--checkpoint goes with --from, not --script");
    auto script = ReadScript(o.script);
    if (!script) return Fail(script.error());
    request.script = std::move(*script);
    if (!o.start.empty()) request.start = o.start;
    if (!o.ready.empty()) request.ready = o.ready;
    if (!o.image.empty()) request.image = o.image;
    if (!o.size.empty()) request.size = o.size;
    if (!o.timeout.empty()) {
      auto timeout = ParseDuration(o.timeout);
      if (!timeout) return Fail(timeout.error());
      request.timeout_s = timeout->count();
    }
    auto w = ParseDuration(o.wait_timeout);
    if (!w) return Fail(w.error());
    wait_timeout = *w;
  } else {
    if (!o.start.empty() || !o.ready.empty() || !o.image.empty() || !o.size.empty() || !o.timeout.empty() || o.wait) {
      return Fail(ErrorCode::kInvalidArgument,
                  "--start, --ready, --image, --size, --timeout and --wait go with --script, not --from");
    }
    request.workspace = o.workspace;
    if (!o.checkpoint.empty()) request.checkpoint = o.checkpoint;
  }
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto made = berth->CreateTemplate(request, DeadlineIn(kCallTimeout));
  if (!made) return Fail(made.error());
  if (made->state == "building" && o.wait) {
    if (!ctx.json()) ctx.Note(fmt::format("building {} in workspace {}{}…", made->name, "template-", made->name));
    auto until = DeadlineIn(*wait_timeout);
    while (made->state == "building") {
      if (std::chrono::steady_clock::now() >= until) {
        return Fail(ErrorCode::kDeadlineExceeded, fmt::format("template {} is still being built", made->name));
      }
      std::this_thread::sleep_for(std::chrono::seconds(2));
      auto now = berth->GetTemplate(made->name, DeadlineIn(kCallTimeout));
      if (!now) return Fail(now.error());
      made = std::move(now);
    }
    if (made->state == "failed") {
      if (!ctx.json()) {
        std::cerr << made->build_log.value_or("");
        if (!made->build_log.value_or("").ends_with('\n')) std::cerr << "\n";
      }
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("template {} failed to build: {}", made->name, made->error.value_or("?")));
    }
  }
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*made));
    return kExitOk;
  }
  ctx.out() << made->name << "\n";
  ctx.out().flush();
  if (made->state == "building") {
    ctx.Note(fmt::format("template {} ({}) is being built in workspace {}; see it with: berth template ls", made->name,
                         made->id, made->workspace.value_or(made->workspace_id)));
  } else {
    ctx.Note(fmt::format("template {} ({}) is checkpoint {} of {}; start one with: berth create NAME --template {}",
                         made->name, made->id, made->checkpoint_id, made->workspace.value_or(made->workspace_id),
                         made->name));
  }
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
  Table table({"NAME", "STATE", "ID", "WORKSPACE", "CHECKPOINT", "IMAGE", "CREATED"});
  for (const auto& t : *listed) {
    table.AddRow({t.name, t.state, t.id, t.workspace.value_or(t.workspace_id),
                  t.checkpoint_id.empty() ? "-" : t.checkpoint_id, t.image.value_or("-"),
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
  auto* create = b.Add("create",
                       "publish a workspace's checkpoint with memory as a template, or build one from a setup script",
                       [t](Context& ctx) { return MakeTemplate(ctx, *t); }, group);
  create->add_option("name", t->name, "the template's name, unique in your tenant")->required();
  create->add_option("--from", t->workspace, "the workspace it is made from (id or name)");
  create->add_option("--checkpoint", t->checkpoint,
                     "a checkpoint of it with memory (default: take one now; the workspace must be running)");
  create->add_option("--script", t->script,
                     "build it: a new workspace runs this script (a file; - reads stdin) with bash -e as its user, "
                     "then its memory is the template");
  create->add_option("--start", t->start, "with --script: a command left running in the template (a dev server)");
  create->add_option("--ready", t->ready, "with --script: a command run until it exits 0 before the checkpoint");
  create->add_option("--image", t->image, "with --script: the image (default base)");
  create->add_option("--size", t->size, "with --script: small, medium or large (default small)");
  create->add_option("--timeout", t->timeout, "with --script: how long the build may take (default 30m)");
  create->add_flag("--wait", t->wait, "with --script: wait for the build; a failed one prints its output");
  create->add_option("--wait-timeout", t->wait_timeout, "how long --wait waits");
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
