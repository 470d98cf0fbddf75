// JSON-RPC 2.0 handling of the MCP session: classification, the standard errors, batches,
// notifications. No I/O: the session's backend (a fake) is never called by these messages.
#include <catch2/catch.hpp>

#include "mcp/fake_backend.h"
#include "mcp/json_rpc.h"
#include "mcp/session.h"

using namespace berth;
using namespace berth::mcp;
using nlohmann::json;

namespace {

McpSession MakeSession() { return McpSession(std::make_shared<FakeBackend>(), ""); }

int RpcErrorCode(const std::optional<json>& response) {
  REQUIRE(response);
  REQUIRE(response->contains("error"));
  return (*response)["error"]["code"].get<int>();
}

}  // namespace

TEST_CASE("Classify tells requests, notifications and responses apart", "[mcp][jsonrpc]") {
  auto request = jsonrpc::Classify(json::parse(R"({"jsonrpc":"2.0","id":7,"method":"ping"})"));
  REQUIRE(std::holds_alternative<jsonrpc::Message>(request));
  CHECK(std::get<jsonrpc::Message>(request).kind == jsonrpc::Message::Kind::kRequest);
  CHECK(std::get<jsonrpc::Message>(request).id == 7);

  auto note = jsonrpc::Classify(json::parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  REQUIRE(std::holds_alternative<jsonrpc::Message>(note));
  CHECK(std::get<jsonrpc::Message>(note).kind == jsonrpc::Message::Kind::kNotification);

  auto response = jsonrpc::Classify(json::parse(R"({"jsonrpc":"2.0","id":"a","result":{}})"));
  REQUIRE(std::holds_alternative<jsonrpc::Message>(response));
  CHECK(std::get<jsonrpc::Message>(response).kind == jsonrpc::Message::Kind::kResponse);
}

TEST_CASE("Classify refuses malformed messages with -32600, keeping a usable id", "[mcp][jsonrpc]") {
  struct Case {
    const char* text;
    json id;
  };
  for (const auto& c : std::vector<Case>{
           {R"([1])", nullptr},  // (as an element) not an object
           {R"("x")", nullptr},
           {R"({"id":1,"method":"ping"})", 1},                       // no jsonrpc
           {R"({"jsonrpc":"1.0","id":1,"method":"ping"})", 1},       // wrong version
           {R"({"jsonrpc":"2.0","id":1,"method":5})", 1},            // method not a string
           {R"({"jsonrpc":"2.0","id":"q","method":""})", "q"},       // empty method
           {R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})", nullptr},  // id an object
           {R"({"jsonrpc":"2.0","id":null,"method":"ping"})", nullptr},     // null id (MCP)
           {R"({"jsonrpc":"2.0","id":2,"method":"ping","params":[1]})", 2},  // params an array
           {R"({"jsonrpc":"2.0","id":3})", 3},                        // neither method nor result
           {R"({"jsonrpc":"2.0","id":3,"result":1,"error":{}})", 3},  // both result and error
       }) {
    INFO(c.text);
    json value = json::parse(c.text);
    if (value.is_array()) value = value[0];
    auto classified = jsonrpc::Classify(value);
    REQUIRE(std::holds_alternative<json>(classified));
    const json& error = std::get<json>(classified);
    CHECK(error["jsonrpc"] == "2.0");
    CHECK(error["error"]["code"] == jsonrpc::kInvalidRequest);
    CHECK(error["id"] == c.id);
  }
}

TEST_CASE("the session answers bad JSON with -32700 and unknown methods with -32601", "[mcp][jsonrpc]") {
  auto session = MakeSession();
  auto parse = session.HandleText("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
  CHECK(RpcErrorCode(parse) == jsonrpc::kParseError);
  CHECK((*parse)["id"].is_null());

  auto unknown = session.HandleText(R"({"jsonrpc":"2.0","id":"u1","method":"resources/list"})");
  CHECK(RpcErrorCode(unknown) == jsonrpc::kMethodNotFound);
  CHECK((*unknown)["id"] == "u1");

  auto invalid = session.HandleText(R"({"jsonrpc":"2.0","id":4,"method":["tools/list"]})");
  CHECK(RpcErrorCode(invalid) == jsonrpc::kInvalidRequest);
  CHECK((*invalid)["id"] == 4);

  CHECK(RpcErrorCode(session.HandleText("[]")) == jsonrpc::kInvalidRequest);
  CHECK(RpcErrorCode(session.HandleText("42")) == jsonrpc::kInvalidRequest);
}

TEST_CASE("invalid params are -32602", "[mcp][jsonrpc]") {
  auto session = MakeSession();
  // initialize without protocolVersion
  CHECK(RpcErrorCode(session.HandleText(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})")) ==
        jsonrpc::kInvalidParams);
  CHECK(RpcErrorCode(session.HandleText(
            R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":20250618}})")) ==
        jsonrpc::kInvalidParams);
  // tools/call without a name, with an unknown tool, with arguments that are not an object
  CHECK(RpcErrorCode(session.HandleText(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}})")) ==
        jsonrpc::kInvalidParams);
  auto unknown = session.HandleText(
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool"}})");
  CHECK(RpcErrorCode(unknown) == jsonrpc::kInvalidParams);
  CHECK((*unknown)["error"]["message"].get<std::string>().find("no_such_tool") != std::string::npos);
  CHECK(RpcErrorCode(session.HandleText(
            R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"exec","arguments":"ls"}})")) ==
        jsonrpc::kInvalidParams);
}

TEST_CASE("notifications and responses get no answer", "[mcp][jsonrpc]") {
  auto session = MakeSession();
  CHECK_FALSE(session.HandleText(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  CHECK_FALSE(session.HandleText(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})"));
  CHECK_FALSE(session.HandleText(R"({"jsonrpc":"2.0","method":"no/such/notification"})"));
  CHECK_FALSE(session.HandleText(R"({"jsonrpc":"2.0","id":9,"result":{}})"));
}

TEST_CASE("a batch answers each request, in order, and nothing for notifications", "[mcp][jsonrpc]") {
  auto session = MakeSession();
  auto answer = session.HandleText(R"([
    {"jsonrpc":"2.0","id":1,"method":"ping"},
    {"jsonrpc":"2.0","method":"notifications/initialized"},
    {"jsonrpc":"2.0","id":2,"method":"nope"},
    {"bad":true}
  ])");
  REQUIRE(answer);
  REQUIRE(answer->is_array());
  REQUIRE(answer->size() == 3);
  CHECK((*answer)[0]["id"] == 1);
  CHECK((*answer)[0]["result"] == json::object());
  CHECK((*answer)[1]["error"]["code"] == jsonrpc::kMethodNotFound);
  CHECK((*answer)[2]["error"]["code"] == jsonrpc::kInvalidRequest);

  CHECK_FALSE(session.HandleText(R"([{"jsonrpc":"2.0","method":"notifications/initialized"}])"));
}

TEST_CASE("Dump writes one line and survives invalid UTF-8", "[mcp][jsonrpc]") {
  json message = jsonrpc::Result(1, json{{"text", std::string("a\nb\xff")}});
  std::string line = jsonrpc::Dump(message);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(json::parse(line)["result"]["text"].get<std::string>().starts_with("a\nb"));
}
