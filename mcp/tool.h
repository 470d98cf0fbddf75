// What a tool is, what it gets (ToolContext) and what it answers (ToolResult). Tools live one
// group per file (tools_workspace.cc, tools_exec.cc, tools_files.cc, tools_ports.cc); each
// calls Berth through the session's Backend (backend.h), blocking the calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/deadline.h"
#include "common/error.h"
#include "mcp/backend.h"

namespace berth::mcp {

// A tool's answer: text blocks for the model, and the same facts as JSON (structuredContent)
// for clients that negotiated a protocol revision that has it.
struct ToolResult {
  ToolResult() = default;
  // An image content block (MCP ImageContent): the bytes and their MIME type.
  struct Image {
    std::string bytes;
    std::string mime;
  };
  std::vector<std::string> texts;
  std::vector<Image> images;  // after the texts
  std::optional<nlohmann::json> structured;  // an object
  bool is_error = false;

  static ToolResult Text(std::string text,
                         std::optional<nlohmann::json> structured = std::nullopt);
  static ToolResult Failure(std::string message);
  // The CallToolResult object. `with_structured`: include structuredContent (2025-06-18 on).
  nlohmann::json ToJson(bool with_structured) const;
};

// What one MCP session remembers between tool calls. Any thread.
class SessionState {
 public:
  explicit SessionState(std::string default_workspace = {})
      : default_workspace_(std::move(default_workspace)) {}
  std::string default_workspace() const;
  void set_default_workspace(std::string workspace);
  // Forgets the default when it names the workspace `id` or `name` (it was deleted).
  void ForgetWorkspace(std::string_view id, std::string_view name);

 private:
  mutable std::mutex mutex_;
  std::string default_workspace_;
};

class ToolContext {
 public:
  // One call's deadline unless a tool asks for longer. Calls on a stopped workspace wait for
  // it to boot (tens of seconds under TCG), so this is generous; calls that wait on purpose
  // (exec, workspace_create, process_output's wait) set their own.
  static constexpr std::chrono::seconds kDefaultCallTimeout{300};

  ToolContext(Backend& backend, SessionState& state) : backend_(backend), state_(state) {}

  Backend& backend() const { return backend_; }
  // The deadline of a call made now that may take `timeout`.
  static Deadline CallDeadline(std::chrono::seconds timeout = kDefaultCallTimeout) {
    return DeadlineIn(timeout);
  }
  // The workspace a call is about: args["workspace"] when given, else the session's default.
  // invalid_argument, saying how to choose one, when there is neither.
  Result<std::string> Workspace(const nlohmann::json& args) const;
  SessionState& state() const { return state_; }

 private:
  Backend& backend_;
  SessionState& state_;
};

using ToolFn = std::function<Result<ToolResult>(ToolContext& ctx, const nlohmann::json& args)>;

struct Tool {
  std::string name;
  std::string title;
  std::string description;
  nlohmann::json input_schema;  // JSON Schema, type "object"
  // Hints for clients (MCP ToolAnnotations): readOnlyHint, destructiveHint, idempotentHint,
  // openWorldHint.
  nlohmann::json annotations = nlohmann::json::object();
  ToolFn run;
};

// Every tool, in the order tools/list shows them. Built once; any thread.
const std::vector<Tool>& AllTools();
const Tool* FindTool(std::string_view name);

// Checks `args` against the tool's schema, runs the tool and turns every failure (bad
// arguments, berthd's errors, exceptions) into an isError result with a message a model can
// act on. Never throws.
ToolResult CallTool(const Tool& tool, ToolContext& ctx, const nlohmann::json& args);

// A Berth error as a model should read it: "not_found: workspace 'x' not found",
// with a hint on what to do for the codes that have an obvious one.
std::string DescribeError(const Error& error);

// The groups (one file each).
std::vector<Tool> WorkspaceTools();
std::vector<Tool> ExecTools();
std::vector<Tool> FileTools();
std::vector<Tool> PortTools();
std::vector<Tool> NetworkTools();
std::vector<Tool> DesktopTools();
std::vector<Tool> EventTools();
std::vector<Tool> CheckpointTools();

// Schema building blocks shared by the groups.
namespace schema {
nlohmann::json Object(nlohmann::json properties, const std::vector<std::string>& required = {});
nlohmann::json String(std::string_view description);
nlohmann::json Integer(std::string_view description, long long minimum, long long maximum);
nlohmann::json Boolean(std::string_view description);
// The optional `workspace` argument every workspace-scoped tool takes.
nlohmann::json WorkspaceArg();
}  // namespace schema

// Annotation sets.
nlohmann::json ReadOnly();
nlohmann::json Mutating(bool destructive, bool idempotent);

}  // namespace berth::mcp
