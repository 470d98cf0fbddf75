#include "controller/api/sessions.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "common/unix_time.h"

namespace berth::api {
namespace {

// Like API keys: a principal cached this long keeps SQLite off each request's path; a
// revocation (of the session or of its key) clears it at once.
constexpr auto kCacheFor = std::chrono::seconds(10);
// last_used_at (the idle expiry's clock) is written at most this often per session.
constexpr int64_t kTouchEvery = 60;
// "bs_" + 64 hex characters (256 bits).
constexpr size_t kSecretSize = 3 + 64;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<SessionOptions> ParseSessionOptions(const nlohmann::json& config) {
  if (!config.is_object()) return Fail(ErrorCode::kInvalidArgument, "must be an object");
  SessionOptions out;
  for (const auto& [k, v] : config.items()) {
    if (k != "idle_timeout_s" && k != "max_age_s") {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown key '{}'", k));
    }
    if (!v.is_number_integer() || v.get<int64_t>() < 60 || v.get<int64_t>() > 365LL * 24 * 3600) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' must be seconds, 60 to a year", k));
    }
    (k == "idle_timeout_s" ? out.idle_timeout : out.max_age) = std::chrono::seconds(v.get<int64_t>());
  }
  return out;
}

Sessions::Sessions(store::Store& store, Authenticator& auth, SessionOptions options)
    : store_(store),
      auth_(auth),
      options_(std::move(options)),
      clock_(options_.clock_for_test ? options_.clock_for_test : std::function<int64_t()>(UnixNow)) {}

std::string Sessions::CsrfToken(std::string_view secret) {
  // Derived, not stored: whoever holds the cookie's secret can compute it, and only berthd and
  // the cookie jar hold that. Different from the secret, so the page never holds the secret.
  return Sha256Hex(fmt::format("berth-csrf\n{}", secret)).substr(0, 43);
}

bool Sessions::CsrfMatches(std::string_view secret, std::string_view given) {
  std::string want = CsrfToken(secret);
  return given.size() == want.size() && CRYPTO_memcmp(given.data(), want.data(), want.size()) == 0;
}

Result<NewSession> Sessions::Create(std::string_view api_key) {
  if (api_key.empty()) return Fail(ErrorCode::kInvalidArgument, "'api_key' is required");
  auto principal = auth_.Authenticate(fmt::format("Bearer {}", api_key));
  if (!principal) return Fail(principal.error());
  int64_t now = clock_();
  NewSession out;
  out.secret = "bs_" + RandomHex(32);
  auto& s = out.signed_in.session;
  s.id = NewId("ses");
  s.tenant_id = principal->tenant_id;
  s.key_id = principal->key_id;
  s.created_at = now;
  s.expires_at = now + options_.max_age.count();
  s.last_used_at = now;
  if (auto stored = store_.InsertSession(s, Sha256Hex(out.secret), now); !stored) return Fail(stored.error());
  out.signed_in.principal = *principal;
  out.signed_in.csrf_token = CsrfToken(out.secret);
  return out;
}

Result<SignedIn> Sessions::Authenticate(std::string_view secret) {
  if (secret.size() != kSecretSize || !secret.starts_with("bs_")) {
    return Fail(ErrorCode::kUnauthenticated, "the session cookie is not valid: sign in again");
  }
  std::string hash = Sha256Hex(secret);
  auto steady = std::chrono::steady_clock::now();
  int64_t now = clock_();
  uint64_t revocations = auth_.revocations();
  std::optional<SignedIn> found;
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(hash);
        it != cache_.end() && it->second.until > steady && it->second.revocations == revocations) {
      found = it->second.signed_in;
    }
  }
  if (!found) {
    auto session = store_.FindSessionByTokenHash(hash);
    if (!session) {
      if (session.error().code != ErrorCode::kNotFound) return Fail(session.error());
      return Fail(ErrorCode::kUnauthenticated, "this session has ended (signed out or revoked): sign in again");
    }
    auto principal = auth_.PrincipalOfKey(session->key_id);
    if (!principal) return Fail(principal.error());
    found = SignedIn{*session, *principal, CsrfToken(secret)};
  }
  auto& s = found->session;
  if (now >= s.expires_at) {
    return Fail(ErrorCode::kUnauthenticated, "this session has expired: sign in again");
  }
  if (now - s.last_used_at >= options_.idle_timeout.count()) {
    return Fail(ErrorCode::kUnauthenticated,
                fmt::format("this session ended after {} s without use: sign in again",
                            options_.idle_timeout.count()));
  }
  bool touch = now - s.last_used_at >= kTouchEvery;
  if (touch) s.last_used_at = now;
  {
    std::lock_guard lock(mutex_);
    if (cache_.size() > 10000) cache_.clear();
    cache_[hash] = Cached{*found, steady + kCacheFor, revocations};
  }
  if (touch) {
    // The idle clock is coarse on purpose (a write a minute at most); a failed write costs the
    // session at most a minute of its idle time, never the request.
    if (auto st = store_.TouchSession(s.id, now); !st) {
      spdlog::warn("session {}: recording its use: {}", s.id, st.error().message);
    }
  }
  return *found;
}

Result<std::vector<store::Session>> Sessions::List(const Principal& by) {
  std::optional<std::string> key;
  if (!by.Allows(Scope::kAdmin)) key = by.key_id;
  return store_.ListSessions(by.tenant_id, key);
}

Status Sessions::Revoke(const Principal& by, const std::string& session_id) {
  std::optional<std::string> key;
  if (!by.Allows(Scope::kAdmin)) key = by.key_id;
  auto status = store_.RevokeSession(by.tenant_id, session_id, key, clock_());
  if (status) {
    std::lock_guard lock(mutex_);
    cache_.clear();
  }
  return status;
}

std::optional<std::string_view> CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    auto semi = header.find(';');
    std::string_view pair = Trim(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    auto eq = pair.find('=');
    if (eq == std::string_view::npos || Trim(pair.substr(0, eq)) != name) continue;
    std::string_view value = Trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return std::nullopt;
}

std::string SessionCookie(std::string_view secret, int64_t max_age_s, bool secure) {
  return fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{}", kSessionCookie,
                     secret, std::max<int64_t>(max_age_s, 0), secure ? "; Secure" : "");
}

std::string ClearedSessionCookie(bool secure) {
  return fmt::format("{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{}", kSessionCookie,
                     secure ? "; Secure" : "");
}

bool SameOrigin(std::string_view origin, std::string_view host) {
  if (origin.empty() || host.empty()) return false;
  std::string o = Lower(origin);
  std::string h = Lower(host);
  return o == "http://" + h || o == "https://" + h;
}

}  // namespace berth::api
