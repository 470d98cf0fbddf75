#include "mcp/tool.h"

#include <exception>

#include <fmt/format.h>

#include "common/protocol/exec.h"
#include "mcp/arguments.h"

namespace berth::mcp {

ToolResult ToolResult::Text(std::string text, std::optional<nlohmann::json> structured) {
  ToolResult result;
  result.texts.push_back(std::move(text));
  result.structured = std::move(structured);
  return result;
}

ToolResult ToolResult::Failure(std::string message) {
  ToolResult result;
  result.texts.push_back(std::move(message));
  result.is_error = true;
  return result;
}

nlohmann::json ToolResult::ToJson(bool with_structured) const {
  nlohmann::json content = nlohmann::json::array();
  for (const auto& text : texts) {
    nlohmann::json block = nlohmann::json::object();
    block["type"] = "text";
    block["text"] = text;
    content.push_back(std::move(block));
  }
  for (const auto& image : images) {
    nlohmann::json block = nlohmann::json::object();
    block["type"] = "image";
    block["data"] = protocol::Base64Encode(image.bytes);
    block["mimeType"] = image.mime;
    content.push_back(std::move(block));
  }
  nlohmann::json out = nlohmann::json::object();
  out["content"] = std::move(content);
  if (with_structured && structured && structured->is_object()) out["structuredContent"] = *structured;
  if (is_error) out["isError"] = true;
  return out;
}

std::string SessionState::default_workspace() const {
  std::lock_guard lock(mutex_);
  return default_workspace_;
}

void SessionState::set_default_workspace(std::string workspace) {
  std::lock_guard lock(mutex_);
  default_workspace_ = std::move(workspace);
}

void SessionState::ForgetWorkspace(std::string_view id, std::string_view name) {
  std::lock_guard lock(mutex_);
  if (!default_workspace_.empty() &&
      (default_workspace_ == id || (!name.empty() && default_workspace_ == name))) {
    default_workspace_.clear();
  }
}

Result<std::string> ToolContext::Workspace(const nlohmann::json& args) const {
  if (auto it = args.find("workspace"); it != args.end() && it->is_string() && !it->empty()) {
    return it->get<std::string>();
  }
  std::string fallback = state_.default_workspace();
  if (!fallback.empty()) return fallback;
  return Fail(ErrorCode::kInvalidArgument,
              "no workspace given and none chosen for this session: pass 'workspace' (an id or "
              "a name; workspace_list shows them), choose one with workspace_use, or make one "
              "with workspace_create");
}

std::string DescribeError(const Error& error) {
  std::string text = fmt::format("{}: {}", ErrorCodeName(error.code), error.message);
  switch (error.code) {
    case ErrorCode::kUnauthenticated:
      text += " (berthd refused the API key; check the key this MCP server was given)";
      break;
    case ErrorCode::kPermissionDenied:
      text += " (this API key's scope does not allow it; a read-scope key can only look)";
      break;
    case ErrorCode::kUnavailable:
      if (error.message.starts_with("connect")) text += " (is berthd running at that address?)";
      break;
    case ErrorCode::kDeadlineExceeded:
      text += " (it may still complete; check again before retrying)";
      break;
    default: break;
  }
  return text;
}

const std::vector<Tool>& AllTools() {
  static const std::vector<Tool> tools = [] {
    std::vector<Tool> all;
    for (auto group : {WorkspaceTools, ExecTools, FileTools, PortTools, NetworkTools, DesktopTools, EventTools,
                       CheckpointTools}) {
      for (auto& tool : group()) all.push_back(std::move(tool));
    }
    return all;
  }();
  return tools;
}

const Tool* FindTool(std::string_view name) {
  for (const auto& tool : AllTools()) {
    if (tool.name == name) return &tool;
  }
  return nullptr;
}

ToolResult CallTool(const Tool& tool, ToolContext& ctx, const nlohmann::json& args) {
  auto valid = ValidateArguments(tool.input_schema, args);
  if (!valid) {
    return ToolResult::Failure(fmt::format("{}: {}", tool.name, valid.error().message));
  }
  try {
    auto result = tool.run(ctx, args);
    if (!result) return ToolResult::Failure(DescribeError(result.error()));
    return std::move(*result);
  } catch (const std::exception& e) {
    // A broken invariant in a tool must not end the session; the model sees what happened.
    return ToolResult::Failure(fmt::format("internal: {} failed: {}", tool.name, e.what()));
  }
}

namespace schema {

nlohmann::json Object(nlohmann::json properties, const std::vector<std::string>& required) {
  nlohmann::json out = nlohmann::json::object();
  out["type"] = "object";
  out["properties"] = std::move(properties);
  if (!required.empty()) out["required"] = required;
  out["additionalProperties"] = false;
  return out;
}

nlohmann::json String(std::string_view description) {
  nlohmann::json out = nlohmann::json::object();
  out["type"] = "string";
  out["description"] = std::string(description);
  return out;
}

nlohmann::json Integer(std::string_view description, long long minimum, long long maximum) {
  nlohmann::json out = nlohmann::json::object();
  out["type"] = "integer";
  out["description"] = std::string(description);
  out["minimum"] = minimum;
  out["maximum"] = maximum;
  return out;
}

nlohmann::json Boolean(std::string_view description) {
  nlohmann::json out = nlohmann::json::object();
  out["type"] = "boolean";
  out["description"] = std::string(description);
  return out;
}

nlohmann::json WorkspaceArg() {
  return String(
      "The workspace: its id (ws_...) or its name. Optional: defaults to the workspace this "
      "session chose with workspace_use or last created with workspace_create.");
}

}  // namespace schema

nlohmann::json ReadOnly() {
  nlohmann::json out = nlohmann::json::object();
  out["readOnlyHint"] = true;
  out["openWorldHint"] = false;
  return out;
}

nlohmann::json Mutating(bool destructive, bool idempotent) {
  nlohmann::json out = nlohmann::json::object();
  out["readOnlyHint"] = false;
  out["destructiveHint"] = destructive;
  out["idempotentHint"] = idempotent;
  out["openWorldHint"] = false;
  return out;
}

}  // namespace berth::mcp
