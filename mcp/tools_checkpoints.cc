// checkpoint_create, checkpoint_list, checkpoint_restore: a workspace's checkpoints (docs/api.md,
// "Checkpoints"), so that an agent can try something risky and go back; template_list: the
// tenant's templates (checkpoints with memory under a name, "Forks"), that workspace_create
// starts from. berthd checkpoints a
// running, stopped or hibernated workspace's disks, and a running or hibernated one's memory too
// (memory=true: a restore then resumes its programs instead of booting); its refusals (memory
// of a stopped one) say what to do.
#include <fmt/format.h>

#include "common/v1/time.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

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

  tools.push_back(Tool{"template_list", "List templates",
                       "List your templates: prepared workspaces (toolchain installed, servers started) saved "
                       "with their memory under a name. workspace_create with template=NAME starts a "
                       "workspace from one, running, in seconds instead of a cold boot.",
                       schema::Object(json::object()), ReadOnly(), ListTemplates});
  return tools;
}

}  // namespace berth::mcp
