// Who may open a preview: the grants of the previews table (store::Preview), each one port of
// one workspace, public or behind a token, expiring and revocable. The token is shown once, at
// create, and stored only as its SHA-256 (like API keys).
//
// Lookups on the request path are cached for a few seconds (a page of a dev server is dozens of
// requests); a revoke clears the cache, so it takes effect at once in this berthd. Uses are
// written to the store at most once a minute per grant. Thread-safe; the calls that may touch
// the store (all but none) block: call them off I/O threads.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "controller/store/store.h"

namespace berth::preview {

// What a create returns: the record, and for a private preview its token (shown this once).
struct NewPreview {
  store::Preview record;
  std::string token;
};

// A preview token's form: "bpt_" and 64 hex digits.
bool LooksLikePreviewToken(std::string_view token);

class PreviewGrants {
 public:
  // `now`: Unix seconds (a test clock in unit tests).
  PreviewGrants(store::Store& store, std::function<int64_t()> now);

  // A new grant of `port` of the workspace, for `ttl` from now. Blocking.
  Result<NewPreview> Create(const std::string& tenant_id, const std::string& workspace_id, int port,
                            bool is_public, std::chrono::seconds ttl, const std::string& key_id);
  // not_found when there is no such grant or it is revoked already. Blocking.
  Status Revoke(const std::string& tenant_id, const std::string& workspace_id, const std::string& id);

  // The live grant (not expired, not revoked) the token opens; unauthenticated otherwise, the
  // message saying which (unknown, expired or revoked are told apart only as "not valid", so a
  // guess learns nothing). Blocking on a cache miss.
  Result<store::Preview> ByToken(std::string_view token);
  // A live public grant of the workspace's port, if any. Blocking on a cache miss.
  Result<std::optional<store::Preview>> Public(const std::string& workspace_id, int port);
  // A request used `grant`: its last use is written (at most once a minute). True the first
  // time the grant is ever used (an event says so). Blocking when it writes.
  bool NoteUse(const store::Preview& grant);

  int64_t Now() const { return now_(); }

 private:
  struct Cached {
    std::optional<store::Preview> grant;
    std::chrono::steady_clock::time_point at;
  };
  // Fresh enough to answer from memory.
  static constexpr std::chrono::seconds kCacheFor{5};
  // Entries kept before the cache starts over (each is a few hundred bytes).
  static constexpr size_t kMaxCached = 4096;
  // A grant's last use is written to the store at most this often.
  static constexpr int64_t kTouchEvery = 60;

  bool Live(const store::Preview& p) const;

  store::Store& store_;
  std::function<int64_t()> now_;
  std::mutex mutex_;
  std::map<std::string, Cached, std::less<>> by_token_hash_;
  std::map<std::pair<std::string, int>, Cached> public_;
  std::map<std::string, int64_t, std::less<>> touched_;  // grant id -> when its use was last written
};

}  // namespace berth::preview
