// Golden tests of what an app in a workspace sees of a preview request (BuildPreviewRequest)
// and what a browser sees of the app's cookies (RewriteSetCookie): a change to what reaches
// the guest shows up here as a diff of header text.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <sstream>

#include "tests/support/request_text.h"

#include "controller/agent_client/response_relay.h"
#include "controller/preview/preview_grants.h"
#include "controller/preview/preview_request.h"

namespace berth::preview {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using agent_client::BodyFraming;

using testing::Head;
using testing::ParseRequest;

Forwarded Fwd() { return Forwarded{"5173-web.preview.localhost:8420", "http", "127.0.0.1"}; }

std::string Build(const std::string& client, std::string_view target, BodyFraming body = BodyFraming::None()) {
  auto req = BuildPreviewRequest(ParseRequest(client), target, 5173, Fwd(), body);
  std::ostringstream out;
  out << req.base();
  return out.str();
}

}  // namespace

TEST_CASE("preview request: no Berth credential reaches the app, the app's own do", "[preview]") {
  auto client = Head({"GET /api?x=1 HTTP/1.1", "Host: 5173-web.preview.localhost:8420",
                      "Authorization: Bearer bk_0123456789abcdef", "X-Berth-Preview-Token: bpt_abc",
                      "X-Berth-Skip-Interstitial: 1",
                      "Cookie: berth_preview_token=bpt_abc; app=1; __Host-berth_preview_ack=1",
                      "Cookie: berth_session=s; theme=dark", "Accept: text/html"});
  auto expected = Head({"GET /api?x=1 HTTP/1.1", "Host: localhost:5173", "Accept: text/html",
                        "Cookie: app=1; theme=dark", "X-Forwarded-Host: 5173-web.preview.localhost:8420",
                        "X-Forwarded-Proto: http", "X-Forwarded-For: 127.0.0.1"});
  CHECK(Build(client, "/api?x=1") == expected);
  // An app's own Basic (or non-Berth Bearer) credentials pass.
  auto basic = Head({"GET / HTTP/1.1", "Host: 5173-web.preview.localhost:8420", "Authorization: Basic dTpw"});
  CHECK(Build(basic, "/").find("Authorization: Basic dTpw\r\n") != std::string::npos);
}

TEST_CASE("preview request: a client's forwarding headers are replaced by berthd's", "[preview]") {
  auto client = Head({"POST /form HTTP/1.1", "Host: 5173-web.preview.localhost:8420",
                      "X-Forwarded-For: 6.6.6.6", "X-Forwarded-Host: evil.example", "Forwarded: for=6.6.6.6",
                      "X-Real-IP: 6.6.6.6", "X-Forwarded-Proto: https", "Content-Length: 3",
                      "Expect: 100-continue", "Connection: keep-alive, X-Hop", "X-Hop: 1", "TE: trailers"});
  auto expected = Head({"POST /form HTTP/1.1", "Host: localhost:5173",
                        "X-Forwarded-Host: 5173-web.preview.localhost:8420", "X-Forwarded-Proto: http",
                        "X-Forwarded-For: 127.0.0.1", "Content-Length: 3"});
  CHECK(Build(client, "/form", BodyFraming::Length(3)) == expected);
}

TEST_CASE("preview request: the preview's own Origin becomes the app's, any other passes", "[preview]") {
  auto own = Head({"GET /?token=t HTTP/1.1", "Host: 5173-web.preview.localhost:8420",
                   "Origin: http://5173-web.preview.localhost:8420", "Connection: Upgrade", "Upgrade: websocket",
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
                   "Sec-WebSocket-Protocol: vite-hmr"});
  auto expected = Head({"GET /?token=t HTTP/1.1", "Host: localhost:5173",
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
                        "Sec-WebSocket-Protocol: vite-hmr", "Origin: http://localhost:5173",
                        "X-Forwarded-Host: 5173-web.preview.localhost:8420", "X-Forwarded-Proto: http",
                        "X-Forwarded-For: 127.0.0.1", "Connection: Upgrade", "Upgrade: websocket"});
  CHECK(Build(own, "/?token=t") == expected);
  auto other = Head({"GET / HTTP/1.1", "Host: 5173-web.preview.localhost:8420", "Origin: http://evil.example"});
  CHECK(Build(other, "/").find("Origin: http://evil.example\r\n") != std::string::npos);
}

TEST_CASE("preview request: the token parameter leaves the target, the rest stays in order", "[preview]") {
  auto t = TakeTokenFromTarget("/a/b?x=1&berth_preview_token=bpt_1&y=2");
  CHECK(t.target == "/a/b?x=1&y=2");
  CHECK(t.token == "bpt_1");
  CHECK(t.count == 1);
  auto only = TakeTokenFromTarget("/?berth_preview_token=bpt_1");
  CHECK(only.target == "/");
  auto two = TakeTokenFromTarget("/?berth_preview_token=a&berth_preview_token=b");
  CHECK(two.count == 2);
  auto none = TakeTokenFromTarget("/?berth_preview_tokenx=1");
  CHECK(none.target == "/?berth_preview_tokenx=1");
  CHECK_FALSE(none.token);
}

TEST_CASE("preview answer: the app's cookies stay on its host and cannot be Berth's", "[preview]") {
  CHECK(RewriteSetCookie("sid=1; Domain=preview.localhost; Path=/; HttpOnly") == "sid=1; Path=/; HttpOnly");
  CHECK(RewriteSetCookie("sid=1; domain=.preview.localhost") == "sid=1");
  CHECK(RewriteSetCookie("a=b") == "a=b");
  CHECK_FALSE(RewriteSetCookie("berth_preview_token=bpt_x; Path=/"));
  CHECK_FALSE(RewriteSetCookie("__Host-berth_preview_ack=1; Secure; Path=/"));
  // The relay keeps repeated Set-Cookie fields, each rewritten, and the app's Content-Type.
  bhttp::response_header<> head;
  head.result(bhttp::status::ok);
  head.insert(bhttp::field::set_cookie, "a=1; Domain=preview.localhost");
  head.insert(bhttp::field::set_cookie, "b=2");
  head.insert(bhttp::field::set_cookie, "berth_preview_token=evil");
  head.insert(bhttp::field::content_type, "text/css");
  head.insert(bhttp::field::access_control_allow_origin, "*");
  auto relayed = agent_client::RelayedHeaders(head, agent_client::RelayPolicy::App(&RewriteSetCookie));
  std::vector<std::pair<std::string, std::string>> expected = {
      {"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}, {"Access-Control-Allow-Origin", "*"}};
  CHECK(relayed == expected);
  // The agent's answers never set cookies on berthd's origin.
  auto agent = agent_client::RelayedHeaders(head);
  CHECK(agent.size() == 1);
}

TEST_CASE("preview cookie: host-only, HttpOnly, SameSite=Lax, Secure over https", "[preview]") {
  CHECK(BerthCookie("berth_preview_token", "bpt_1", 60, false) ==
        "berth_preview_token=bpt_1; Path=/; Max-Age=60; HttpOnly; SameSite=Lax");
  CHECK(BerthCookie(TokenCookieName(true), "bpt_1", 60, true) ==
        "__Host-berth_preview_token=bpt_1; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure");
  CHECK(LooksLikePreviewToken("bpt_" + std::string(64, 'a')));
  CHECK_FALSE(LooksLikePreviewToken("bpt_" + std::string(63, 'a')));
  CHECK_FALSE(LooksLikePreviewToken("bk_" + std::string(64, 'a')));
}

}  // namespace berth::preview
