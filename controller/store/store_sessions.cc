// The sessions table (schema.h, migration 7).
#include <fmt/format.h>

#include "controller/store/store.h"

namespace berth::store {
namespace {

constexpr const char* kColumns =
    "s.id, s.tenant_id, s.key_id, s.created_at, s.expires_at, s.last_used_at, s.revoked_at";

// Ended sessions are kept this long after their end (for a look at what was signed in), then
// removed when the next one is made.
constexpr int64_t kKeepEnded = 24 * 3600;

Session ReadSession(const Statement& s) {
  Session out;
  out.id = s.Text(0);
  out.tenant_id = s.Text(1);
  out.key_id = s.Text(2);
  out.created_at = s.Int(3);
  out.expires_at = s.Int(4);
  out.last_used_at = s.Int(5);
  out.revoked_at = s.OptInt(6);
  return out;
}

}  // namespace

Status Store::InsertSession(const Session& session, const std::string& token_hash, int64_t now) {
  std::lock_guard lock(mutex_);
  auto prune = db_.Prepare(
      "DELETE FROM sessions WHERE expires_at < ?1 OR (revoked_at IS NOT NULL AND revoked_at < ?1)");
  if (!prune) return Fail(prune.error());
  prune->Bind(1, now - kKeepEnded);
  if (auto s = prune->Run(); !s) return s;
  auto stmt = db_.Prepare(
      "INSERT INTO sessions (id, tenant_id, key_id, token_hash, created_at, expires_at, "
      "last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, session.id).Bind(2, session.tenant_id).Bind(3, session.key_id).Bind(4, token_hash)
      .Bind(5, session.created_at).Bind(6, session.expires_at).Bind(7, session.last_used_at)
      .Bind(8, session.revoked_at);
  return stmt->Run();
}

Result<Session> Store::FindSessionByTokenHash(const std::string& token_hash) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM sessions s JOIN api_keys k ON k.id = s.key_id "
      "WHERE s.token_hash = ? AND s.revoked_at IS NULL AND k.revoked_at IS NULL",
      kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, token_hash);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, "unknown or ended session");
  return ReadSession(*stmt);
}

Result<std::pair<Session, std::string>> Store::FindSessionWithHash(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {}, s.token_hash FROM sessions s JOIN api_keys k ON k.id = s.key_id "
      "WHERE s.id = ? AND s.revoked_at IS NULL AND k.revoked_at IS NULL",
      kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, id);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, "unknown or ended session");
  return std::pair{ReadSession(*stmt), stmt->Text(7)};
}

Result<std::vector<Session>> Store::ListSessions(const std::string& tenant_id,
                                                 const std::optional<std::string>& key_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM sessions s WHERE s.tenant_id = ?1 AND s.revoked_at IS NULL "
      "AND (?2 IS NULL OR s.key_id = ?2) ORDER BY s.created_at DESC, s.rowid DESC",
      kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, key_id);
  std::vector<Session> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back(ReadSession(*stmt));
  }
  return out;
}

Status Store::RevokeSession(const std::string& tenant_id, const std::string& id,
                            const std::optional<std::string>& key_id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "UPDATE sessions SET revoked_at = ?1 WHERE tenant_id = ?2 AND id = ?3 "
      "AND (?4 IS NULL OR key_id = ?4) AND revoked_at IS NULL");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, now).Bind(2, tenant_id).Bind(3, id).Bind(4, key_id);
  if (auto s = stmt->Run(); !s) return s;
  if (db_.Changes() == 0) return Fail(ErrorCode::kNotFound, fmt::format("no active session '{}'", id));
  return {};
}

Status Store::TouchSession(const std::string& id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("UPDATE sessions SET last_used_at = ? WHERE id = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, now).Bind(2, id);
  return stmt->Run();
}

}  // namespace berth::store
