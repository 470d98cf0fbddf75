#include "controller/api/sessions.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "common/unix_time.h"
#include "controller/preview/preview_host.h"

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

// Preview passes: "bps_" session "." workspace "." port "." 64 hex (sessions.h).
constexpr std::string_view kPassPrefix = "bps_";
constexpr size_t kMaxPass = 160;

// HMAC-SHA256 keyed by the session's stored hash: only berthd (and whoever holds the cookie's
// secret) can make one, and one session's pass says nothing about another's.
std::string PassMac(std::string_view token_hash, std::string_view session_id, std::string_view workspace_id,
                    int port) {
  std::string message = fmt::format("berth-preview-pass\n{}\n{}\n{}", session_id, workspace_id, port);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), token_hash.data(), static_cast<int>(token_hash.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &size);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 0xf];
  }
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
  if (auto live = StillLive(found->session, now); !live) return Fail(live.error());
  {
    std::lock_guard lock(mutex_);
    if (cache_.size() > 10000) cache_.clear();
    cache_[hash] = Cached{*found, steady + kCacheFor, revocations};
  }
  return *found;
}

Status Sessions::StillLive(store::Session& s, int64_t now) {
  {
    // The latest use through either cache (the cookie's, a pass's): each holds its own copy.
    std::lock_guard lock(mutex_);
    if (auto it = last_use_.find(s.id); it != last_use_.end()) s.last_used_at = std::max(s.last_used_at, it->second);
  }
  if (now >= s.expires_at) {
    return Fail(ErrorCode::kUnauthenticated, "this session has expired: sign in again");
  }
  if (now - s.last_used_at >= options_.idle_timeout.count()) {
    return Fail(ErrorCode::kUnauthenticated,
                fmt::format("this session ended after {} s without use: sign in again",
                            options_.idle_timeout.count()));
  }
  if (now - s.last_used_at >= kTouchEvery) {
    s.last_used_at = now;
    {
      std::lock_guard lock(mutex_);
      if (last_use_.size() > 10000) last_use_.clear();
      last_use_[s.id] = now;
    }
    // The idle clock is coarse on purpose (a write a minute at most); a failed write costs the
    // session at most a minute of its idle time, never the request.
    if (auto st = store_.TouchSession(s.id, now); !st) {
      spdlog::warn("session {}: recording its use: {}", s.id, st.error().message);
    }
  }
  return {};
}

std::string Sessions::PreviewPass(std::string_view secret, const std::string& session_id,
                                  const std::string& workspace_id, int port) {
  return fmt::format("{}{}.{}.{}.{}", kPassPrefix, session_id, workspace_id, port,
                     PassMac(Sha256Hex(secret), session_id, workspace_id, port));
}

Result<PassHolder> Sessions::CheckPreviewPass(std::string_view pass) {
  auto invalid = [] {
    return Error(ErrorCode::kUnauthenticated,
                 "this preview pass is not valid: open the preview again from the web UI");
  };
  if (pass.size() > kMaxPass || !pass.starts_with(kPassPrefix)) return Fail(invalid());
  // session.workspace.port.mac, each part of [A-Za-z0-9_]
  std::vector<std::string> parts;
  std::string_view rest = pass.substr(kPassPrefix.size());
  for (;;) {
    auto dot = rest.find('.');
    parts.emplace_back(rest.substr(0, dot));
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  if (parts.size() != 4) return Fail(invalid());
  for (const auto& part : parts) {
    if (part.empty()) return Fail(invalid());
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return Fail(invalid());
    }
  }
  auto parsed_port = preview::ParseStrictPort(parts[2]);
  if (!parsed_port) return Fail(invalid());
  int port = *parsed_port;

  int64_t now = clock_();
  auto steady = std::chrono::steady_clock::now();
  uint64_t revocations = auth_.revocations();
  std::string key(pass);
  std::optional<CachedPass> found;
  {
    std::lock_guard lock(mutex_);
    if (auto it = passes_.find(key);
        it != passes_.end() && it->second.until > steady && it->second.revocations == revocations) {
      found = it->second;
    }
  }
  if (!found) {
    auto row = store_.FindSessionWithHash(parts[0]);
    if (!row) {
      if (row.error().code != ErrorCode::kNotFound) return Fail(row.error());
      return Fail(ErrorCode::kUnauthenticated,
                  "the web UI session that opened this preview has ended: sign in and open it again");
    }
    std::string want = PassMac(row->second, parts[0], parts[1], port);
    if (parts[3].size() != want.size() || CRYPTO_memcmp(parts[3].data(), want.data(), want.size()) != 0) {
      return Fail(invalid());
    }
    found = CachedPass{row->first, PassHolder{row->first.tenant_id, parts[1], port, row->first.id,
                                              row->first.key_id, row->first.expires_at},
                       {}, revocations};
  }
  if (auto live = StillLive(found->session, now); !live) {
    return Fail(ErrorCode::kUnauthenticated,
                fmt::format("the web UI session that opened this preview has ended ({}): sign in and "
                            "open it again", live.error().message));
  }
  found->until = steady + kCacheFor;
  {
    std::lock_guard lock(mutex_);
    if (passes_.size() > 10000) passes_.clear();
    passes_[key] = *found;
  }
  return found->holder;
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
    passes_.clear();
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
