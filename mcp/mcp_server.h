// Berth's MCP server (Model Context Protocol): the tools an agent uses to drive Berth
// workspaces, served over stdio (`berth mcp`) or streamable HTTP (berthd's /mcp, mcp_http.h).
// The tools call Berth through a Backend (backend.h); here, over berthd's HTTP API
// (docs/api.md) with the typed client (HttpBackend).
#pragma once

#include <iosfwd>
#include <string>

namespace berth::mcp {

struct McpConfig {
  // berthd's base URL: "http://127.0.0.1:8080" (also "tcp:HOST:PORT" or "unix:/path").
  std::string url;
  // Sent as "Authorization: Bearer <api_key>" on every call to berthd.
  std::string api_key;
  // The workspace (id or name) tools use when they are given none; empty: none until the
  // agent calls workspace_use or workspace_create.
  std::string default_workspace;
};

// Serves MCP over stdio (newline-delimited JSON-RPC 2.0) until EOF; returns the exit code
// (0 after EOF, 1 when `config` is unusable, with the reason on stderr). Nothing but protocol
// messages is written to `out`: spdlog's default logger is pointed at stderr. Blocking; tool
// calls run on a few worker threads, so a long exec does not hold up pings or other calls.
int RunStdio(const McpConfig& config, std::istream& in, std::ostream& out);

}  // namespace berth::mcp
