// Golden tests of the request header berthd sends to an agent (BuildUpstreamRequest) and of
// the answer's fields it relays (RelayedHeaders): a change to what reaches the guest shows up
// here as a diff of header text. The client's side is given as the raw text a client sends.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <sstream>

#include "tests/support/request_text.h"

#include "controller/agent_client/response_relay.h"
#include "controller/agent_client/upstream_request.h"

namespace berth::agent_client {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

constexpr std::string_view kToken = "tok3n";

using testing::Head;
using testing::ParseRequest;

std::string Build(const std::string& client, std::string_view target, const ExtraHeaders& extra,
                  BodyFraming body) {
  auto req = BuildUpstreamRequest(ParseRequest(client), target, kToken, extra, body);
  std::ostringstream out;
  out << req.base();
  return out.str();
}

TEST_CASE("upstream request: a plain GET gets the agent's host and token, nothing else changes",
          "[proxy]") {
  auto client = Head({"GET /v1/workspaces/demo/files/a%20b?stat=1 HTTP/1.1",
                      "Host: localhost:7070", "User-Agent: berth-client/0.1",
                      "Authorization: Bearer bk_client_key", "Accept: application/json"});
  auto expected = Head({"GET /v1/files/a%20b?stat=1 HTTP/1.1", "User-Agent: berth-client/0.1",
                        "Accept: application/json", "Host: berth-agent",
                        "Authorization: Bearer tok3n"});
  CHECK(Build(client, "/v1/files/a%20b?stat=1", {}, BodyFraming::None()) == expected);
}

TEST_CASE("upstream request: an exec POST carries its length and the workspace's Berth-Env",
          "[proxy]") {
  auto client = Head({"POST /v1/workspaces/demo/exec HTTP/1.1", "Host: 127.0.0.1:7070",
                      "Authorization: Bearer bk_client_key", "Content-Type: application/json",
                      "Content-Length: 26", "Expect: 100-continue"});
  ExtraHeaders env = {{"Berth-Env", "eyJBIjoiMSJ9"}};
  auto expected = Head({"POST /v1/exec HTTP/1.1", "Content-Type: application/json",
                        "Host: berth-agent", "Authorization: Bearer tok3n",
                        "Berth-Env: eyJBIjoiMSJ9", "Content-Length: 26"});
  CHECK(Build(client, "/v1/exec", env, BodyFraming::Length(26)) == expected);
}

TEST_CASE("upstream request: an upload of unknown length goes chunked", "[proxy]") {
  auto client = Head({"PUT /v1/workspaces/demo/files/big.bin HTTP/1.1", "Host: x",
                      "Authorization: Bearer k", "Transfer-Encoding: chunked",
                      "Content-Type: application/octet-stream"});
  auto expected = Head({"PUT /v1/files/big.bin HTTP/1.1", "Content-Type: application/octet-stream",
                        "Host: berth-agent", "Authorization: Bearer tok3n",
                        "Transfer-Encoding: chunked"});
  CHECK(Build(client, "/v1/files/big.bin", {}, BodyFraming::Chunked()) == expected);
}

TEST_CASE("upstream request: a WebSocket upgrade keeps its handshake and asks the agent to "
          "upgrade", "[proxy]") {
  auto client = Head({"GET /v1/workspaces/demo/exec/ws?pty=1 HTTP/1.1", "Host: x",
                      "Authorization: Bearer k", "Connection: keep-alive, Upgrade",
                      "Upgrade: websocket", "Sec-WebSocket-Version: 13",
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                      "Sec-WebSocket-Protocol: berth.exec"});
  ExtraHeaders env = {{"Berth-Env", "e30="}};
  auto expected = Head({"GET /v1/exec/ws?pty=1 HTTP/1.1", "Sec-WebSocket-Version: 13",
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                        "Sec-WebSocket-Protocol: berth.exec", "Host: berth-agent",
                        "Authorization: Bearer tok3n", "Connection: Upgrade",
                        "Upgrade: websocket", "Berth-Env: e30="});
  auto parsed = ParseRequest(client);
  CHECK(WantsUpgrade(parsed));
  // An upgrade carries no body, whatever framing is asked for.
  CHECK(Build(client, "/v1/exec/ws?pty=1", env, BodyFraming::Length(5)) == expected);
}

TEST_CASE("upstream request: what a client smuggles in is dropped or replaced", "[proxy]") {
  // Its own Host and Authorization, hop-by-hop fields (and one that Connection names), a
  // Berth-Env meant to set the workspace's env, an Idempotency-Key, berthd's cookie.
  auto client = Head({"POST /v1/workspaces/demo/exec HTTP/1.1", "Host: evil.example",
                      "Authorization: Bearer stolen-agent-token",
                      "Proxy-Authorization: Basic eA==", "Connection: close, X-Hop",
                      "X-Hop: secret", "Keep-Alive: timeout=5", "TE: trailers",
                      "Trailer: X-Late", "Transfer-Encoding: chunked",
                      "Proxy-Connection: keep-alive", "Berth-Env: eyJQQVRIIjoiL2V2aWwifQ==",
                      "Idempotency-Key: k1", "Cookie: berth_session=abc",
                      "Content-Type: application/json", "X-Request-Id: 42"});
  auto expected = Head({"POST /v1/exec HTTP/1.1", "Content-Type: application/json",
                        "X-Request-Id: 42", "Host: berth-agent", "Authorization: Bearer tok3n",
                        "Content-Length: 11"});
  CHECK(Build(client, "/v1/exec", {}, BodyFraming::Length(11)) == expected);

  // Connection: upgrade without an Upgrade field is no upgrade, and the header says so.
  auto half = Head({"GET /v1/workspaces/demo/info HTTP/1.1", "Host: x", "Connection: Upgrade"});
  CHECK_FALSE(WantsUpgrade(ParseRequest(half)));
  CHECK(Build(half, "/v1/info", {}, BodyFraming::None()) ==
        Head({"GET /v1/info HTTP/1.1", "Host: berth-agent", "Authorization: Bearer tok3n"}));
  // An Upgrade field without "upgrade" in Connection is dropped, not honoured.
  auto sneaky = Head({"GET /v1/workspaces/demo/info HTTP/1.1", "Host: x", "Upgrade: websocket"});
  CHECK_FALSE(WantsUpgrade(ParseRequest(sneaky)));
  CHECK(Build(sneaky, "/v1/info", {}, BodyFraming::None()) ==
        Head({"GET /v1/info HTTP/1.1", "Host: berth-agent", "Authorization: Bearer tok3n"}));
}

TEST_CASE("upstream request: the declared length is Content-Length, unless the body is chunked",
          "[proxy]") {
  CHECK(DeclaredLength(ParseRequest(Head({"PUT /f HTTP/1.1", "Content-Length: 1000"}))) == 1000u);
  CHECK(DeclaredLength(ParseRequest(Head({"PUT /f HTTP/1.1", "Content-Length: 0"}))) == 0u);
  auto chunked = ParseRequest(Head({"PUT /f HTTP/1.1", "Transfer-Encoding: chunked"}));
  CHECK_FALSE(DeclaredLength(chunked));
  CHECK_FALSE(DeclaredLength(ParseRequest(Head({"GET /f HTTP/1.1"}))));
}

TEST_CASE("relayed answer: hop-by-hop fields, framing and cookies from the guest stay behind",
          "[proxy]") {
  std::string text = Head({"HTTP/1.1 200 OK", "Content-Type: application/x-ndjson",
                           "Content-Length: 10", "Connection: keep-alive, X-Hop", "X-Hop: 1",
                           "Keep-Alive: timeout=120", "Set-Cookie: berth_session=guest",
                           "Cache-Control: no-store", "X-Berth-Pid: 7"});
  bhttp::response_parser<bhttp::empty_body> parser;
  parser.skip(true);
  boost::beast::error_code ec;
  parser.put(asio::buffer(text), ec);
  REQUIRE(parser.is_header_done());
  auto relayed = RelayedHeaders(parser.get().base());
  std::vector<std::pair<std::string, std::string>> expected = {{"Cache-Control", "no-store"},
                                                               {"X-Berth-Pid", "7"}};
  CHECK(relayed == expected);
}

}  // namespace
}  // namespace berth::agent_client
