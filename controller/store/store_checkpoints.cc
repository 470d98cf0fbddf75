// The checkpoints table and the workspace's disk generation (schema.h, migration 10).
#include <fmt/format.h>

#include "controller/store/store.h"

namespace berth::store {
namespace {

constexpr const char* kColumns =
    "id, tenant_id, workspace_id, name, kind, state, gen, parent, memory, taken_while, pause_ms, "
    "created_by, created_at";

Checkpoint ReadCheckpoint(const Statement& s) {
  Checkpoint c;
  c.id = s.Text(0);
  c.tenant_id = s.Text(1);
  c.workspace_id = s.Text(2);
  c.name = s.Text(3);
  c.kind = s.Text(4);
  c.state = s.Text(5);
  c.gen = s.Int(6);
  c.parent = s.OptText(7);
  c.memory = s.Int(8) != 0;
  c.taken_while = s.Text(9);
  c.pause_ms = s.OptInt(10);
  c.created_by = s.Text(11);
  c.created_at = s.Int(12);
  return c;
}

Status Run(Database& db, const char* sql, const std::function<void(Statement&)>& bind) {
  auto stmt = db.Prepare(sql);
  if (!stmt) return Fail(stmt.error());
  bind(*stmt);
  return stmt->Run();
}

}  // namespace

Status Store::InsertCheckpoint(const Checkpoint& c) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      fmt::format("INSERT INTO checkpoints ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, c.id).Bind(2, c.tenant_id).Bind(3, c.workspace_id).Bind(4, c.name).Bind(5, c.kind)
      .Bind(6, c.state).Bind(7, c.gen).Bind(8, c.parent).Bind(9, c.memory).Bind(10, c.taken_while)
      .Bind(11, c.pause_ms).Bind(12, c.created_by).Bind(13, c.created_at);
  auto status = stmt->Run();
  if (!status && status.error().code == ErrorCode::kAlreadyExists) {
    return Fail(ErrorCode::kAlreadyExists,
                fmt::format("this workspace already has a checkpoint named '{}'", c.name));
  }
  return status;
}

Result<std::vector<Checkpoint>> Store::ListCheckpoints(const std::string& workspace_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM checkpoints WHERE workspace_id = ? ORDER BY created_at DESC, gen DESC", kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, workspace_id);
  std::vector<Checkpoint> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back(ReadCheckpoint(*stmt));
  }
  return out;
}

Result<Checkpoint> Store::GetCheckpoint(const std::string& workspace_id, const std::string& id_or_name) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM checkpoints WHERE workspace_id = ? AND (id = ? OR name = ?)", kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, workspace_id).Bind(2, id_or_name).Bind(3, id_or_name);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no checkpoint '{}' in this workspace", id_or_name));
  return ReadCheckpoint(*stmt);
}

Result<Checkpoint> Store::FindCheckpoint(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format("SELECT {} FROM checkpoints WHERE id = ?", kColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, id);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no checkpoint {}", id));
  return ReadCheckpoint(*stmt);
}

Result<Event> Store::CommitDisks(const workspace::Workspace& ws, const DiskChange& change, const NewEvent& event) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (auto s = UpdateWorkspaceLocked(ws); !s) return Fail(s.error());
  auto disks = Run(db_, "UPDATE workspaces SET disk_gen = ?, disk_parent = ? WHERE id = ?",
                   [&](Statement& s) { s.Bind(1, ws.disk_gen).Bind(2, ws.disk_parent).Bind(3, ws.id); });
  if (!disks) return Fail(disks.error());
  for (const auto& id : change.ready) {
    auto s = Run(db_, "UPDATE checkpoints SET state = 'ready' WHERE id = ? AND workspace_id = ?",
                 [&](Statement& st) { st.Bind(1, id).Bind(2, ws.id); });
    if (!s) return Fail(s.error());
  }
  for (const auto& [id, ms] : change.paused_ms) {
    auto s = Run(db_, "UPDATE checkpoints SET pause_ms = ? WHERE id = ? AND workspace_id = ?",
                 [&](Statement& st) { st.Bind(1, ms).Bind(2, id).Bind(3, ws.id); });
    if (!s) return Fail(s.error());
  }
  for (const auto& [id, parent] : change.reparent) {
    auto s = Run(db_, "UPDATE checkpoints SET parent = ? WHERE id = ? AND workspace_id = ?",
                 [&](Statement& st) { st.Bind(1, parent).Bind(2, id).Bind(3, ws.id); });
    if (!s) return Fail(s.error());
  }
  for (const auto& id : change.removed) {
    auto s = Run(db_, "DELETE FROM checkpoints WHERE id = ? AND workspace_id = ?",
                 [&](Statement& st) { st.Bind(1, id).Bind(2, ws.id); });
    if (!s) return Fail(s.error());
  }
  auto added = AddEventLocked(ws.id, ws.tenant_id, event);
  if (!added) return Fail(added.error());
  if (auto s = tx.Commit(); !s) return Fail(s.error());
  return added;
}

Status Store::DeleteCheckpoint(const std::string& id) {
  std::lock_guard lock(mutex_);
  return Run(db_, "DELETE FROM checkpoints WHERE id = ?", [&](Statement& s) { s.Bind(1, id); });
}

}  // namespace berth::store
