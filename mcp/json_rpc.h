// JSON-RPC 2.0 as MCP uses it: classifying an incoming message (request, notification or
// response), the standard error codes, and building responses. Pure: no I/O, no state.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::mcp::jsonrpc {

inline constexpr int kParseError = -32700;      // the payload is not JSON
inline constexpr int kInvalidRequest = -32600;  // JSON, but not a valid JSON-RPC message
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
// Server-defined (the range -32000..-32099), as the MCP SDKs use them over HTTP.
inline constexpr int kServerError = -32000;
inline constexpr int kSessionNotFound = -32001;

struct Message {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kNotification;
  nlohmann::json id;      // requests and responses: a string or an integer
  std::string method;     // requests and notifications
  nlohmann::json params;  // an object, or null when absent
};

// Validates one message. On failure returns the error response to send back: -32600 with the
// request's id when it could be read (null otherwise). MCP's rules on top of JSON-RPC's: ids
// are strings or integers (never null), params are an object when present.
std::variant<Message, nlohmann::json> Classify(const nlohmann::json& value);

nlohmann::json Result(const nlohmann::json& id, nlohmann::json result);
nlohmann::json Error(const nlohmann::json& id, int code, std::string_view message,
                     const std::optional<nlohmann::json>& data = std::nullopt);

// The answer to a payload that ParseJson refused (not JSON, or nested too deep): -32700.
nlohmann::json ParseErrorResponse(const berth::Error& error);

// Serialises a message for the wire: compact, on one line (JSON escapes every newline inside
// strings), invalid UTF-8 replaced rather than thrown on.
std::string Dump(const nlohmann::json& message);

}  // namespace berth::mcp::jsonrpc
