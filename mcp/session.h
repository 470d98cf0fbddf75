// The transport-independent MCP server: one McpSession per client connection (stdio) or per
// Mcp-Session-Id (HTTP). JSON-RPC in, JSON-RPC out: initialize (with protocol-version
// negotiation), notifications/initialized, ping, tools/list, tools/call. Tool calls block the
// calling thread on the session's Backend; transports run them off their I/O threads.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mcp/json_rpc.h"
#include "mcp/tool.h"

namespace berth::mcp {

// The revision @modelcontextprotocol/sdk 1.32 calls LATEST_PROTOCOL_VERSION, and the older
// ones it supports, newest first.
inline constexpr std::string_view kLatestProtocolVersion = "2025-11-25";
inline constexpr std::array<std::string_view, 5> kSupportedProtocolVersions = {
    "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"};

bool IsSupportedProtocolVersion(std::string_view version);
// The client's version when this server speaks it; otherwise the latest (the client then
// decides whether it can go on, as the specification says).
std::string NegotiateProtocolVersion(std::string_view requested);

class McpSession {
 public:
  // Tools act through `backend`, as its caller.
  McpSession(std::shared_ptr<Backend> backend, std::string default_workspace);
  McpSession(const McpSession&) = delete;
  McpSession& operator=(const McpSession&) = delete;

  // Handles one payload: a message or a batch (an array) of them. Returns what to send back
  // (a response object, or an array for a batch), nullopt when there is nothing to send
  // (notifications, responses). Never throws. Any thread, concurrently.
  std::optional<nlohmann::json> Handle(const nlohmann::json& payload);
  // The same from text: JSON that does not parse gets a -32700 parse error.
  std::optional<nlohmann::json> HandleText(std::string_view text);

  // The revision agreed at initialize (the latest before it).
  std::string protocol_version() const;
  // Whether initialize has been answered.
  bool initialized() const;
  SessionState& state() { return state_; }
  Backend& backend() { return *backend_; }

 private:
  std::optional<nlohmann::json> HandleOne(const nlohmann::json& value);
  nlohmann::json Dispatch(const jsonrpc::Message& request);
  nlohmann::json Initialize(const jsonrpc::Message& request);
  nlohmann::json ListTools(const jsonrpc::Message& request);
  nlohmann::json CallToolRequest(const jsonrpc::Message& request);
  std::string Instructions() const;

  const std::shared_ptr<Backend> backend_;
  SessionState state_;
  mutable std::mutex mutex_;
  std::string protocol_version_{kLatestProtocolVersion};
  bool initialized_ = false;
};

}  // namespace berth::mcp
