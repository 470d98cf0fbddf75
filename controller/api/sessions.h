// Web UI sessions (DESIGN.md, "Web UI"): a person signs in once with an API key, which the page
// sends to POST /v1/sessions and then forgets; berthd answers with a session cookie that the
// page's JavaScript cannot read (HttpOnly, SameSite=Strict). The cookie holds a random secret,
// stored like API keys, only as a hash; the session acts as its key (same tenant, same scope)
// and ends when it expires (absolute, and after an idle spell), when it is signed out or
// revoked, or when its key is revoked.
//
// Cross-site requests: a cookie, unlike a key, goes along by itself, so a request signed in by
// cookie must also prove that it comes from berthd's own page:
//   - every method but GET and HEAD carries X-CSRF-Token, a token derived from the session's
//     secret (the page reads it from POST /v1/sessions or GET /v1/sessions/current, which no
//     other origin can read);
//   - a WebSocket (a GET) carries an Origin naming berthd's own host. Preview hosts are other
//     origins of the same site (*.preview.localhost), so SameSite alone would let their pages
//     open a signed-in WebSocket; the Origin check does not.
//
// Previews opened from the web UI: the cookie is host-only, so it never reaches a preview host
// ({port}-{workspace}.{domain}, another origin), and must not (the app's page would be one
// fetch away from berthd's API). Instead the page asks berthd for a pass (PreviewPass): one
// port of one workspace, for this session only, signed with the session's stored hash. The
// preview gateway takes it like a preview token (query, then its own host-only cookie) and asks
// CheckPreviewPass each time, so a pass stops opening anything when its session ends: sign-out,
// revocation, its key's revocation, expiry. Nothing is stored per pass.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "controller/api/auth.h"
#include "controller/store/store.h"

namespace berth::api {

struct SessionOptions {
  // A session unused this long ends.
  std::chrono::seconds idle_timeout{12 * 3600};
  // And every session ends this long after sign-in, used or not.
  std::chrono::seconds max_age{7 * 24 * 3600};
  // Tests: unix seconds from here instead of the system clock.
  std::function<int64_t()> clock_for_test;
};

// "sessions": {"idle_timeout_s": 43200, "max_age_s": 604800} in berthd's config.
Result<SessionOptions> ParseSessionOptions(const nlohmann::json& config);

inline constexpr std::string_view kSessionCookie = "berth_session";
inline constexpr std::string_view kCsrfHeader = "X-CSRF-Token";

struct SignedIn {
  store::Session session;
  Principal principal;
  std::string csrf_token;
};

struct NewSession {
  SignedIn signed_in;
  std::string secret;  // the cookie's value: shown once, in Set-Cookie, never stored
};

// What a live preview pass opens, and for whom.
struct PassHolder {
  std::string tenant_id;
  std::string workspace_id;
  int port = 0;
  std::string session_id;
  std::string key_id;
  int64_t expires_at = 0;  // the session's absolute end
};

class Sessions {
 public:
  Sessions(store::Store& store, Authenticator& auth, SessionOptions options);

  // Signs in with an API key (the key itself, "bk_…"). Blocking.
  Result<NewSession> Create(std::string_view api_key);
  // The session a cookie's secret names: unauthenticated, saying why, when there is none or it
  // ended. Blocking.
  Result<SignedIn> Authenticate(std::string_view secret);
  // `by`'s tenant's sessions (an admin's: every key's; others': their key's). Blocking.
  Result<std::vector<store::Session>> List(const Principal& by);
  // Ends a session: an admin any of its tenant's, others their own key's; another tenant's is
  // a not_found. Blocking.
  Status Revoke(const Principal& by, const std::string& session_id);

  // A pass to port `port` of workspace `workspace_id` for the session whose cookie holds
  // `secret` (its id `session_id`). Pure.
  static std::string PreviewPass(std::string_view secret, const std::string& session_id,
                                 const std::string& workspace_id, int port);
  // What a pass opens while its session lives; unauthenticated, saying why, otherwise (a
  // malformed or forged pass, or an ended session). A use counts as the session's use (its
  // idle clock). Blocking on a cache miss.
  Result<PassHolder> CheckPreviewPass(std::string_view pass);

  const SessionOptions& options() const { return options_; }
  // The CSRF token of the session whose cookie holds `secret`.
  static std::string CsrfToken(std::string_view secret);
  // Whether `given` is `secret`'s CSRF token (constant time).
  static bool CsrfMatches(std::string_view secret, std::string_view given);

 private:
  struct Cached {
    SignedIn signed_in;
    std::chrono::steady_clock::time_point until;
    uint64_t revocations = 0;
  };
  struct CachedPass {
    store::Session session;
    PassHolder holder;
    std::chrono::steady_clock::time_point until;
    uint64_t revocations = 0;
  };
  // Whether `s` has not expired nor idled out at `now`; records its use (at most once a
  // minute: the idle clock is coarse on purpose).
  Status StillLive(store::Session& s, int64_t now);

  store::Store& store_;
  Authenticator& auth_;
  SessionOptions options_;
  std::function<int64_t()> clock_;
  std::mutex mutex_;
  std::map<std::string, Cached> cache_;  // by the secret's hash
  std::map<std::string, CachedPass> passes_;  // by the pass
  std::map<std::string, int64_t> last_use_;   // session id -> its last recorded use
};

// The value of cookie `name` in a Cookie header (RFC 6265 §5.4: "a=1; b=2"), if present.
std::optional<std::string_view> CookieValue(std::string_view cookie_header, std::string_view name);
// Set-Cookie values: the session's (Max-Age until it expires), and one that removes it.
// `secure` adds Secure (the request came over TLS).
std::string SessionCookie(std::string_view secret, int64_t max_age_s, bool secure);
std::string ClearedSessionCookie(bool secure);
// Whether an Origin header names the host the request was sent to (its Host header): the
// page that sent it is berthd's own. Scheme-less compare of host and port, case-insensitive.
bool SameOrigin(std::string_view origin, std::string_view host);

}  // namespace berth::api
