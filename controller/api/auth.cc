#include "controller/api/auth.h"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include "common/random.h"
#include "common/unix_time.h"

namespace berth::api {
namespace {

// Cached principals live this long: long enough to keep SQLite off the per-request path,
// short enough that a tenant renamed elsewhere shows up soon. Revocation clears the cache.
constexpr auto kCacheFor = std::chrono::seconds(10);
// last_used_at is written at most this often per key (each write is an fsync).
constexpr int64_t kTouchEvery = 60;

}  // namespace

Result<Scope> ParseScope(std::string_view name) {
  auto scope = v1::ScopeFromName(name);
  if (!scope) return Fail(ErrorCode::kInvalidArgument, "scope must be read, write, admin or operator");
  return *scope;
}

Result<NewKey> Authenticator::CreateKey(const std::string& tenant_id, Scope scope,
                                        const std::string& name) {
  NewKey key;
  key.secret = "bk_" + RandomHex(32);
  key.record.id = NewId("key");
  key.record.tenant_id = tenant_id;
  key.record.prefix = key.secret.substr(0, 11);
  key.record.scope = std::string(ScopeName(scope));
  key.record.name = name;
  key.record.created_at = UnixNow();
  if (auto s = store_.InsertKey(key.record, Sha256Hex(key.secret)); !s) return Fail(s.error());
  return key;
}

Result<Principal> Authenticator::Authenticate(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty()) {
    return Fail(ErrorCode::kUnauthenticated, "an API key is required (Authorization: Bearer <key>)");
  }
  if (!authorization.starts_with(kBearer) || authorization.size() > 512) {
    return Fail(ErrorCode::kUnauthenticated, "the Authorization header must be 'Bearer <key>'");
  }
  // Hashing first means lookups (and the cache) never hold or compare the key itself.
  std::string hash = Sha256Hex(authorization.substr(kBearer.size()));
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(hash); it != cache_.end() && it->second.until > now) {
      return it->second.principal;
    }
  }
  auto key = store_.FindKeyByHash(hash);
  if (!key) {
    if (key.error().code == ErrorCode::kNotFound ||
        key.error().code == ErrorCode::kUnauthenticated) {
      return Fail(ErrorCode::kUnauthenticated, "the API key is not valid (unknown or revoked)");
    }
    return Fail(key.error());
  }
  auto tenant = store_.GetTenant(key->tenant_id);
  if (!tenant) return Fail(tenant.error());
  auto scope = ParseScope(key->scope);
  if (!scope) return Fail(ErrorCode::kInternal, "stored key has an unknown scope");
  Principal p{tenant->id, tenant->name, key->id, key->prefix, *scope};
  int64_t unix_now = UnixNow();
  bool touch = false;
  {
    std::lock_guard lock(mutex_);
    if (cache_.size() > 10000) cache_.clear();
    cache_[hash] = Cached{p, now + kCacheFor};
    auto& last = touched_[key->id];
    if (unix_now - last >= kTouchEvery) {
      last = unix_now;
      touch = true;
    }
  }
  if (touch) {
    // last_used_at is informational: a failed write must not refuse a valid key.
    if (auto s = store_.TouchKey(key->id, unix_now); !s) {
      spdlog::warn("key {}: recording its use: {}", key->id, s.error().message);
    }
  }
  return p;
}

Status Authenticator::Revoke(const std::string& key_id, const Principal& by) {
  auto key = store_.GetKey(key_id);
  if (!key) return Fail(key.error());
  if (!by.ManagesKeysOf(key->tenant_id)) {
    return Fail(ErrorCode::kNotFound, fmt::format("no active key '{}'", key_id));
  }
  // An admin cannot revoke the operator's key (or any key above its own scope).
  auto scope = ParseScope(key->scope);
  if (!scope || !by.Allows(*scope)) {
    return Fail(ErrorCode::kPermissionDenied,
                fmt::format("revoking a key of {} scope needs a key of that scope", key->scope));
  }
  auto status = store_.RevokeKey(key_id, UnixNow());
  std::lock_guard lock(mutex_);
  cache_.clear();
  revocations_.fetch_add(1);
  return status;
}

Result<Principal> Authenticator::PrincipalOfKey(const std::string& key_id) {
  auto key = store_.GetKey(key_id);
  if (!key || key->revoked_at) {
    if (!key && key.error().code != ErrorCode::kNotFound) return Fail(key.error());
    return Fail(ErrorCode::kUnauthenticated, "the API key of this session was revoked");
  }
  auto tenant = store_.GetTenant(key->tenant_id);
  if (!tenant) return Fail(tenant.error());
  auto scope = ParseScope(key->scope);
  if (!scope) return Fail(ErrorCode::kInternal, "stored key has an unknown scope");
  return Principal{tenant->id, tenant->name, key->id, key->prefix, *scope};
}

}  // namespace berth::api
