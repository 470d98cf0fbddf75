// `berth mcp`: an MCP server on stdio (newline-delimited JSON-RPC) for agents that speak MCP,
// with this CLI's URL and key. The server itself is the berth_mcp library (mcp/).
#include <iostream>

#include "cli/command.h"
#include "cli/exit_codes.h"

#if BERTH_HAVE_MCP
#include "mcp/mcp_server.h"
#endif

namespace berth::cli {
namespace {

Result<int> RunMcp(Context& ctx, const std::string& workspace) {
  auto config = ctx.Config();
  if (!config) return Fail(config.error());
  if (config->url.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "no berthd URL: pass --url, set BERTH_URL, or run `berth login --url URL`");
  }
#if BERTH_HAVE_MCP
  mcp::McpConfig mcp_config;
  mcp_config.url = config->url;
  mcp_config.api_key = config->api_key;
  mcp_config.default_workspace = workspace;
  // stdout carries the protocol: nothing else may be written to it.
  return mcp::RunStdio(mcp_config, std::cin, std::cout);
#else
  (void)workspace;
  return Fail(ErrorCode::kFailedPrecondition,
              "this berth was built without the MCP server (the mcp/ library)");
#endif
}

}  // namespace

void AddMcpCommand(Builder& b) {
  auto workspace = std::make_shared<std::string>();
  auto* mcp = b.Add("mcp", "serve MCP over stdio (for agents), with this CLI's URL and key",
                    [workspace](Context& ctx) { return RunMcp(ctx, *workspace); });
  mcp->add_option("--workspace", *workspace, "the workspace tools use when none is named");
}

}  // namespace berth::cli
