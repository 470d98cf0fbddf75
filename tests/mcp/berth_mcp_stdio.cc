// berth-mcp-stdio: a test-only stdio MCP server calling the same RunStdio as `berth mcp`; built
// only when the CLI is not part of the build.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "mcp/mcp_server.h"

int main(int argc, char** argv) {
  berth::mcp::McpConfig config;
  CLI::App app{"Berth MCP server over stdio (test-only; `berth mcp` is the real one)"};
  app.add_option("--url", config.url, "berthd's URL, e.g. http://127.0.0.1:8080")->required();
  app.add_option("--api-key", config.api_key, "API key")->envname("BERTH_API_KEY");
  app.add_option("--workspace", config.default_workspace, "default workspace (id or name)");
  CLI11_PARSE(app, argc, argv);
  std::ios::sync_with_stdio(false);
  return berth::mcp::RunStdio(config, std::cin, std::cout);
}
