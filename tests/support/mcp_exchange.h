// berthd's /mcp from an integration test: one JSON-RPC exchange over the streamable HTTP
// transport, as an MCP client makes it (a JSON body, or the one SSE event a tools/call
// answers with), and a session opened by initialize.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "common/client/api_client.h"
#include "common/json.h"

namespace berth::testing {

// The response object of `body`; `session` is filled from the first answer and sent after.
inline nlohmann::json McpExchange(client::ApiClient& api, const nlohmann::json& body, std::string* session) {
  client::Headers headers = {{"Accept", "application/json, text/event-stream"}};
  if (!session->empty()) headers.emplace_back("Mcp-Session-Id", *session);
  auto response = api.Request(http::bhttp::verb::post, "/mcp", body.dump(), "application/json", headers);
  REQUIRE(response);
  INFO(response->body);
  REQUIRE(response->status == 200);
  if (session->empty()) *session = std::string(response->Header("Mcp-Session-Id"));
  std::string text = response->body;
  if (auto data = text.find("data:"); data != std::string::npos) {
    auto end = text.find('\n', data);
    text = text.substr(data + 5, end == std::string::npos ? std::string::npos : end - data - 5);
  }
  auto parsed = ParseJson(text);
  REQUIRE(parsed);
  return *parsed;
}

// A new session (initialize at revision 2025-11-25); its id.
inline std::string McpSession(client::ApiClient& api) {
  std::string session;
  nlohmann::json init = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
                         {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", nlohmann::json::object()},
                                     {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
  McpExchange(api, init, &session);
  REQUIRE_FALSE(session.empty());
  return session;
}

// tools/call `name` with `arguments`: the CallToolResult.
inline nlohmann::json McpToolCall(client::ApiClient& api, std::string& session, const std::string& name,
                                  const nlohmann::json& arguments) {
  nlohmann::json call = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"},
                         {"params", {{"name", name}, {"arguments", arguments}}}};
  return McpExchange(api, call, &session)["result"];
}

}  // namespace berth::testing
