#include "controller/desktop/cdp_gate.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "common/json.h"

namespace berth::desktop {

namespace {

// Methods outside the Input domain that give input or change the page a person looks at.
constexpr std::array<std::string_view, 31> kPageChanging = {
    "Browser.close",
    "Browser.crash",
    "Browser.crashGpuProcess",
    "Browser.setWindowBounds",
    "DOM.copyTo",
    "DOM.focus",
    "DOM.moveTo",
    "DOM.redo",
    "DOM.removeAttribute",
    "DOM.removeNode",
    "DOM.setAttributeValue",
    "DOM.setAttributesAsText",
    "DOM.setFileInputFiles",
    "DOM.setNodeName",
    "DOM.setNodeValue",
    "DOM.setOuterHTML",
    "DOM.undo",
    "Page.bringToFront",
    "Page.close",
    "Page.crash",
    "Page.handleJavaScriptDialog",
    "Page.navigate",
    "Page.navigateToHistoryEntry",
    "Page.reload",
    "Page.resetNavigationHistory",
    "Page.setDocumentContent",
    "Page.stopLoading",
    "Target.activateTarget",
    "Target.closeTarget",
    "Target.createTarget",
    "Target.disposeBrowserContext",
};

}  // namespace

Result<CdpCall> ParseCdpCall(std::string_view text) {
  auto parsed = ParseJson(text);
  if (!parsed) return Fail(parsed.error());
  if (!parsed->is_object()) return Fail(ErrorCode::kInvalidArgument, "a DevTools message must be a JSON object");
  auto method = parsed->find("method");
  if (method == parsed->end() || !method->is_string()) {
    return Fail(ErrorCode::kInvalidArgument, "a DevTools message needs a string 'method'");
  }
  CdpCall call;
  call.method = method->get<std::string>();
  if (auto id = parsed->find("id"); id != parsed->end()) call.id = *id;
  if (auto session = parsed->find("sessionId"); session != parsed->end() && session->is_string()) {
    call.session_id = session->get<std::string>();
  }
  if (auto params = parsed->find("params"); params != parsed->end() && params->is_object()) {
    if (auto type = params->find("type"); type != params->end() && type->is_string()) {
      call.event_type = type->get<std::string>();
    }
  }
  return call;
}

CdpInput CdpInputOf(const CdpCall& call) {
  CdpInput in;
  if (call.method == "Input.dispatchMouseEvent" && call.event_type == "mousePressed") in.clicks = 1;
  if (call.method == "Input.dispatchKeyEvent" && (call.event_type == "keyDown" || call.event_type == "rawKeyDown")) {
    in.keys = 1;
  }
  if (call.method == "Input.insertText") in.keys = 1;
  return in;
}

bool CdpMethodChangesPage(std::string_view method) {
  if (method.starts_with("Input.")) return true;
  return std::find(kPageChanging.begin(), kPageChanging.end(), method) != kPageChanging.end();
}

std::string CdpRefusal(const CdpCall& call, std::string_view why) {
  nlohmann::json answer = nlohmann::json::object();
  answer["id"] = call.id;
  if (!call.session_id.empty()) answer["sessionId"] = call.session_id;
  // -32000: the server error code Chrome itself uses for a call it cannot carry out.
  answer["error"] = {{"code", -32000}, {"message", std::string(why)}};
  return DumpJson(answer);
}

namespace {

Status RewriteTarget(nlohmann::json& target, std::string_view ws_base) {
  if (!target.is_object()) return Fail(ErrorCode::kInvalidArgument, "a DevTools target must be a JSON object");
  target.erase("devtoolsFrontendUrl");
  target.erase("devtoolsFrontendUrlCompat");
  auto url = target.find("webSocketDebuggerUrl");
  if (url == target.end()) return Status{};
  if (!url->is_string()) return Fail(ErrorCode::kInvalidArgument, "webSocketDebuggerUrl must be a string");
  std::string_view u = url->get_ref<const std::string&>();
  constexpr std::string_view kScheme = "ws://";
  if (!u.starts_with(kScheme)) return Fail(ErrorCode::kInvalidArgument, "webSocketDebuggerUrl is not ws://");
  size_t path = u.find('/', kScheme.size());
  if (path == std::string_view::npos || !u.substr(path).starts_with("/devtools/")) {
    return Fail(ErrorCode::kInvalidArgument, "webSocketDebuggerUrl is not Chrome's /devtools/ path");
  }
  *url = fmt::format("{}{}", ws_base, u.substr(path));
  return Status{};
}

}  // namespace

Result<nlohmann::json> RewriteCdpDiscovery(std::string_view body, std::string_view ws_base) {
  auto parsed = ParseJson(body);
  if (!parsed) return Fail(parsed.error());
  if (parsed->is_array()) {
    for (auto& target : *parsed) {
      if (auto ok = RewriteTarget(target, ws_base); !ok) return Fail(ok.error());
    }
  } else if (auto ok = RewriteTarget(*parsed, ws_base); !ok) {
    return Fail(ok.error());
  }
  return std::move(*parsed);
}

}  // namespace berth::desktop
