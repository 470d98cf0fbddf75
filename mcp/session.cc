#include "mcp/session.h"

#include <algorithm>
#include <exception>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/json.h"

namespace berth::mcp {
namespace {

using nlohmann::json;
using jsonrpc::Message;

// Revisions are dates: they order as strings.
bool AtLeast(std::string_view version, std::string_view since) { return version >= since; }

}  // namespace

bool IsSupportedProtocolVersion(std::string_view version) {
  return std::find(kSupportedProtocolVersions.begin(), kSupportedProtocolVersions.end(),
                   version) != kSupportedProtocolVersions.end();
}

std::string NegotiateProtocolVersion(std::string_view requested) {
  return std::string(IsSupportedProtocolVersion(requested) ? requested : kLatestProtocolVersion);
}

McpSession::McpSession(std::shared_ptr<Backend> backend, std::string default_workspace)
    : backend_(std::move(backend)), state_(std::move(default_workspace)) {}

std::string McpSession::protocol_version() const {
  std::lock_guard lock(mutex_);
  return protocol_version_;
}

bool McpSession::initialized() const {
  std::lock_guard lock(mutex_);
  return initialized_;
}

std::optional<json> McpSession::HandleText(std::string_view text) {
  auto payload = ParseJson(text);
  if (!payload) return jsonrpc::ParseErrorResponse(payload.error());
  return Handle(*payload);
}

std::optional<json> McpSession::Handle(const json& payload) {
  if (!payload.is_array()) return HandleOne(payload);
  if (payload.empty()) {
    return jsonrpc::Error(nullptr, jsonrpc::kInvalidRequest, "Invalid Request: empty batch");
  }
  json responses = json::array();
  for (const auto& item : payload) {
    if (auto response = HandleOne(item)) responses.push_back(std::move(*response));
  }
  if (responses.empty()) return std::nullopt;
  return responses;
}

std::optional<json> McpSession::HandleOne(const json& value) {
  auto classified = jsonrpc::Classify(value);
  if (auto* error = std::get_if<json>(&classified)) return std::move(*error);
  const auto& message = std::get<Message>(classified);
  switch (message.kind) {
    case Message::Kind::kResponse:
      return std::nullopt;  // this server sends no requests; nothing to match
    case Message::Kind::kNotification:
      // notifications/initialized, notifications/cancelled (calls are short or run to their
      // end on berthd), anything else: nothing to answer, ever.
      return std::nullopt;
    case Message::Kind::kRequest:
      break;
  }
  try {
    return Dispatch(message);
  } catch (const std::exception& e) {
    spdlog::error("mcp: {} failed: {}", message.method, e.what());
    return jsonrpc::Error(message.id, jsonrpc::kInternalError,
                          fmt::format("Internal error: {}", e.what()));
  }
}

json McpSession::Dispatch(const Message& request) {
  if (request.method == "initialize") return Initialize(request);
  if (request.method == "ping") return jsonrpc::Result(request.id, json::object());
  if (request.method == "tools/list") return ListTools(request);
  if (request.method == "tools/call") return CallToolRequest(request);
  return jsonrpc::Error(request.id, jsonrpc::kMethodNotFound,
                        fmt::format("Method not found: {}", request.method));
}

json McpSession::Initialize(const Message& request) {
  const json& params = request.params;
  if (!params.is_object() || !params.contains("protocolVersion") ||
      !params["protocolVersion"].is_string()) {
    return jsonrpc::Error(request.id, jsonrpc::kInvalidParams,
                          "Invalid params: initialize needs params.protocolVersion (a string)");
  }
  if (params.contains("capabilities") && !params["capabilities"].is_object()) {
    return jsonrpc::Error(request.id, jsonrpc::kInvalidParams,
                          "Invalid params: params.capabilities must be an object");
  }
  std::string version = NegotiateProtocolVersion(params["protocolVersion"].get<std::string>());
  {
    std::lock_guard lock(mutex_);
    protocol_version_ = version;
    initialized_ = true;
  }
  json tools = json::object();
  tools["listChanged"] = false;
  json capabilities = json::object();
  capabilities["tools"] = std::move(tools);
  json server_info = json::object();
  server_info["name"] = "berth";
  if (AtLeast(version, "2025-06-18")) server_info["title"] = "Berth";
  server_info["version"] = BERTH_VERSION;
  json result = json::object();
  result["protocolVersion"] = version;
  result["capabilities"] = std::move(capabilities);
  result["serverInfo"] = std::move(server_info);
  result["instructions"] = Instructions();
  return jsonrpc::Result(request.id, std::move(result));
}

std::string McpSession::Instructions() const {
  std::string text =
      "Berth gives you Linux VMs of your own, called workspaces: Debian systems with a durable "
      "disk at /workspace, where files and installed packages stay between sessions. Start "
      "with workspace_list and reuse the project's workspace, or make one with "
      "workspace_create; workspace_use picks the one this session works in, so later calls "
      "need no 'workspace'. Run commands with exec (background: true for servers and long "
      "jobs, then process_output); read and change files with file_read, file_write and "
      "file_edit. Idle workspaces stop by themselves and start again on the next call.";
  std::string chosen = state_.default_workspace();
  if (!chosen.empty()) {
    text += fmt::format(" This session's default workspace is '{}'.", chosen);
  }
  return text;
}

json McpSession::ListTools(const Message& request) {
  std::string version = protocol_version();
  json tools = json::array();
  for (const auto& tool : AllTools()) {
    json entry = json::object();
    entry["name"] = tool.name;
    if (AtLeast(version, "2025-06-18")) entry["title"] = tool.title;
    entry["description"] = tool.description;
    entry["inputSchema"] = tool.input_schema;
    if (AtLeast(version, "2025-03-26")) {
      json annotations = tool.annotations;
      annotations["title"] = tool.title;
      entry["annotations"] = std::move(annotations);
    }
    tools.push_back(std::move(entry));
  }
  json result = json::object();
  result["tools"] = std::move(tools);
  return jsonrpc::Result(request.id, std::move(result));
}

json McpSession::CallToolRequest(const Message& request) {
  const json& params = request.params;
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    return jsonrpc::Error(request.id, jsonrpc::kInvalidParams,
                          "Invalid params: tools/call needs params.name (a string)");
  }
  std::string name = params["name"].get<std::string>();
  const Tool* tool = FindTool(name);
  if (!tool) {
    return jsonrpc::Error(request.id, jsonrpc::kInvalidParams,
                          fmt::format("Unknown tool: {} (tools/list names them)", name));
  }
  json args = json::object();
  if (auto it = params.find("arguments"); it != params.end() && !it->is_null()) {
    if (!it->is_object()) {
      return jsonrpc::Error(request.id, jsonrpc::kInvalidParams,
                            "Invalid params: params.arguments must be an object");
    }
    args = *it;
  }
  ToolContext ctx(*backend_, state_);
  ToolResult result = CallTool(*tool, ctx, args);
  return jsonrpc::Result(request.id, result.ToJson(AtLeast(protocol_version(), "2025-06-18")));
}

}  // namespace berth::mcp
