// ports_list: what listens in a workspace, with each port's preview URL; preview_url: a link to
// a port that an agent hands to its user (docs/api.md, "Previews").
#include <algorithm>

#include <fmt/format.h>

#include "common/duration.h"
#include "common/v1/time.h"
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
    std::string preview = p.preview_url ? " — preview: " + *p.preview_url : std::string();
    text += fmt::format("- {}:{}{}{}{}\n", p.address.find(':') != std::string::npos
                                                 ? fmt::format("[{}]", p.address)
                                                 : p.address,
                        p.port, owner, loopback_only ? " (loopback only)" : "", preview);
    list.push_back(protocol::ToJson(p));
  }
  json structured = json::object();
  structured["ports"] = std::move(list);
  bool any_preview = std::any_of(ports->begin(), ports->end(),
                                 [](const auto& p) { return p.preview_url.has_value(); });
  if (any_preview) {
    text += "A preview URL opens only with a token: call preview_url for a link to hand out.\n";
  }
  return ToolResult::Text(std::move(text), structured);
}

// `expires_in`: seconds, or a duration as people write it ("2h", "7d").
Result<std::optional<int64_t>> ExpiresIn(const json& args) {
  auto it = args.find("expires_in");
  if (it == args.end() || it->is_null()) return std::optional<int64_t>();
  int64_t seconds = 0;
  if (it->is_string()) {
    auto parsed = ParseDuration(it->get<std::string>());
    if (!parsed) return Fail(ErrorCode::kInvalidArgument, "expires_in: " + parsed.error().message);
    seconds = parsed->count();
  } else {
    seconds = it->get<int64_t>();  // the schema made it an integer
  }
  if (seconds <= 0) return Fail(ErrorCode::kInvalidArgument, "expires_in must be positive");
  return std::optional<int64_t>(seconds);
}

Result<ToolResult> Preview(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  v1::CreatePreview request;
  request.port = static_cast<uint16_t>(args.at("port").get<int>());  // the schema bounds it
  request.is_public = args.value("public", false);
  auto expires = ExpiresIn(args);
  if (!expires) return Fail(expires.error());
  request.expires_in_s = *expires;
  auto preview = ctx.backend().CreatePreview(*ws, request, ToolContext::CallDeadline());
  if (!preview) return Fail(preview.error());
  std::string until = v1::FormatTime(preview->expires_at);
  std::string text;
  if (preview->is_public) {
    text = fmt::format(
        "{}\n\nPublic preview {} of port {}: anyone with this URL can open what listens on "
        "port {} in the workspace (a browser sees a one-time notice first), until {}.",
        preview->url, preview->id, preview->port, preview->port, until);
  } else {
    text = fmt::format(
        "{}\n\nPrivate preview link {} to port {}: it opens what listens on port {} in the "
        "workspace, for whoever has the link (it carries a token, shown only now; hand it to "
        "your user as is), until {}. The URL without the token is {}.",
        preview->link.value_or(preview->url), preview->id, preview->port, preview->port, until,
        preview->url);
  }
  text += " A server bound to 127.0.0.1 works; a stopped workspace wakes when the link is opened.";
  return ToolResult::Text(std::move(text), v1::ToJson(*preview));
}

json ExpiresSchema() {
  json expires = json::object();
  expires["description"] =
      "How long the link works: seconds, or a duration such as \"30m\", \"2h\", \"7d\" "
      "(default 24h; berthd caps it, 30 days unless configured).";
  json as_int = json::object();
  as_int["type"] = "integer";
  as_int["minimum"] = 1;
  json as_string = json::object();
  as_string["type"] = "string";
  as_string["maxLength"] = 32;
  expires["anyOf"] = json::array({as_int, as_string});
  return expires;
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

  json preview = json::object();
  preview["workspace"] = schema::WorkspaceArg();
  preview["port"] = schema::Integer(
      "The port in the workspace, e.g. 5173 for `npm run dev` (Vite), 3000 (Next).", 1, 65535);
  preview["public"] = schema::Boolean(
      "Anyone with the URL may open it, no token (default false: a private link with a token).");
  preview["expires_in"] = ExpiresSchema();
  tools.push_back(Tool{"preview_url", "Make a preview link",
                       "Make a link to a web server in a workspace (a dev server such as "
                       "`npm run dev`) that a person can open in any browser, hot reload "
                       "included: hand it to your user. Private by default (a link with a "
                       "token, expiring).",
                       schema::Object(preview, {"port"}), Mutating(false, false), Preview});
  return tools;
}

}  // namespace berth::mcp
