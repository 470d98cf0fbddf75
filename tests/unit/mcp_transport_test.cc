// The pieces of the transports that need no network: argument validation, the stdio line
// reader, the HTTP session table, berthd URLs.
#include <sstream>

#include <catch2/catch.hpp>

#include "mcp/arguments.h"
#include "mcp/base_url.h"
#include "mcp/fake_backend.h"
#include "mcp/session_table.h"
#include "mcp/stdio_lines.h"

using namespace berth;
using namespace berth::mcp;
using nlohmann::json;

TEST_CASE("ValidateArguments checks types, ranges, enums, required and unknown arguments", "[mcp]") {
  json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 5},
      "n": {"type": "integer", "minimum": 1, "maximum": 10},
      "mode": {"type": "string", "enum": ["a", "b"]},
      "flag": {"type": "boolean"},
      "env": {"type": "object", "additionalProperties": {"type": "string"}},
      "cmd": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]}
    },
    "required": ["name"],
    "additionalProperties": false
  })");
  auto ok = [&](const char* text) { return ValidateArguments(schema, json::parse(text)).has_value(); };
  auto why = [&](const char* text) {
    auto status = ValidateArguments(schema, json::parse(text));
    REQUIRE_FALSE(status);
    CHECK(status.error().code == ErrorCode::kInvalidArgument);
    return status.error().message;
  };
  CHECK(ok(R"({"name":"x"})"));
  CHECK(ok(R"({"name":"x","n":3,"mode":"b","flag":true,"env":{"A":"1"},"cmd":["ls","-l"]})"));
  CHECK(ok(R"({"name":"x","n":3.0,"cmd":"ls"})"));
  CHECK(why(R"({})") == "missing required argument 'name'");
  CHECK(why(R"({"name":""})") == "argument 'name' must not be empty");
  CHECK(why(R"({"name":"toolong"})").find("over the limit of 5") != std::string::npos);
  CHECK(why(R"({"name":"x","n":0})") == "argument 'n' must be at least 1 (got 0)");
  CHECK(why(R"({"name":"x","n":11})") == "argument 'n' must be at most 10 (got 11)");
  CHECK(why(R"({"name":"x","n":2.5})") == "argument 'n' must be an integer (got a number)");
  CHECK(why(R"({"name":"x","mode":"c"})").find("one of \"a\", \"b\"") != std::string::npos);
  CHECK(why(R"({"name":"x","flag":"yes"})") == "argument 'flag' must be a boolean (got a string)");
  CHECK(why(R"({"name":"x","env":{"A":1}})") == "argument 'env'.A must be a string (got an integer)");
  CHECK(why(R"({"name":"x","cmd":5})") ==
        "argument 'cmd' must be a string or an array of strings (got an integer)");
  CHECK(why(R"({"name":"x","cmd":[]})").find("'cmd'") != std::string::npos);
  CHECK(why(R"({"name":"x","extra":1})").find("unknown argument 'extra'") != std::string::npos);
  CHECK_FALSE(ValidateArguments(schema, json::array()));
}

TEST_CASE("LineReader splits lines, strips CR, skips lines over the limit", "[mcp]") {
  std::stringbuf in("first\r\n\nsecond\n" + std::string(50, 'x') + "\nlast");
  LineReader reader(in, 20);
  std::string line;
  REQUIRE(reader.Next(line) == LineReader::Outcome::kLine);
  CHECK(line == "first");
  REQUIRE(reader.Next(line) == LineReader::Outcome::kLine);
  CHECK(line.empty());
  REQUIRE(reader.Next(line) == LineReader::Outcome::kLine);
  CHECK(line == "second");
  REQUIRE(reader.Next(line) == LineReader::Outcome::kTooLong);
  REQUIRE(reader.Next(line) == LineReader::Outcome::kLine);
  CHECK(line == "last");
  CHECK(reader.Next(line) == LineReader::Outcome::kEof);
}

namespace {

std::shared_ptr<McpSession> NewSession() {
  return std::make_shared<McpSession>(std::make_shared<FakeBackend>(), "");
}

}  // namespace

TEST_CASE("SessionTable binds sessions to their key, bounds them and expires idle ones", "[mcp]") {
  auto now = SessionTable::Clock::time_point{};
  SessionTable table(3, 2, std::chrono::seconds(100), [&] { return now; });
  std::string a1 = table.Add(NewSession(), "key-a");
  CHECK(a1.size() == 32);
  CHECK(table.Find(a1, "key-a"));
  CHECK_FALSE(table.Find(a1, "key-b"));  // another key: as good as missing
  CHECK_FALSE(table.Remove(a1, "key-b"));

  now += std::chrono::seconds(1);
  std::string a2 = table.Add(NewSession(), "key-a");
  now += std::chrono::seconds(1);
  table.Find(a1, "key-a");  // a1 is now the most recently used of key-a
  now += std::chrono::seconds(1);
  std::string a3 = table.Add(NewSession(), "key-a");  // over 2 per key: a2 goes
  CHECK_FALSE(table.Find(a2, "key-a"));
  CHECK(table.Find(a1, "key-a"));
  CHECK(table.Find(a3, "key-a"));
  now += std::chrono::seconds(1);
  CHECK(table.Find(a3, "key-a"));  // a3 used after a1

  now += std::chrono::seconds(1);
  std::string b1 = table.Add(NewSession(), "key-b");
  now += std::chrono::seconds(1);
  std::string b2 = table.Add(NewSession(), "key-b");  // over 3 in all: the oldest (a1) goes
  CHECK(table.size() == 3);
  CHECK_FALSE(table.Find(a1, "key-a"));
  CHECK(table.Find(b1, "key-b"));

  now += std::chrono::seconds(101);  // everything idle past the TTL
  CHECK_FALSE(table.Find(b2, "key-b"));
  std::string c = table.Add(NewSession(), "key-c");
  CHECK(table.size() == 1);
  CHECK(table.Remove(c, "key-c"));
  CHECK(table.size() == 0);
}

TEST_CASE("ParseBaseUrl takes http URLs and endpoint forms", "[mcp]") {
  auto plain = ParseBaseUrl("http://127.0.0.1:8420");
  REQUIRE(plain);
  CHECK(plain->kind == Endpoint::Kind::kTcp);
  CHECK(plain->host == "127.0.0.1");
  CHECK(plain->port == 8420);
  auto slash = ParseBaseUrl("http://localhost:9/");
  REQUIRE(slash);
  CHECK(slash->host == "localhost");
  auto v6 = ParseBaseUrl("http://[::1]:8080");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  auto default_port = ParseBaseUrl("http://10.0.0.1");
  REQUIRE(default_port);
  CHECK(default_port->port == 80);
  auto unix_ep = ParseBaseUrl("unix:/run/berthd.sock");
  REQUIRE(unix_ep);
  CHECK(unix_ep->kind == Endpoint::Kind::kUnix);
  CHECK(ParseBaseUrl("tcp:127.0.0.1:1"));

  CHECK_FALSE(ParseBaseUrl("https://berth.example.com"));
  CHECK_FALSE(ParseBaseUrl("http://127.0.0.1:8420/v1"));
  CHECK_FALSE(ParseBaseUrl("http://127.0.0.1:0"));
  CHECK_FALSE(ParseBaseUrl("http://127.0.0.1:99999"));
  CHECK_FALSE(ParseBaseUrl("ftp://x"));
  CHECK_FALSE(ParseBaseUrl(""));
}
