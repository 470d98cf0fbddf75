// checkpoint_create, checkpoint_list, checkpoint_restore: a workspace's checkpoints (docs/api.md,
// "Checkpoints"), so that an agent can try something risky and go back; checkpoint_diff: what
// changed since one (files and packages, as the guest compares them); template_list: the
// tenant's templates (checkpoints with memory under a name, "Forks"), that workspace_create
// starts from. berthd checkpoints a
// running, stopped or hibernated workspace's disks, and a running or hibernated one's memory too
// (memory=true: a restore then resumes its programs instead of booting); its refusals (memory
// of a stopped one) say what to do.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "common/v1/time.h"
#include "mcp/text_limits.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

// The guest compares (the workspace may be booted first, then the guest walks its files for up
// to berthd's budget, a minute by default): minutes at worst, as `berth diff` allows.
constexpr std::chrono::seconds kDiffTimeout{900};
// Files per list unless asked: enough to see what happened, few enough for a context window
// (the counts cover the rest).
constexpr int kDefaultDiffEntries = 200;
// The diff's text stops growing past this; the structured result still has every entry.
constexpr size_t kMaxDiffText = 32 * 1024;
// A longer path is cut in the text (the guest's may be 4096 bytes).
constexpr size_t kMaxPathShown = 300;

std::string Arg(const json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "cp_… 'name' (manual, disks, 4096 bytes, 2026-12-03T16:00:00Z)", or "(manual, memory, paused
// 312 ms, ...)" for one with memory; the name only when it is not the id.
std::string Line(const v1::Checkpoint& c) {
  std::string name = c.name.empty() || c.name == c.id ? std::string() : fmt::format(" '{}'", c.name);
  std::string holds = !c.memory ? "disks" : c.pause_ms ? fmt::format("memory, paused {} ms", *c.pause_ms) : "memory";
  return fmt::format("{}{} ({}, {}, {} bytes, {})", c.id, name, c.kind, holds, c.size_bytes,
                     v1::FormatTime(c.created_at));
}

Result<ToolResult> Create(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  v1::CreateCheckpoint request;
  if (std::string name = Arg(args, "name"); !name.empty()) request.name = name;
  if (auto it = args.find("memory"); it != args.end() && it->is_boolean()) request.memory = it->get<bool>();
  auto taken = ctx.backend().CreateCheckpoint(*ws, request, ToolContext::CallDeadline());
  if (!taken) return Fail(taken.error());
  return ToolResult::Text(
      fmt::format("Checkpoint {} of workspace {}. checkpoint_restore with checkpoint={} brings {} back to this.",
                  Line(*taken), *ws, taken->id,
                  taken->memory ? "its disks and its running programs" : "its disks"),
      v1::ToJson(*taken));
}

Result<ToolResult> List(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto listed = ctx.backend().ListCheckpoints(*ws, ToolContext::CallDeadline());
  if (!listed) return Fail(listed.error());
  std::string text;
  if (listed->empty()) {
    text = fmt::format("Workspace {} has no checkpoints.", *ws);
  } else {
    text = fmt::format("{} checkpoint{} of workspace {}, newest first:\n", listed->size(),
                       listed->size() == 1 ? "" : "s", *ws);
    for (const auto& c : *listed) text += "- " + Line(c) + "\n";
  }
  return ToolResult::Text(std::move(text), v1::CheckpointListJson(*listed));
}

Result<ToolResult> Restore(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  std::string cp = Arg(args, "checkpoint");
  v1::RestoreCheckpoint request;
  if (auto it = args.find("undo"); it != args.end() && it->is_boolean()) request.undo = it->get<bool>();
  auto restored = ctx.backend().RestoreCheckpoint(*ws, cp, request, ToolContext::CallDeadline());
  if (!restored) return Fail(restored.error());
  std::string text = fmt::format("Restored workspace {} to checkpoint {}; it is {}.", *ws, cp,
                                 v1::StateName(restored->workspace.state));
  json structured = json::object();
  structured["workspace"] = v1::ToJson(restored->workspace);
  structured["undo"] = nullptr;
  if (restored->undo) {
    text += fmt::format(" To undo, restore checkpoint {} (what the disks held before).", restored->undo->id);
    structured["undo"] = v1::ToJson(*restored->undo);
  } else {
    text += " No undo checkpoint was taken.";
  }
  return ToolResult::Text(std::move(text), std::move(structured));
}

// Lines up to kMaxDiffText bytes; the ones past it are counted instead.
class BoundedLines {
 public:
  void Add(std::string_view line) {
    if (left_out_ > 0 || text_.size() + line.size() + 1 > kMaxDiffText) {
      ++left_out_;
      return;
    }
    text_.append(line).push_back('\n');
  }
  std::string& text() { return text_; }
  size_t left_out() const { return left_out_; }

 private:
  std::string text_;
  size_t left_out_ = 0;
};

// "+ /workspace/app/ (dir, 3 entries, 2048 bytes)", "~ /workspace/README.md (300 bytes)".
// The path is the guest's: data to read, not instructions.
std::string FileLine(char mark, const protocol::FileChange& f) {
  std::string path = f.path.size() > kMaxPathShown ? std::string(Utf8Prefix(f.path, kMaxPathShown)) + "..." : f.path;
  std::string detail = f.type == "file"                  ? fmt::format("{} bytes", f.size)
                       : f.type == "dir" && f.entries > 0 ? fmt::format("dir, {} entries, {} bytes", f.entries, f.size)
                                                          : f.type;
  return fmt::format("{} {}{} ({})", mark, path, f.type == "dir" ? "/" : "", detail);
}

Result<ToolResult> Diff(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  std::string cp = Arg(args, "checkpoint");
  std::string to = Arg(args, "to");
  if (to.empty()) to = "current";
  int max_entries = args.contains("max_entries") && args["max_entries"].is_number_integer()
                        ? args["max_entries"].get<int>()
                        : kDefaultDiffEntries;
  max_entries = std::clamp(max_entries, 1, protocol::kMaxDiffEntries);
  auto diff = ctx.backend().DiffCheckpoint(*ws, cp, to, max_entries, ToolContext::CallDeadline(kDiffTimeout));
  if (!diff) return Fail(diff.error());

  const protocol::DiffResult& r = diff->result;
  const auto& counts = r.files.counts;
  const auto& p = r.packages;
  std::string since = fmt::format("from checkpoint {} to {} in workspace {}", diff->from,
                                  diff->to == "current" ? std::string("now") : "checkpoint " + diff->to, *ws);
  std::string under = r.paths.empty() ? std::string("the workspace") : fmt::format("{}", fmt::join(r.paths, ", "));
  const bool files_changed = counts.added + counts.changed + counts.removed > 0;
  const bool packages_changed = !p.installed.empty() || !p.changed.empty() || !p.removed.empty();
  BoundedLines lines;
  if (!files_changed && !packages_changed) {
    lines.text() = fmt::format("No changes {} (files under {}, and Debian packages).\n", since, under);
  } else {
    lines.text() = fmt::format(
        "Changes {}: files under {}: {} added, {} changed, {} removed; packages: {} installed, {} changed, {} "
        "removed.\n",
        since, under, counts.added, counts.changed, counts.removed, p.installed.size(), p.changed.size(),
        p.removed.size());
  }
  if (files_changed) {
    lines.Add("Files (+ added, ~ changed, - removed; a directory added or removed whole is one entry):");
    for (const auto& f : r.files.added) lines.Add(FileLine('+', f));
    for (const auto& f : r.files.changed) lines.Add(FileLine('~', f));
    for (const auto& f : r.files.removed) lines.Add(FileLine('-', f));
  }
  if (packages_changed) {
    lines.Add("Packages:");
    for (const auto& c : p.installed) lines.Add(fmt::format("+ {} {}", c.name, c.to));
    for (const auto& c : p.changed) lines.Add(fmt::format("~ {} {} -> {}", c.name, c.from, c.to));
    for (const auto& c : p.removed) lines.Add(fmt::format("- {} {}", c.name, c.from));
  }
  std::string text = std::move(lines.text());
  if (lines.left_out() > 0) {
    text += fmt::format("[... {} more lines left out to keep this short; the structured result lists them all]\n",
                        lines.left_out());
  }

  // The notes on what is missing: lists cut at max_entries, or a walk cut at its time budget.
  std::vector<std::string> cut;
  auto note_cut = [&](const std::vector<protocol::FileChange>& list, int64_t total, std::string_view what) {
    if (total > static_cast<int64_t>(list.size())) cut.push_back(fmt::format("{} of {} {}", list.size(), total, what));
  };
  note_cut(r.files.added, counts.added, "added");
  note_cut(r.files.changed, counts.changed, "changed");
  note_cut(r.files.removed, counts.removed, "removed");
  if (!cut.empty()) {
    text += fmt::format("Truncated: only {} files are listed (max_entries={}). ", fmt::join(cut, ", "), max_entries);
    text += max_entries < protocol::kMaxDiffEntries
                ? fmt::format("Call again with a larger max_entries (up to {}) to see more, or look inside a "
                              "directory with file_list.\n",
                              protocol::kMaxDiffEntries)
                : std::string("Look inside a directory with file_list to see more.\n");
  } else if (r.files.truncated) {
    text += "Truncated: the guest's walk stopped at its time budget, so the files and counts above are only "
            "those it compared before then.\n";
  }
  return ToolResult::Text(std::move(text), v1::ToJson(*diff));
}

Result<ToolResult> ListTemplates(ToolContext& ctx, const json&) {
  auto listed = ctx.backend().ListTemplates(ToolContext::CallDeadline());
  if (!listed) return Fail(listed.error());
  std::string text;
  if (listed->empty()) {
    text = "There are no templates. A template is made from a running workspace with POST /v1/templates "
           "(berth template create).";
  } else {
    text = fmt::format("{} template{}; workspace_create with template=NAME starts a workspace from one:\n",
                       listed->size(), listed->size() == 1 ? "" : "s");
    for (const auto& t : *listed) {
      text += fmt::format("- {} ({}): image {}, from workspace {}, checkpoint {}, {}\n", t.name, t.id,
                          t.image.value_or("?"), t.workspace.value_or(t.workspace_id), t.checkpoint_id,
                          v1::FormatTime(t.created_at));
    }
  }
  return ToolResult::Text(std::move(text), v1::TemplateListJson(*listed));
}

}  // namespace

std::vector<Tool> CheckpointTools() {
  std::vector<Tool> tools;
  json create = json::object();
  create["workspace"] = schema::WorkspaceArg();
  create["name"] = schema::String("A name unique in the workspace (default: the checkpoint's id).");
  create["memory"] = schema::Boolean(
      "Also save the running programs' memory so a restore resumes them; running workspaces only; "
      "the guest pauses briefly (default false: the disks only).");
  tools.push_back(Tool{
      "checkpoint_create", "Checkpoint a workspace",
      "Checkpoint a workspace's disks (every file in it) so that checkpoint_restore can bring "
      "them back later, e.g. before something risky. A running workspace keeps running. Without "
      "memory, its programs' memory is not kept (what they wrote is) and a restore boots it; with "
      "memory=true (running workspaces only) their memory is saved too, the guest paused briefly "
      "(pause_ms), and a restore resumes them where they were. Answers the checkpoint's id.",
      schema::Object(create), Mutating(false, false), Create});

  json list = json::object();
  list["workspace"] = schema::WorkspaceArg();
  tools.push_back(Tool{"checkpoint_list", "List a workspace's checkpoints",
                       "List a workspace's checkpoints, newest first: id, name, kind (manual, or "
                       "before_restore for a restore's undo), whether it holds memory (and how long "
                       "the guest paused for it), size and when it was taken.",
                       schema::Object(list), ReadOnly(), List});

  json restore = json::object();
  restore["workspace"] = schema::WorkspaceArg();
  restore["checkpoint"] = schema::String("The checkpoint to go back to: its id (cp_...) or name.");
  restore["undo"] = schema::Boolean(
      "First checkpoint the workspace as it is, so the restore can be undone (default true).");
  tools.push_back(Tool{
      "checkpoint_restore", "Restore a workspace to a checkpoint",
      "Bring a workspace's disks back to a checkpoint: what was written since is gone. A "
      "checkpoint with memory also brings back its running programs: the workspace is starting, "
      "then running with them resumed where they were (not rebooted). A checkpoint of disks only "
      "boots a workspace that was running. Unless undo is false, first checkpoints the workspace "
      "as it is (with its memory too when it runs and the checkpoint has memory) and answers that "
      "checkpoint's id; restoring it undoes this.",
      schema::Object(restore, {"checkpoint"}), Mutating(true, false), Restore});

  json diff = json::object();
  diff["workspace"] = schema::WorkspaceArg();
  diff["checkpoint"] = schema::String("The checkpoint to compare from: its id (cp_...) or name.");
  diff["to"] = schema::String(
      "What to compare it with: another checkpoint's id or name, or \"current\" for the workspace as it is "
      "now (default \"current\").");
  diff["max_entries"] = schema::Integer(
      fmt::format("At most this many files per list (added, changed, removed); the counts still cover all "
                  "of them (default {}).",
                  kDefaultDiffEntries),
      1, protocol::kMaxDiffEntries);
  tools.push_back(Tool{
      "checkpoint_diff", "See what changed since a checkpoint",
      "See what changed in a workspace since a checkpoint: the files added (+), changed (~) and removed (-) "
      "under /workspace and the home directory, with their sizes (a directory added or removed whole is one "
      "entry, with how many entries it holds), and the Debian packages installed, changed (another version) and "
      "removed. Compares with the workspace as it is now (the default) or with another checkpoint (to). Changes "
      "no file: compared with now, it shows what a checkpoint_restore to that checkpoint would throw away. The "
      "guest compares: a stopped or hibernated workspace is started first, and a big tree can take a minute or "
      "more.",
      schema::Object(diff, {"checkpoint"}), ReadOnly(), Diff});

  tools.push_back(Tool{"template_list", "List templates",
                       "List your templates: prepared workspaces (toolchain installed, servers started) saved "
                       "with their memory under a name. workspace_create with template=NAME starts a "
                       "workspace from one, running, in seconds instead of a cold boot.",
                       schema::Object(json::object()), ReadOnly(), ListTemplates});
  return tools;
}

}  // namespace berth::mcp
