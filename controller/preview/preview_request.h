// What an app in a workspace sees of a preview request, and what the browser sees of the
// app's answer: pure functions, tested against golden headers (tests/unit/preview_request_test.cc).
//
// To the app (BuildPreviewRequest):
//  - the client's method and target (origin-form only, Berth's token parameter removed), and
//    its end-to-end fields;
//  - dropped: hop-by-hop fields (Connection and what it names, Keep-Alive, Proxy-*, TE,
//    Trailer, Transfer-Encoding, Upgrade; an upgrade's Connection and Upgrade are set again),
//    Expect (berthd answers 100-continue itself), Content-Length (the framing is berthd's),
//    every X-Berth-* field (the preview token's header among them), Berth's cookies (other
//    cookies of the app stay, in their order), an Authorization that carries a Berth API key
//    (an app's own Basic or Bearer credentials pass), and inbound Forwarded, X-Forwarded-*
//    and X-Real-IP (a client cannot claim to be someone else);
//  - Host: `localhost:{port}`, the same for every request of a preview, plain requests and
//    WebSocket upgrades alike. Dev servers accept it unconfigured (Vite's allowedHosts,
//    webpack-dev-server's allowedHosts, Next's dev origins all allow localhost), on the default
//    preview domain and on any other, which passing the preview host on would not give;
//  - Origin: when it is the preview's own origin (the app's page calling itself, every
//    WebSocket a browser opens), `http://localhost:{port}`, so the app sees a same-origin
//    request with the Host it was given; any other Origin passes untouched;
//  - X-Forwarded-Host (the preview host the browser used), X-Forwarded-Proto, X-Forwarded-For
//    (the client's address as berthd saw it).
// To the browser (RewriteSetCookie): the app's Set-Cookie fields, except that a Domain
// attribute is dropped (each preview is its own host: a cookie for the whole preview domain
// would reach other workspaces' previews, other tenants' included) and a cookie named like
// Berth's is dropped whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/types.h"
#include "controller/agent_client/upstream_request.h"

namespace berth::preview {

// The query parameter and cookie that carry a preview token, and its header.
inline constexpr std::string_view kTokenParam = "berth_preview_token";
inline constexpr std::string_view kTokenHeader = "X-Berth-Preview-Token";
// Skips a public preview's interstitial (API clients).
inline constexpr std::string_view kSkipInterstitialHeader = "X-Berth-Skip-Interstitial";

// The names of Berth's cookies on a preview host: over https the __Host- forms (host-only,
// Secure, Path=/ by the browser's own rules).
std::string TokenCookieName(bool https);
std::string AckCookieName(bool https);
// Any of Berth's cookie names, in either form (what is stripped both ways).
bool IsBerthCookie(std::string_view name);

// The values of every cookie named `name` in the request's Cookie fields, in order.
std::vector<std::string> CookieValues(const http::bhttp::request_header<>& client, std::string_view name);

// `target` without the token parameter, and the token when it was there (the first one; a
// target with several is refused by the caller through `count`).
struct TokenInTarget {
  std::string target;
  std::optional<std::string> token;
  int count = 0;
};
TokenInTarget TakeTokenFromTarget(std::string_view target);

// Where the request came in, for the X-Forwarded-* fields and the Origin rewrite.
struct Forwarded {
  std::string host;      // the Host header as the client sent it (a validated preview host)
  std::string proto;     // "http" | "https"
  std::string client;    // the peer's address; empty: none
};

// The request the app gets (see the file comment). `target` is origin-form, already without
// the token parameter.
http::bhttp::request<http::bhttp::empty_body> BuildPreviewRequest(
    const http::bhttp::request_header<>& client, std::string_view target, uint16_t port,
    const Forwarded& forwarded, agent_client::BodyFraming body);

// One of the app's Set-Cookie values as the browser gets it, or nullopt to drop it.
std::optional<std::string> RewriteSetCookie(std::string_view value);

// The value of a Set-Cookie field that gives the browser `name`=`value` for this host only:
// HttpOnly, SameSite=Lax (a link from elsewhere still opens the preview), Path=/, Secure over
// https, expiring with the grant (`max_age_s`).
std::string BerthCookie(std::string_view name, std::string_view value, int64_t max_age_s, bool https);

}  // namespace berth::preview
