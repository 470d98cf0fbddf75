// API keys (DESIGN.md, "Tenancy and secrets"): random, shown once, stored only as a SHA-256
// hash, scoped, revocable, never logged. Authentication maps a bearer key to a principal; a
// short cache keeps SQLite off the hot path of every proxied request, and revoking a key
// clears it, so a revoked key stops working at once.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "common/error.h"
#include "controller/store/store.h"

namespace berth::api {

enum class Scope { kRead, kWrite, kAdmin };
std::string_view ScopeName(Scope scope);
Result<Scope> ParseScope(std::string_view name);

struct Principal {
  std::string tenant_id;
  std::string tenant_name;
  std::string key_id;
  std::string key_prefix;
  Scope scope = Scope::kRead;
  bool Allows(Scope needed) const { return static_cast<int>(scope) >= static_cast<int>(needed); }
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
  // Revokes a key; it fails authentication from now on. Blocking.
  Status Revoke(const std::string& key_id);

 private:
  struct Cached {
    Principal principal;
    std::chrono::steady_clock::time_point until;
  };
  store::Store& store_;
  std::mutex mutex_;
  std::map<std::string, Cached> cache_;  // by key hash
  std::map<std::string, int64_t> touched_;  // key id -> last_used_at written
};

}  // namespace berth::api
