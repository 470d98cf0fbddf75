// initialize and protocol-version negotiation, tools/list and its schemas, and the tool-call
// errors that come before any call to berthd (bad arguments, no workspace). No I/O.
#include <set>

#include <catch2/catch.hpp>

#include "mcp/arguments.h"
#include "mcp/http_backend.h"
#include "mcp/session.h"

using namespace berth;
using namespace berth::mcp;
using nlohmann::json;

namespace {

// A backend over HTTP to a berthd that is not there: the errors before any call, and the one
// a call gets when berthd is down.
std::shared_ptr<Backend> Nowhere() {
  Endpoint nowhere;
  nowhere.kind = Endpoint::Kind::kUnix;
  nowhere.path = "/nonexistent/berthd.sock";
  return std::make_shared<HttpBackend>(nowhere, "key");
}

json Initialize(McpSession& session, const std::string& version) {
  json request = {{"jsonrpc", "2.0"},
                  {"id", 1},
                  {"method", "initialize"},
                  {"params",
                   {{"protocolVersion", version},
                    {"capabilities", json::object()},
                    {"clientInfo", {{"name", "test"}, {"version", "1"}}}}}};
  auto response = session.Handle(request);
  REQUIRE(response);
  REQUIRE(response->contains("result"));
  return (*response)["result"];
}

json Call(McpSession& session, const std::string& tool, json args) {
  json request = {{"jsonrpc", "2.0"},
                  {"id", 5},
                  {"method", "tools/call"},
                  {"params", {{"name", tool}, {"arguments", std::move(args)}}}};
  auto response = session.Handle(request);
  REQUIRE(response);
  REQUIRE(response->contains("result"));
  return (*response)["result"];
}

json ListTools(McpSession& session) {
  auto response = session.Handle(json{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}});
  REQUIRE(response);
  return (*response)["result"]["tools"];
}

std::string Text(const json& result) {
  std::string out;
  for (const auto& block : result["content"]) out += block["text"].get<std::string>();
  return out;
}

}  // namespace

TEST_CASE("initialize echoes every supported revision and offers the latest otherwise", "[mcp]") {
  CHECK(kLatestProtocolVersion == kSupportedProtocolVersions.front());
  for (auto version : kSupportedProtocolVersions) {
    McpSession session(Nowhere(), "");
    json result = Initialize(session, std::string(version));
    CHECK(result["protocolVersion"] == version);
    CHECK(session.protocol_version() == version);
    CHECK(session.initialized());
  }
  for (std::string version : {"2099-01-01", "2023-01-01", "1.0", ""}) {
    McpSession session(Nowhere(), "");
    CHECK(Initialize(session, version)["protocolVersion"] == kLatestProtocolVersion);
  }
  CHECK(NegotiateProtocolVersion("2025-06-18") == "2025-06-18");
  CHECK(NegotiateProtocolVersion("2025-11-25") == "2025-11-25");
  CHECK(NegotiateProtocolVersion("2026-01-01") == std::string(kLatestProtocolVersion));
}

TEST_CASE("initialize describes the server: tools capability, serverInfo, instructions", "[mcp]") {
  McpSession session(Nowhere(), "my-project");
  json result = Initialize(session, "2025-11-25");
  CHECK(result["capabilities"]["tools"]["listChanged"] == false);
  CHECK_FALSE(result["capabilities"].contains("resources"));
  CHECK(result["serverInfo"]["name"] == "berth");
  CHECK(result["serverInfo"]["version"] == BERTH_VERSION);
  CHECK(result["serverInfo"]["title"] == "Berth");
  std::string instructions = result["instructions"];
  CHECK(instructions.find("workspace_create") != std::string::npos);
  CHECK(instructions.find("'my-project'") != std::string::npos);

  McpSession old(Nowhere(), "");
  CHECK_FALSE(Initialize(old, "2024-11-05")["serverInfo"].contains("title"));
}

TEST_CASE("ping answers an empty result, before and after initialize", "[mcp]") {
  McpSession session(Nowhere(), "");
  auto pong = session.Handle(json{{"jsonrpc", "2.0"}, {"id", "p"}, {"method", "ping"}});
  REQUIRE(pong);
  CHECK((*pong)["result"] == json::object());
  CHECK((*pong)["id"] == "p");
}

TEST_CASE("tools/list has every tool, each with a usable schema and description", "[mcp]") {
  McpSession session(Nowhere(), "");
  Initialize(session, "2025-11-25");
  json tools = ListTools(session);
  std::set<std::string> names;
  for (const auto& tool : tools) {
    std::string name = tool["name"];
    INFO(name);
    names.insert(name);
    CHECK(tool["description"].get<std::string>().size() > 40);
    CHECK_FALSE(tool["title"].get<std::string>().empty());
    const json& schema = tool["inputSchema"];
    CHECK(schema["type"] == "object");
    CHECK(schema["additionalProperties"] == false);
    REQUIRE(schema["properties"].is_object());
    for (const auto& [prop, spec] : schema["properties"].items()) {
      INFO(prop);
      CHECK(spec.contains("description"));
      CHECK((spec.contains("type") || spec.contains("anyOf")));
    }
    if (schema.contains("required")) {
      for (const auto& required : schema["required"]) {
        CHECK(schema["properties"].contains(required.get<std::string>()));
      }
    }
    // Workspace-scoped tools take an optional `workspace`; delete and use require it.
    if (name != "workspace_create" && name != "workspace_list" && name != "template_list") {
      CHECK(schema["properties"].contains("workspace"));
    }
    CHECK(tool["annotations"].contains("readOnlyHint"));
    // An empty call validates only when nothing is required.
    bool requires_something = schema.contains("required") && !schema["required"].empty();
    CHECK(ValidateArguments(schema, json::object()).has_value() == !requires_something);
  }
  std::set<std::string> expected = {
      "workspace_create", "workspace_list", "workspace_get", "workspace_start",
      "workspace_stop",   "workspace_hibernate", "workspace_delete", "workspace_use",
      "exec",             "process_list",   "process_output", "process_kill",
      "file_read",        "file_write",     "file_edit",      "file_list",
      "file_delete",      "ports_list",     "preview_url",    "network_policy",
      "desktop_screenshot", "desktop_act",  "desktop_control", "request_human", "workspace_events",
      "desktop_clipboard", "checkpoint_create", "checkpoint_list", "checkpoint_restore",
      "checkpoint_diff",   "template_list"};
  CHECK(names == expected);
  CHECK(tools.size() == expected.size());
}

TEST_CASE("tools/list follows the negotiated revision", "[mcp]") {
  McpSession old(Nowhere(), "");
  Initialize(old, "2024-11-05");
  for (const auto& tool : ListTools(old)) {
    CHECK_FALSE(tool.contains("title"));
    CHECK_FALSE(tool.contains("annotations"));
  }
  McpSession mid(Nowhere(), "");
  Initialize(mid, "2025-03-26");
  for (const auto& tool : ListTools(mid)) {
    CHECK_FALSE(tool.contains("title"));
    CHECK(tool["annotations"].contains("title"));
  }
}

TEST_CASE("tool-call errors are isError results a model can act on", "[mcp]") {
  McpSession session(Nowhere(), "");
  Initialize(session, "2025-11-25");

  json no_ws = Call(session, "exec", {{"cmd", "ls"}});
  CHECK(no_ws["isError"] == true);
  CHECK(Text(no_ws).find("workspace_use") != std::string::npos);

  json bad_type = Call(session, "exec", {{"cmd", 5}, {"workspace", "w"}});
  CHECK(bad_type["isError"] == true);
  CHECK(Text(bad_type).find("'cmd'") != std::string::npos);

  json empty_argv = Call(session, "exec", {{"cmd", json::array()}, {"workspace", "w"}});
  CHECK(empty_argv["isError"] == true);

  json missing = Call(session, "file_write", {{"path", "/tmp/x"}, {"workspace", "w"}});
  CHECK(missing["isError"] == true);
  CHECK(Text(missing).find("missing required argument 'content'") != std::string::npos);

  json unknown = Call(session, "file_read", {{"path", "/etc/hosts"}, {"pathh", "x"}});
  CHECK(unknown["isError"] == true);
  CHECK(Text(unknown).find("unknown argument 'pathh'") != std::string::npos);

  json range = Call(session, "exec", {{"cmd", "ls"}, {"workspace", "w"}, {"timeout", 0}});
  CHECK(range["isError"] == true);
  CHECK(Text(range).find("at least 1") != std::string::npos);

  json dotdot = Call(session, "file_read", {{"path", "/workspace/../etc/passwd"}, {"workspace", "w"}});
  CHECK(dotdot["isError"] == true);
  CHECK(Text(dotdot).find("bad path") != std::string::npos);

  // workspace_delete never falls back to the default workspace.
  McpSession with_default(Nowhere(), "chosen");
  json del = Call(with_default, "workspace_delete", json::object());
  CHECK(del["isError"] == true);
  CHECK(Text(del).find("'workspace'") != std::string::npos);

  // berthd unreachable: still a result, naming the cause.
  json down = Call(session, "workspace_list", json::object());
  CHECK(down["isError"] == true);
  CHECK(Text(down).find("unavailable") != std::string::npos);
}

TEST_CASE("structuredContent appears only from 2025-06-18 on", "[mcp]") {
  ToolResult result = ToolResult::Text("hello", json{{"a", 1}});
  CHECK(result.ToJson(true)["structuredContent"]["a"] == 1);
  CHECK_FALSE(result.ToJson(false).contains("structuredContent"));
  CHECK(result.ToJson(false)["content"][0]["type"] == "text");
  CHECK_FALSE(result.ToJson(false).contains("isError"));
  CHECK(ToolResult::Failure("no").ToJson(true)["isError"] == true);
}
