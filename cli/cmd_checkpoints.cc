// Checkpoints (docs/api.md, "Checkpoints"): `berth checkpoint WS` takes one and prints its id
// alone on stdout, so that `cp=$(berth checkpoint ws)` works; `berth checkpoints WS` lists a
// workspace's checkpoints and deletes them; `berth restore WS CP` brings the disks (and, for a
// checkpoint with memory, the running programs) back to one and says how to undo it. berthd
// checkpoints a running or stopped workspace's disks, and a running one's memory too with
// --memory; a hibernated one, or --memory of a stopped one, is its 409, exit 6 (conflict).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"

namespace berth::cli {
namespace {

// A checkpoint copies no data (it freezes the disks' top layers and starts new ones), but a
// restore with undo takes one first and each waits behind the workspace's queued operations.
constexpr std::chrono::seconds kCallTimeout{120};

struct CheckpointOptions {
  std::string workspace;
  std::string name;  // empty: berthd names it by its id
  bool memory = false;  // the guest's memory too (running workspaces only)
};

struct CheckpointsOptions {
  std::string workspace;
  std::vector<std::string> remove;  // checkpoint ids or names
};

struct RestoreOptions {
  std::string workspace;
  std::string checkpoint;
  bool no_undo = false;
};

// "manual ckpt_… (name)" in notes: the name only when it says more than the id.
std::string Describe(const v1::Checkpoint& c) {
  return c.name.empty() || c.name == c.id ? c.id : fmt::format("{} ({})", c.name, c.id);
}

Result<int> Take(Context& ctx, const CheckpointOptions& o) {
  v1::CreateCheckpoint request;
  if (!o.name.empty()) request.name = o.name;
  request.memory = o.memory;
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto taken = berth->CreateCheckpoint(o.workspace, request, DeadlineIn(kCallTimeout));
  if (!taken) return Fail(taken.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*taken));
    return kExitOk;
  }
  // The id alone on stdout; what it is for people on stderr.
  ctx.out() << taken->id << "\n";
  ctx.out().flush();
  ctx.Note(fmt::format("checkpoint {} of {} ({}, {}); restore it with: berth restore {} {}", Describe(*taken),
                       o.workspace, CheckpointContents(*taken),
                       FormatBytes(static_cast<uint64_t>(taken->size_bytes)), o.workspace, taken->id));
  return kExitOk;
}

Result<int> Remove(Context& ctx, const client::BerthClient& berth, const CheckpointsOptions& o) {
  int code = kExitOk;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& cp : o.remove) {
    auto gone = berth.DeleteCheckpoint(o.workspace, cp, DeadlineIn(kCallTimeout));
    if (!gone) {
      code = ctx.Report(Error{gone.error().code, fmt::format("{}: {}", cp, gone.error().message)});
      continue;
    }
    if (ctx.json()) {
      out.push_back(v1::ToJson(*gone));
    } else {
      ctx.out() << cp << ": deleted\n";
    }
  }
  if (ctx.json()) ctx.PrintJson(out);
  return code;
}

Result<int> List(Context& ctx, const CheckpointsOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  if (!o.remove.empty()) return Remove(ctx, *berth, o);
  auto listed = berth->ListCheckpoints(o.workspace, DeadlineIn(kCallTimeout));
  if (!listed) return Fail(listed.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::CheckpointListJson(*listed));
    return kExitOk;
  }
  Table table({"NAME", "ID", "KIND", "SAVED", "SIZE", "CREATED", "PARENT"});
  for (const auto& c : *listed) {
    table.AddRow({c.name, c.id, c.kind, CheckpointContents(c), FormatBytes(static_cast<uint64_t>(c.size_bytes)),
                  FormatAge(c.created_at, ctx.now()) + " ago", c.parent.value_or("-")});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

Result<int> Restore(Context& ctx, const RestoreOptions& o) {
  v1::RestoreCheckpoint request;
  request.undo = !o.no_undo;
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto restored = berth->RestoreCheckpoint(o.workspace, o.checkpoint, request, DeadlineIn(kCallTimeout));
  if (!restored) return Fail(restored.error());
  if (ctx.json()) {
    nlohmann::json answer = {{"workspace", v1::ToJson(restored->workspace)}, {"undo", nullptr}};
    if (restored->undo) answer["undo"] = v1::ToJson(*restored->undo);
    ctx.PrintJson(answer);
    return kExitOk;
  }
  // On stdout, since it is the answer: what was done, and the id that undoes it.
  ctx.out() << fmt::format("restored {} to checkpoint {}; it is {}\n", restored->workspace.name,
                           o.checkpoint, v1::StateName(restored->workspace.state));
  if (restored->undo) {
    ctx.out() << fmt::format("undo checkpoint: {}\n", restored->undo->id);
    ctx.out().flush();
    ctx.Note(fmt::format("undo it with: berth restore {} {}", o.workspace, restored->undo->id));
  } else {
    ctx.out() << "no undo checkpoint (--no-undo): what the disks held before is gone\n";
  }
  return kExitOk;
}

}  // namespace

void AddCheckpointCommands(Builder& b) {
  auto t = std::make_shared<CheckpointOptions>();
  auto* take = b.Add("checkpoint",
                     "checkpoint a workspace's disks (running or stopped), and with --memory its running "
                     "programs, and print the checkpoint's id",
                     [t](Context& ctx) { return Take(ctx, *t); });
  take->add_option("workspace", t->workspace, "workspace id or name")->required();
  take->add_option("--name", t->name, "a name unique in the workspace (default: the id)");
  take->add_flag("--memory", t->memory,
                 "also save the guest's memory, so that a restore resumes its programs instead of "
                 "booting (running workspaces only; the guest pauses briefly)");
  b.AddJsonFlag(take);

  auto l = std::make_shared<CheckpointsOptions>();
  auto* list = b.Add("checkpoints", "list a workspace's checkpoints, newest first, or delete them",
                     [l](Context& ctx) { return List(ctx, *l); });
  list->add_option("workspace", l->workspace, "workspace id or name")->required();
  list->add_option("--rm", l->remove, "delete these checkpoints (ids or names)")->expected(1, -1);
  b.AddJsonFlag(list);

  auto r = std::make_shared<RestoreOptions>();
  auto* restore = b.Add("restore",
                        "bring a workspace's disks back to a checkpoint, and its running programs "
                        "when it has memory (first checkpointing what it holds, so that it can be "
                        "undone)",
                        [r](Context& ctx) { return Restore(ctx, *r); });
  restore->add_option("workspace", r->workspace, "workspace id or name")->required();
  restore->add_option("checkpoint", r->checkpoint, "checkpoint id or name")->required();
  restore->add_flag("--no-undo", r->no_undo,
                    "take no undo checkpoint first: what the disks hold now is lost");
  b.AddJsonFlag(restore);
}

}  // namespace berth::cli
