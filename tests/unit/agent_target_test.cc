// The agent's target for berthd's workspace routes: built from the decoded path the router
// matched and the {ws} parameter, re-encoded; never cut from the raw target.
#include <catch2/catch.hpp>

#include "controller/agent_client/agent_target.h"

namespace berth::agent_client {
namespace {

TEST_CASE("agent target: the workspace prefix becomes /v1, the query passes untouched",
          "[proxy]") {
  CHECK(AgentTarget("/v1/workspaces/demo/exec", "demo", "").value() == "/v1/exec");
  CHECK(AgentTarget("/v1/workspaces/ws_0123/exec/ws", "ws_0123", "pty=1&cols=80").value() ==
        "/v1/exec/ws?pty=1&cols=80");
  CHECK(AgentTarget("/v1/workspaces/demo/tunnel", "demo", "port=22&host=%3A%3A1").value() ==
        "/v1/tunnel?port=22&host=%3A%3A1");
  CHECK(AgentTarget("/v1/workspaces/demo/files/", "demo", "list=1").value() ==
        "/v1/files/?list=1");
}

TEST_CASE("agent target: a file path is re-encoded segment by segment", "[proxy]") {
  // Decoded by berthd: spaces, UTF-8, '?', '#', '%' and '\' in names reach the agent encoded,
  // so it decodes the same path.
  CHECK(AgentTarget("/v1/workspaces/demo/files/a b/ü?#%\\x", "demo", "stat=1").value() ==
        "/v1/files/a%20b/%C3%BC%3F%23%25%5Cx?stat=1");
}

TEST_CASE("agent target: the read-key escalation reaches the agent as the file read it was "
          "routed as", "[proxy]") {
  // "GET /v1/workspaces/demo%2Ffiles/exec/ws" is refused by the router (an encoded '/' in
  // {ws}); had it matched "files/{*rest}" with ws=demo, the agent is asked for the file
  // /exec/ws, never for /v1/exec/ws (what cutting the raw target gave).
  CHECK(AgentTarget("/v1/workspaces/demo/files/exec/ws", "demo", "").value() ==
        "/v1/files/exec/ws");
}

TEST_CASE("agent target: a path that is not under the workspace is an internal error",
          "[proxy]") {
  CHECK(AgentTarget("/v1/workspaces/demo/exec", "other", "").error().code == ErrorCode::kInternal);
  CHECK(AgentTarget("/v1/workspaces/demo", "demo", "").error().code == ErrorCode::kInternal);
  CHECK(AgentTarget("/v1/workspaces/demox/exec", "demo", "").error().code == ErrorCode::kInternal);
  CHECK(AgentTarget("/v1/workspaces/a/b/exec", "a/b", "").error().code == ErrorCode::kInternal);
  CHECK(AgentTarget("/v2/workspaces/demo/exec", "demo", "").error().code == ErrorCode::kInternal);
}

}  // namespace
}  // namespace berth::agent_client
