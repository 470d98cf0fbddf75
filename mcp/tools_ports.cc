// ports_list: what listens in a workspace. (Preview URLs for these ports come with berthd's
// preview proxy; there is no preview_url tool until berthd serves them.)
#include <fmt/format.h>

#include "mcp/text_limits.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

Result<ToolResult> List(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto ports = ctx.backend().ListPorts(*ws, ToolContext::CallDeadline());
  if (!ports) return Fail(ports.error());
  std::string text;
  json list = json::array();
  if (ports->empty()) {
    text = "Nothing listens on a TCP port in this workspace.";
  } else {
    text = fmt::format("{} listening TCP port{}:\n", ports->size(), ports->size() == 1 ? "" : "s");
  }
  for (const auto& p : *ports) {
    std::string owner;
    if (p.pid) {
      std::string cmd = p.cmdline ? *p.cmdline : p.process.value_or("");
      if (cmd.size() > 120) cmd = std::string(Utf8Prefix(cmd, 117)) + "...";
      owner = fmt::format(" — pid {} {}", *p.pid, cmd);
    }
    bool loopback_only = p.address == "127.0.0.1" || p.address == "::1";
    text += fmt::format("- {}:{}{}{}\n", p.address.find(':') != std::string::npos
                                               ? fmt::format("[{}]", p.address)
                                               : p.address,
                        p.port, owner, loopback_only ? " (loopback only)" : "");
    list.push_back(protocol::ToJson(p));
  }
  json structured = json::object();
  structured["ports"] = std::move(list);
  return ToolResult::Text(std::move(text), structured);
}

}  // namespace

std::vector<Tool> PortTools() {
  std::vector<Tool> tools;
  json args = json::object();
  args["workspace"] = schema::WorkspaceArg();
  tools.push_back(Tool{"ports_list", "List listening ports",
                       "List the TCP ports that listen in a workspace, with the address and "
                       "the process behind each: check that a server you started is up.",
                       schema::Object(args), ReadOnly(), List});
  return tools;
}

}  // namespace berth::mcp
