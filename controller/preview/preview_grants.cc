#include "controller/preview/preview_grants.h"

#include <fmt/format.h>

#include "common/random.h"

namespace berth::preview {

bool LooksLikePreviewToken(std::string_view token) {
  if (token.size() != 4 + 64 || !token.starts_with("bpt_")) return false;
  for (char c : token.substr(4)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

PreviewGrants::PreviewGrants(store::Store& store, std::function<int64_t()> now)
    : store_(store), now_(std::move(now)) {}

bool PreviewGrants::Live(const store::Preview& p) const { return !p.revoked_at && p.expires_at > now_(); }

Result<NewPreview> PreviewGrants::Create(const std::string& tenant_id, const std::string& workspace_id,
                                         int port, bool is_public, std::chrono::seconds ttl,
                                         const std::string& key_id) {
  NewPreview made;
  auto& p = made.record;
  p.id = NewId("pv");
  p.tenant_id = tenant_id;
  p.workspace_id = workspace_id;
  p.port = port;
  p.is_public = is_public;
  p.created_by = key_id;
  p.created_at = now_();
  p.expires_at = p.created_at + ttl.count();
  std::string hash;
  if (!is_public) {
    made.token = "bpt_" + RandomHex(32);
    hash = Sha256Hex(made.token);
  }
  if (auto s = store_.InsertPreview(p, hash); !s) return Fail(s.error());
  if (is_public) {
    std::lock_guard lock(mutex_);
    public_.erase({workspace_id, port});  // a cached "none" must not hide it
  }
  return made;
}

Status PreviewGrants::Revoke(const std::string& tenant_id, const std::string& workspace_id,
                             const std::string& id) {
  auto s = store_.RevokePreview(tenant_id, workspace_id, id, now_());
  std::lock_guard lock(mutex_);
  by_token_hash_.clear();
  public_.clear();
  return s;
}

Result<store::Preview> PreviewGrants::ByToken(std::string_view token) {
  Error refused(ErrorCode::kUnauthenticated, "this preview token is not valid (unknown, expired or revoked)");
  if (!LooksLikePreviewToken(token)) return Fail(refused);
  std::string hash = Sha256Hex(token);
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    auto it = by_token_hash_.find(hash);
    if (it != by_token_hash_.end() && now - it->second.at < kCacheFor) {
      if (it->second.grant && Live(*it->second.grant)) return *it->second.grant;
      return Fail(refused);
    }
  }
  auto found = store_.FindPreviewByTokenHash(hash);
  if (!found && found.error().code != ErrorCode::kNotFound) return Fail(found.error());
  std::optional<store::Preview> grant;
  if (found) grant = *found;
  {
    std::lock_guard lock(mutex_);
    if (by_token_hash_.size() >= kMaxCached) by_token_hash_.clear();
    by_token_hash_[hash] = Cached{grant, now};
  }
  if (grant && Live(*grant)) return *grant;
  return Fail(refused);
}

Result<std::optional<store::Preview>> PreviewGrants::Public(const std::string& workspace_id, int port) {
  auto key = std::make_pair(workspace_id, port);
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    auto it = public_.find(key);
    if (it != public_.end() && now - it->second.at < kCacheFor) {
      if (it->second.grant && Live(*it->second.grant)) return it->second.grant;
      if (!it->second.grant) return std::optional<store::Preview>{};
    }
  }
  auto found = store_.FindPublicPreviews(workspace_id, port);
  if (!found) return Fail(found.error());
  std::optional<store::Preview> live;
  for (const auto& p : *found) {
    if (Live(p) && (!live || p.expires_at > live->expires_at)) live = p;
  }
  {
    std::lock_guard lock(mutex_);
    if (public_.size() >= kMaxCached) public_.clear();
    public_[key] = Cached{live, now};
  }
  return live;
}

bool PreviewGrants::NoteUse(const store::Preview& grant) {
  int64_t now = now_();
  bool first = false;
  {
    std::lock_guard lock(mutex_);
    auto it = touched_.find(grant.id);
    if (it != touched_.end() && now - it->second < kTouchEvery) return false;
    first = it == touched_.end() && !grant.last_used_at;
    if (touched_.size() >= kMaxCached) touched_.clear();
    touched_[grant.id] = now;
  }
  // A lost write costs only the precision of last_used_at.
  (void)store_.TouchPreview(grant.id, now);
  return first;
}

}  // namespace berth::preview
