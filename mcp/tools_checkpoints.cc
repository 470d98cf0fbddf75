// checkpoint_create, checkpoint_list, checkpoint_restore: a workspace's disk checkpoints
// (docs/api.md, "Checkpoints"), so that an agent can try something risky and go back. berthd
// checkpoints a running or stopped workspace; its refusal of a hibernated one says what to do.
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

// "cp_… 'name' (manual, 1.5 MiB, 2026-12-03T16:00:00Z)"; the name only when it is not the id.
std::string Line(const v1::Checkpoint& c) {
  std::string name = c.name.empty() || c.name == c.id ? std::string() : fmt::format(" '{}'", c.name);
  return fmt::format("{}{} ({}, {} bytes, {})", c.id, name, c.kind, c.size_bytes, v1::FormatTime(c.created_at));
}

Result<ToolResult> Create(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  v1::CreateCheckpoint request;
  if (std::string name = Arg(args, "name"); !name.empty()) request.name = name;
  auto taken = ctx.backend().CreateCheckpoint(*ws, request, ToolContext::CallDeadline());
  if (!taken) return Fail(taken.error());
  return ToolResult::Text(
      fmt::format("Checkpoint {} of workspace {}. checkpoint_restore with checkpoint={} brings its "
                  "disks back to this.",
                  Line(*taken), *ws, taken->id),
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

}  // namespace

std::vector<Tool> CheckpointTools() {
  std::vector<Tool> tools;
  json create = json::object();
  create["workspace"] = schema::WorkspaceArg();
  create["name"] = schema::String("A name unique in the workspace (default: the checkpoint's id).");
  tools.push_back(Tool{
      "checkpoint_create", "Checkpoint a workspace's disks",
      "Checkpoint a workspace's disks (every file in it) so that checkpoint_restore can bring "
      "them back later, e.g. before something risky. A running workspace keeps running (its "
      "programs' unsaved memory is not kept, what they wrote is). Answers the checkpoint's id.",
      schema::Object(create), Mutating(false, false), Create});

  json list = json::object();
  list["workspace"] = schema::WorkspaceArg();
  tools.push_back(Tool{"checkpoint_list", "List a workspace's checkpoints",
                       "List a workspace's checkpoints, newest first: id, name, kind (manual, or "
                       "before_restore for a restore's undo), size and when it was taken.",
                       schema::Object(list), ReadOnly(), List});

  json restore = json::object();
  restore["workspace"] = schema::WorkspaceArg();
  restore["checkpoint"] = schema::String("The checkpoint to go back to: its id (cp_...) or name.");
  restore["undo"] = schema::Boolean(
      "First checkpoint the disks as they are, so the restore can be undone (default true).");
  tools.push_back(Tool{
      "checkpoint_restore", "Restore a workspace to a checkpoint",
      "Bring a workspace's disks back to a checkpoint: what was written since is gone. "
      "Unless undo is false, first checkpoints the disks as they are and answers that "
      "checkpoint's id; restoring it undoes this.",
      schema::Object(restore, {"checkpoint"}), Mutating(true, false), Restore});
  return tools;
}

}  // namespace berth::mcp
