// The previews table (schema.h, migration 6).
#include <fmt/format.h>

#include "controller/store/store.h"

namespace berth::store {
namespace {

constexpr const char* kColumns =
    "id, tenant_id, workspace_id, port, public, created_by, created_at, expires_at, last_used_at, "
    "revoked_at";

Preview ReadPreview(const Statement& s) {
  Preview p;
  p.id = s.Text(0);
  p.tenant_id = s.Text(1);
  p.workspace_id = s.Text(2);
  p.port = static_cast<int>(s.Int(3));
  p.is_public = s.Int(4) != 0;
  p.created_by = s.Text(5);
  p.created_at = s.Int(6);
  p.expires_at = s.Int(7);
  p.last_used_at = s.OptInt(8);
  p.revoked_at = s.OptInt(9);
  return p;
}

Result<std::vector<Preview>> CollectPreviews(Statement& stmt) {
  std::vector<Preview> out;
  for (;;) {
    auto row = stmt.Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back(ReadPreview(stmt));
  }
  return out;
}

}  // namespace

Status Store::InsertPreview(const Preview& p, const std::string& token_hash) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format("INSERT INTO previews ({}, token_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                      kColumns));
  if (!stmt) return Fail(stmt.error());
  std::optional<std::string> hash;
  if (!token_hash.empty()) hash = token_hash;
  stmt->Bind(1, p.id).Bind(2, p.tenant_id).Bind(3, p.workspace_id).Bind(4, p.port).Bind(5, p.is_public)
      .Bind(6, p.created_by).Bind(7, p.created_at).Bind(8, p.expires_at).Bind(9, p.last_used_at)
      .Bind(10, p.revoked_at).Bind(11, hash);
  return stmt->Run();
}

Result<std::vector<Preview>> Store::ListPreviews(const std::string& tenant_id, const std::string& workspace_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM previews WHERE tenant_id = ? AND workspace_id = ? ORDER BY created_at DESC, rowid DESC",
      kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, workspace_id);
  return CollectPreviews(*stmt);
}

Result<Preview> Store::GetPreview(const std::string& tenant_id, const std::string& workspace_id,
                                  const std::string& id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM previews WHERE tenant_id = ? AND workspace_id = ? AND id = ?", kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, workspace_id).Bind(3, id);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no preview '{}' in this workspace", id));
  return ReadPreview(*stmt);
}

Result<Preview> Store::FindPreviewByTokenHash(const std::string& token_hash) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM previews WHERE token_hash = ? AND revoked_at IS NULL", kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, token_hash);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, "unknown or revoked preview token");
  return ReadPreview(*stmt);
}

Result<std::vector<Preview>> Store::FindPublicPreviews(const std::string& workspace_id, int port) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM previews WHERE workspace_id = ? AND port = ? AND public = 1 AND revoked_at IS NULL",
      kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, workspace_id).Bind(2, port);
  return CollectPreviews(*stmt);
}

Status Store::RevokePreview(const std::string& tenant_id, const std::string& workspace_id,
                            const std::string& id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "UPDATE previews SET revoked_at = ? WHERE tenant_id = ? AND workspace_id = ? AND id = ? "
      "AND revoked_at IS NULL");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, now).Bind(2, tenant_id).Bind(3, workspace_id).Bind(4, id);
  if (auto s = stmt->Run(); !s) return s;
  if (db_.Changes() == 0) {
    return Fail(ErrorCode::kNotFound, fmt::format("no active preview '{}' in this workspace", id));
  }
  return {};
}

Status Store::TouchPreview(const std::string& id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("UPDATE previews SET last_used_at = ? WHERE id = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, now).Bind(2, id);
  return stmt->Run();
}

}  // namespace berth::store
