// The rules of the desktop's DevTools tunnel (`GET …/desktop/cdp`, DESIGN.md "Desktop"):
// which Chrome DevTools Protocol calls a client may make while a person holds control, the
// error it gets instead, and the discovery JSON (`/json/version`, `/json/list`) with its
// WebSocket URLs pointed at berthd. Pure: no I/O, no clock.
//
// While the agent holds control every call passes. While a person holds it, calls that give
// input or change what the person sees are refused (Input.*, navigation, tabs opened, closed
// or brought forward, DOM edits, dialogs answered, file inputs set); reads pass (titles,
// screenshots, the DOM, the accessibility tree). Script evaluation (Runtime.evaluate,
// callFunctionOn) passes: Playwright reads a page's title through it, and berthd cannot tell a
// script that reads from one that writes. During a private takeover nothing passes at all:
// the tunnel's connections are closed (cdp_bridge.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::desktop {

// A client's message (text) to Chrome, at most: Playwright's setInputFiles sends files inline.
inline constexpr size_t kMaxCdpClientMessage = 64 * 1024 * 1024;
// A message from Chrome to the client, at most (full-page screenshots, response bodies):
// a guest's Chrome is the guest's, and holds berthd's memory to this per connection.
inline constexpr size_t kMaxCdpServerMessage = 64 * 1024 * 1024;
// The discovery JSON read from Chrome, at most.
inline constexpr size_t kMaxCdpDiscovery = 1024 * 1024;

struct CdpCall {
  nlohmann::json id;         // as sent (a number for every client we know; kept as is)
  std::string session_id;    // flattened sessions (Target.attachToTarget flatten=true)
  std::string method;
  std::string event_type;    // params.type, for Input.dispatch*Event
};

// The input a call gives, for the timeline's bursts: a mouse button pressed, a key pressed
// (text inserted counts as one key).
struct CdpInput {
  int clicks = 0;
  int keys = 0;
};
CdpInput CdpInputOf(const CdpCall& call);

// The call in a client's message: invalid_argument when it is not a JSON object with a string
// `method` (bounded nesting: common/json.h).
Result<CdpCall> ParseCdpCall(std::string_view text);

// Whether `method` gives input or changes the page a person is looking at.
bool CdpMethodChangesPage(std::string_view method);

// The answer Chrome would give to a refused call: {"id", "sessionId"?, "error": {code, message}}.
std::string CdpRefusal(const CdpCall& call, std::string_view why);

// Chrome's discovery answer (`/json/version`: an object; `/json/list`: an array of them) with
// every `webSocketDebuggerUrl` rewritten to `ws_base` + its path after the host (e.g.
// "ws://berth.example/v1/workspaces/w/desktop/cdp" + "/devtools/page/ID") and the DevTools
// front-end URLs (which point into the guest) removed. invalid_argument when it is not such
// JSON, or a URL is not Chrome's `ws://host/devtools/...`.
Result<nlohmann::json> RewriteCdpDiscovery(std::string_view body, std::string_view ws_base);

}  // namespace berth::desktop
