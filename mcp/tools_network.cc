// network_policy: read a workspace's guest network (egress policy, isolation, recent refusals)
// or set its egress policy, which applies to the running guest at once
// (GET|PATCH /v1/workspaces/{ws}/network).
#include <fmt/format.h>

#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

std::string Describe(const std::string& ws, const json& n) {
  std::string egress = n.value("egress", "?");
  std::string text = fmt::format("Workspace {}: egress {}", ws, egress);
  if (egress == "allowlist") {
    std::string allow;
    for (const auto& a : n.value("allow", json::array())) {
      if (!a.is_string()) continue;
      if (!allow.empty()) allow += ", ";
      allow += a.get<std::string>();
    }
    text += fmt::format(" ({})", allow.empty() ? "nothing" : allow);
  }
  text += n.value("isolated", false) ? ", isolated from the host." : ", NOT isolated (this host runs without network isolation).";
  const auto& c = n.value("counters", json::object());
  text += fmt::format("\nRefused: {} packets, {} DNS names.", c.value("refused_packets", 0), c.value("refused_names", 0));
  int shown = 0;
  for (const auto& r : n.value("refused", json::array())) {
    if (shown++ == 10) break;
    text += fmt::format("\n- {} port {} at {}", r.value("address", "?"), r.value("port", 0), r.value("at", "?"));
  }
  for (const auto& r : n.value("refused_names", json::array())) {
    if (shown++ == 20) break;
    text += fmt::format("\n- name {} at {}", r.value("name", "?"), r.value("at", "?"));
  }
  return text;
}

Result<ToolResult> Policy(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  Result<json> answer = Fail(ErrorCode::kInternal, "no request");
  if (args.contains("egress") || args.contains("allow")) {
    v1::NetworkPolicy policy;
    auto egress = args.find("egress");
    policy.egress = egress != args.end() && egress->is_string() ? egress->get<std::string>() : "allowlist";
    if (auto allow = args.find("allow"); allow != args.end()) {
      if (!allow->is_array()) return Fail(ErrorCode::kInvalidArgument, "'allow' must be a list of strings");
      for (const auto& a : *allow) {
        if (!a.is_string()) return Fail(ErrorCode::kInvalidArgument, "'allow' must be a list of strings");
        policy.allow.push_back(a.get<std::string>());
      }
    }
    answer = ctx.backend().SetNetwork(*ws, policy, ToolContext::CallDeadline());
  } else {
    answer = ctx.backend().GetNetwork(*ws, ToolContext::CallDeadline());
  }
  if (!answer) return Fail(answer.error());
  return ToolResult::Text(Describe(*ws, *answer), *answer);
}

}  // namespace

std::vector<Tool> NetworkTools() {
  std::vector<Tool> tools;
  json args = json::object();
  args["workspace"] = schema::WorkspaceArg();
  json egress = schema::String(
      "Set the egress policy: \"open\" (the internet, never the host or private ranges), \"none\" "
      "(nothing leaves the guest) or \"allowlist\" (only the names and CIDRs in `allow`). Omit both "
      "egress and allow to read the policy.");
  egress["enum"] = json::array({"open", "none", "allowlist"});
  args["egress"] = egress;
  args["allow"] = {{"type", "array"},
                   {"items", {{"type", "string"}}},
                   {"maxItems", 256},
                   {"description",
                    "With allowlist: host names (exact, or \"*.example.com\" for its subdomains) and "
                    "CIDRs (\"203.0.113.0/24\"). Replaces the whole list."}};
  tools.push_back(Tool{"network_policy", "Read or set a workspace's network policy",
                       "Show what a workspace's guest may reach on the network (its egress policy, "
                       "and recent refused connections and DNS names), or set the policy; a change "
                       "applies to the running guest at once and cuts connections it forbids.",
                       schema::Object(args), Mutating(false, true), Policy});
  return tools;
}

}  // namespace berth::mcp
