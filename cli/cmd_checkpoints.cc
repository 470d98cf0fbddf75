// Checkpoints (docs/api.md, "Checkpoints"): `berth checkpoint WS` takes one and prints its id
// alone on stdout, so that `cp=$(berth checkpoint ws)` works; `berth checkpoints WS` lists a
// workspace's checkpoints and deletes them; `berth restore WS CP` brings the disks (and, for a
// checkpoint with memory, the running programs) back to one and says how to undo it. berthd
// checkpoints a running or stopped workspace's disks, and a running one's memory too with
// --memory; a hibernated one, or --memory of a stopped one, is its 409, exit 6 (conflict).
// `berth diff WS CP [--to CP2]` lists what changed since a checkpoint.
#include <fmt/format.h>
#include <fmt/ranges.h>

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

struct DiffOptions {
  std::string workspace;
  std::string checkpoint;
  std::string to = "current";
  int max_entries = protocol::kDefaultDiffEntries;
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

// The guest compares (it may be booted first, then it walks its files): minutes at worst.
constexpr std::chrono::seconds kDiffTimeout{900};

// One line per change, `git status --short` style: "+ path  size", a directory added or removed
// whole with what it holds.
void PrintFiles(std::ostream& out, char mark, const std::vector<protocol::FileChange>& list, int64_t total,
                std::string_view what) {
  for (const auto& f : list) {
    std::string detail;
    if (f.type == "dir" && f.entries > 0) {
      detail = fmt::format("dir, {} entries, {}", f.entries, FormatBytes(static_cast<uint64_t>(f.size)));
    } else if (f.type == "file") {
      detail = FormatBytes(static_cast<uint64_t>(f.size));
    } else {
      detail = f.type;
    }
    out << fmt::format("  {} {}{}  ({})\n", mark, f.path, f.type == "dir" ? "/" : "", detail);
  }
  if (total > static_cast<int64_t>(list.size())) {
    out << fmt::format("  … {} of {} {} shown (--max to see more)\n", list.size(), total, what);
  }
}

Result<int> Diff(Context& ctx, const DiffOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto diff = berth->DiffCheckpoint(o.workspace, o.checkpoint, o.to, o.max_entries, DeadlineIn(kDiffTimeout));
  if (!diff) return Fail(diff.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*diff));
    return kExitOk;
  }
  const auto& r = diff->result;
  const auto& c = r.files.counts;
  std::ostream& out = ctx.out();
  out << fmt::format("{} -> {}: {} added, {} changed, {} removed; packages: {} installed, {} changed, {} removed\n",
                     diff->from, diff->to == "current" ? "now" : diff->to, c.added, c.changed, c.removed,
                     r.packages.installed.size(), r.packages.changed.size(), r.packages.removed.size());
  if (c.added + c.changed + c.removed > 0) {
    out << fmt::format("files under {}:\n", fmt::join(r.paths, ", "));
    PrintFiles(out, '+', r.files.added, c.added, "added");
    PrintFiles(out, '~', r.files.changed, c.changed, "changed");
    PrintFiles(out, '-', r.files.removed, c.removed, "removed");
  }
  if (!r.packages.installed.empty() || !r.packages.changed.empty() || !r.packages.removed.empty()) {
    out << "packages:\n";
    for (const auto& p : r.packages.installed) out << fmt::format("  + {} {}\n", p.name, p.to);
    for (const auto& p : r.packages.changed) out << fmt::format("  ~ {} {} -> {}\n", p.name, p.from, p.to);
    for (const auto& p : r.packages.removed) out << fmt::format("  - {} {}\n", p.name, p.from);
  }
  // Truncated with every change listed: not the lists, the walk was cut (at its time budget).
  const size_t listed = r.files.added.size() + r.files.changed.size() + r.files.removed.size();
  if (r.files.truncated && static_cast<size_t>(c.added + c.changed + c.removed) == listed) {
    ctx.Note("the guest's walk stopped at its time budget: the files above are what it compared");
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

  auto d = std::make_shared<DiffOptions>();
  auto* diff = b.Add("diff",
                     "list the files added, changed and removed under /workspace and the home directory, "
                     "and the Debian packages installed, changed and removed, since a checkpoint (the "
                     "guest compares: a stopped workspace is started)",
                     [d](Context& ctx) { return Diff(ctx, *d); });
  diff->add_option("workspace", d->workspace, "workspace id or name")->required();
  diff->add_option("checkpoint", d->checkpoint, "checkpoint id or name: the state compared from")->required();
  diff->add_option("--to", d->to, "another checkpoint to compare with (default: current, the workspace now)");
  diff->add_option("--max", d->max_entries, "at most this many entries per list (1-10000; default 1000)")
      ->check(CLI::Range(1, protocol::kMaxDiffEntries));
  b.AddJsonFlag(diff);
}

}  // namespace berth::cli
