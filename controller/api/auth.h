// API keys (DESIGN.md, "Tenancy and secrets"): random, shown once, stored only as a SHA-256
// hash, scoped, revocable, never logged. Authentication maps a bearer key to a principal; a
// short cache keeps SQLite off the hot path of every proxied request, and revoking a key
// clears it, so a revoked key stops working at once.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "common/error.h"
#include "common/v1/admin.h"
#include "controller/store/store.h"

namespace berth::api {

// The wire's scopes (common/v1/admin.h), ordered: each allows all that the ones before it do.
//   read      GETs on the tenant's workspaces
//   write     everything on the tenant's workspaces
//   admin     also the tenant's own API keys (never another tenant's)
//   operator  also tenants, and every tenant's keys: the host's operator (berthd's first key)
using Scope = v1::Scope;
using v1::ScopeName;
// v1::ScopeFromName with the error a request gets.
Result<Scope> ParseScope(std::string_view name);

struct Principal {
  std::string tenant_id;
  std::string tenant_name;
  std::string key_id;
  std::string key_prefix;
  Scope scope = Scope::kRead;
  bool Allows(Scope needed) const { return static_cast<int>(scope) >= static_cast<int>(needed); }
  // Whether this key may manage keys of `tenant_id` (mint, list, revoke): an operator any
  // tenant's, an admin its own tenant's.
  bool ManagesKeysOf(std::string_view tenant_id) const {
    return Allows(Scope::kOperator) || (Allows(Scope::kAdmin) && tenant_id == this->tenant_id);
  }
};

struct NewKey {
  store::ApiKey record;
  std::string secret;  // "bk_" + 64 hex characters (256 bits); returned once, never stored
};

class Authenticator {
 public:
  explicit Authenticator(store::Store& store) : store_(store) {}
  // Makes a key for `tenant_id`. Blocking.
  Result<NewKey> CreateKey(const std::string& tenant_id, Scope scope, const std::string& name);
  // The principal for an Authorization header value ("Bearer bk_…"). Blocking.
  Result<Principal> Authenticate(std::string_view authorization);
  // Revokes a key as `by`: not_found unless `by` manages keys of the key's tenant (another
  // tenant's key is as good as missing), permission_denied for a key of a higher scope than
  // `by`'s. The key fails authentication from then on. Blocking.
  Status Revoke(const std::string& key_id, const Principal& by);
  // The principal of the key `key_id` (a web UI session's key): unauthenticated when the key
  // is unknown or revoked. Blocking.
  Result<Principal> PrincipalOfKey(const std::string& key_id);
  // Counts revocations: a cache of principals built on keys (Sessions) that saw another count
  // is stale, so a revoked key's sessions end at once too.
  uint64_t revocations() const { return revocations_.load(); }

 private:
  struct Cached {
    Principal principal;
    std::chrono::steady_clock::time_point until;
  };
  store::Store& store_;
  std::mutex mutex_;
  std::map<std::string, Cached> cache_;  // by key hash
  std::map<std::string, int64_t> touched_;  // key id -> last_used_at written
  std::atomic<uint64_t> revocations_{0};
};

}  // namespace berth::api
