// The DevTools tunnel's rules (controller/desktop/cdp_gate.h): what a call is, which calls a
// person's control refuses, the refusal Chrome's clients read, and the discovery rewrite.
#include <catch2/catch.hpp>

#include "common/json.h"
#include "controller/desktop/cdp_gate.h"

namespace berth::desktop {
namespace {

TEST_CASE("a DevTools call is parsed with its id, session and input type; anything else is refused") {
  auto call = ParseCdpCall(R"({"id":7,"sessionId":"S1","method":"Input.dispatchMouseEvent","params":{"type":"mousePressed","x":1}})");
  REQUIRE(call);
  CHECK(call->id == 7);
  CHECK(call->session_id == "S1");
  CHECK(call->method == "Input.dispatchMouseEvent");
  CHECK(CdpInputOf(*call).clicks == 1);
  CHECK(CdpInputOf(*call).keys == 0);
  auto key = ParseCdpCall(R"({"id":8,"method":"Input.dispatchKeyEvent","params":{"type":"keyUp"}})");
  REQUIRE(key);
  CHECK(CdpInputOf(*key).keys == 0);  // a key released is not a key pressed
  CHECK_FALSE(ParseCdpCall("[1,2]"));
  CHECK_FALSE(ParseCdpCall(R"({"id":1})"));
  CHECK_FALSE(ParseCdpCall(R"({"id":1,"method":5})"));
  CHECK_FALSE(ParseCdpCall("not json"));
  std::string deep(10000, '[');
  CHECK_FALSE(ParseCdpCall(R"({"method":"x","params":)" + deep));
}

TEST_CASE("input and page-changing calls are refused during a takeover; reads and scripts pass") {
  for (const char* m : {"Input.dispatchMouseEvent", "Input.insertText", "Input.dispatchKeyEvent", "Input.someFutureMethod",
                        "Page.navigate", "Page.reload", "Target.createTarget", "Target.closeTarget", "DOM.setOuterHTML",
                        "DOM.setFileInputFiles", "Page.handleJavaScriptDialog", "Browser.close"}) {
    INFO(m);
    CHECK(CdpMethodChangesPage(m));
  }
  for (const char* m : {"Runtime.evaluate", "Runtime.callFunctionOn", "Page.captureScreenshot", "DOM.getDocument",
                        "Target.setAutoAttach", "Page.getFrameTree", "Accessibility.getFullAXTree", "Inputs.x"}) {
    INFO(m);
    CHECK_FALSE(CdpMethodChangesPage(m));
  }
}

TEST_CASE("a refused call is answered as Chrome answers an error, in its session") {
  auto call = ParseCdpCall(R"({"id":42,"sessionId":"AB","method":"Input.insertText","params":{"text":"x"}})").value();
  auto answer = ParseJson(CdpRefusal(call, "a person holds the desktop")).value();
  CHECK(answer["id"] == 42);
  CHECK(answer["sessionId"] == "AB");
  CHECK(answer["error"]["code"] == -32000);
  CHECK(answer["error"]["message"] == "a person holds the desktop");
  auto bare = ParseJson(CdpRefusal(ParseCdpCall(R"({"id":1,"method":"Page.reload"})").value(), "no")).value();
  CHECK_FALSE(bare.contains("sessionId"));
}

TEST_CASE("discovery JSON points every WebSocket at berthd and drops the guest's front-end URLs") {
  const std::string base = "ws://berth.test:8420/v1/workspaces/w1/desktop/cdp";
  auto version = RewriteCdpDiscovery(
      R"({"Browser":"Chrome/120","webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/browser/abc-1"})", base);
  REQUIRE(version);
  const auto& v = *version;
  CHECK(v["webSocketDebuggerUrl"] == base + "/devtools/browser/abc-1");
  CHECK(v["Browser"] == "Chrome/120");
  auto list = RewriteCdpDiscovery(
      R"([{"id":"P1","devtoolsFrontendUrl":"/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/P1",
           "webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/page/P1","url":"https://example.com/"}])", base);
  REQUIRE(list);
  const auto& l = *list;
  CHECK(l[0]["webSocketDebuggerUrl"] == base + "/devtools/page/P1");
  CHECK_FALSE(l[0].contains("devtoolsFrontendUrl"));
  // A guest that names another place is not believed.
  CHECK_FALSE(RewriteCdpDiscovery(R"({"webSocketDebuggerUrl":"ws://evil.example/other"})", base));
  CHECK_FALSE(RewriteCdpDiscovery(R"({"webSocketDebuggerUrl":"http://127.0.0.1:9222/devtools/page/1"})", base));
  CHECK_FALSE(RewriteCdpDiscovery(R"([1])", base));
  CHECK_FALSE(RewriteCdpDiscovery("<html>", base));
}

}  // namespace
}  // namespace berth::desktop
