#include "controller/store/store.h"

#include <fmt/format.h>

#include "common/json.h"
#include "controller/store/schema.h"

namespace berth::store {
namespace {

using workspace::Workspace;

constexpr std::string_view kWorkspaceColumns =
    "id, tenant_id, name, image, image_version, size, vcpus, memory_mib, disk_gib, "
    "idle_timeout_s, idle_action, max_runtime_s, auto_start, env, labels, state, error, "
    "transport, uuid, vsock_cid, created_at, updated_at, started_at, last_active_at, agent_port, "
    "network, net_uid, screen, disk_gen, disk_parent, resume_memory, from_checkpoint, fresh_identity, "
    "checkpoint_every_s, checkpoint_keep";

std::optional<int64_t> CheckpointEvery(const Workspace& ws) {
  return ws.checkpoints ? std::optional<int64_t>(ws.checkpoints->every_s) : std::nullopt;
}
std::optional<int64_t> CheckpointKeep(const Workspace& ws) {
  return ws.checkpoints ? std::optional<int64_t>(ws.checkpoints->keep) : std::nullopt;
}

Workspace ReadWorkspace(const Statement& s) {
  Workspace ws;
  ws.id = s.Text(0);
  ws.tenant_id = s.Text(1);
  ws.name = s.Text(2);
  ws.image = s.Text(3);
  ws.image_version = s.Text(4);
  ws.size = s.OptText(5);
  ws.vcpus = static_cast<int>(s.Int(6));
  ws.memory_mib = static_cast<int>(s.Int(7));
  ws.disk_gib = static_cast<int>(s.Int(8));
  ws.idle_timeout_s = s.Int(9);
  ws.idle_action = s.Text(10) == "hibernate" ? workspace::IdleAction::kHibernate
                                             : workspace::IdleAction::kStop;
  ws.max_runtime_s = s.OptInt(11);
  ws.auto_start = s.Int(12) != 0;
  // Written by berthd itself, but parsed the one way all JSON is (bounded depth).
  ws.env = ParseJson(s.Text(13)).value_or(nlohmann::json::object());
  ws.labels = ParseJson(s.Text(14)).value_or(nlohmann::json::object());
  ws.state = workspace::StateFromName(s.Text(15)).value_or(workspace::State::kError);
  ws.error = s.OptText(16);
  ws.transport = s.Text(17);
  ws.uuid = s.Text(18);
  ws.vsock_cid = s.OptInt(19);
  ws.created_at = s.Int(20);
  ws.updated_at = s.Int(21);
  ws.started_at = s.OptInt(22);
  ws.last_active_at = s.OptInt(23);
  ws.agent_port = s.OptInt(24);
  // A policy that no longer parses (it never should: it was validated on the way in) reads as
  // "none" rather than opening the guest up.
  auto policy = network::ParsePolicy(ParseJson(s.Text(25)).value_or(nlohmann::json()));
  ws.network = policy ? *policy : network::Policy{network::Egress::kNone, {}, {}};
  ws.net_uid = s.OptInt(26);
  ws.screen = s.Text(27);
  ws.disk_gen = s.Int(28);
  ws.disk_parent = s.OptText(29);
  ws.resume_memory = s.OptText(30);
  ws.from_checkpoint = s.OptText(31);
  ws.fresh_identity = s.Int(32) != 0;
  if (auto every = s.OptInt(33), keep = s.OptInt(34); every && keep) {
    ws.checkpoints = workspace::CheckpointPolicy{*every, static_cast<int>(*keep)};
  }
  return ws;
}

std::string_view IdleActionName(workspace::IdleAction a) {
  return a == workspace::IdleAction::kHibernate ? "hibernate" : "stop";
}

ApiKey ReadKey(const Statement& s) {
  return ApiKey{s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Text(4), s.Int(5), s.OptInt(6),
                s.OptInt(7)};
}

Result<std::vector<Workspace>> Collect(Result<Statement> stmt) {
  if (!stmt) return Fail(stmt.error());
  std::vector<Workspace> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back(ReadWorkspace(*stmt));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  auto db = Database::Open(path);
  if (!db) return Fail(db.error());
  if (auto s = db->Migrate(Migrations()); !s) return Fail(s.error());
  return std::unique_ptr<Store>(new Store(std::move(*db)));
}

// --- tenants and keys ------------------------------------------------------------------------

Result<Tenant> Store::CreateTenant(const std::string& name, int64_t now) {
  std::lock_guard lock(mutex_);
  Tenant t{"t_" + name, name, now};
  auto stmt = db_.Prepare("INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, t.id).Bind(2, t.name).Bind(3, t.created_at);
  if (auto s = stmt->Run(); !s) {
    if (s.error().code == ErrorCode::kAlreadyExists) {
      return Fail(ErrorCode::kAlreadyExists, fmt::format("tenant '{}' already exists", name));
    }
    return Fail(s.error());
  }
  return t;
}

Result<Tenant> Store::GetTenant(const std::string& id_or_name) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("SELECT id, name, created_at FROM tenants WHERE id = ? OR name = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, id_or_name).Bind(2, id_or_name);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no tenant '{}'", id_or_name));
  return Tenant{stmt->Text(0), stmt->Text(1), stmt->Int(2)};
}

Result<workspace::LimitOverrides> Store::GetTenantLimits(const std::string& tenant_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "SELECT t.id, l.workspaces, l.vcpus, l.memory_mib, l.disk_gib FROM tenants t "
      "LEFT JOIN tenant_limits l ON l.tenant_id = t.id WHERE t.id = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no tenant '{}'", tenant_id));
  return workspace::LimitOverrides{stmt->OptInt(1), stmt->OptInt(2), stmt->OptInt(3), stmt->OptInt(4)};
}

Status Store::SetTenantLimits(const std::string& tenant_id, const workspace::LimitOverrides& limits) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "INSERT INTO tenant_limits (tenant_id, workspaces, vcpus, memory_mib, disk_gib) "
      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET workspaces = excluded.workspaces, "
      "vcpus = excluded.vcpus, memory_mib = excluded.memory_mib, disk_gib = excluded.disk_gib");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id)
      .Bind(2, limits.workspaces)
      .Bind(3, limits.vcpus)
      .Bind(4, limits.memory_mib)
      .Bind(5, limits.disk_gib);
  return stmt->Run();
}

Result<std::vector<Tenant>> Store::ListTenants() {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("SELECT id, name, created_at FROM tenants ORDER BY name");
  if (!stmt) return Fail(stmt.error());
  std::vector<Tenant> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back({stmt->Text(0), stmt->Text(1), stmt->Int(2)});
  }
  return out;
}

Status Store::InsertKey(const ApiKey& key, const std::string& hash) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "INSERT INTO api_keys (id, tenant_id, hash, prefix, scope, name, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, key.id).Bind(2, key.tenant_id).Bind(3, hash).Bind(4, key.prefix)
      .Bind(5, key.scope).Bind(6, key.name).Bind(7, key.created_at);
  return stmt->Run();
}

Result<ApiKey> Store::FindKeyByHash(const std::string& hash) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "SELECT id, tenant_id, prefix, scope, name, created_at, last_used_at, revoked_at "
      "FROM api_keys WHERE hash = ? AND revoked_at IS NULL");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, hash);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kUnauthenticated, "unknown or revoked API key");
  return ReadKey(*stmt);
}

Result<std::vector<ApiKey>> Store::ListKeys(const std::optional<std::string>& tenant_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "SELECT id, tenant_id, prefix, scope, name, created_at, last_used_at, revoked_at "
      "FROM api_keys WHERE ?1 IS NULL OR tenant_id = ?1 ORDER BY created_at, id");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id);
  std::vector<ApiKey> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back(ReadKey(*stmt));
  }
  return out;
}

Result<ApiKey> Store::GetKey(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "SELECT id, tenant_id, prefix, scope, name, created_at, last_used_at, revoked_at "
      "FROM api_keys WHERE id = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, id);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no active key '{}'", id));
  return ReadKey(*stmt);
}

Status Store::RevokeKey(const std::string& id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, now).Bind(2, id);
  if (auto s = stmt->Run(); !s) return s;
  if (db_.Changes() == 0) return Fail(ErrorCode::kNotFound, fmt::format("no active key '{}'", id));
  return {};
}

Status Store::TouchKey(const std::string& id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("UPDATE api_keys SET last_used_at = ? WHERE id = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, now).Bind(2, id);
  return stmt->Run();
}

// --- workspaces ------------------------------------------------------------------------------

Status Store::InsertWorkspace(const Workspace& ws) {
  std::lock_guard lock(mutex_);
  return InsertWorkspaceLocked(ws);
}

Result<Event> Store::InsertWorkspace(const Workspace& ws, const NewEvent& event,
                                     const std::string& idempotency_key) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (auto s = InsertWorkspaceLocked(ws); !s) return Fail(s.error());
  if (!idempotency_key.empty()) {
    auto key = db_.Prepare(
        "INSERT INTO idempotency_keys (tenant_id, key, workspace_id, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (tenant_id, key) DO UPDATE SET workspace_id = excluded.workspace_id, "
        "created_at = excluded.created_at");
    if (!key) return Fail(key.error());
    key->Bind(1, ws.tenant_id).Bind(2, idempotency_key).Bind(3, ws.id).Bind(4, event.at);
    if (auto s = key->Run(); !s) return Fail(s.error());
  }
  auto added = AddEventLocked(ws.id, ws.tenant_id, event);
  if (!added) return Fail(added.error());
  if (auto s = tx.Commit(); !s) return Fail(s.error());
  return added;
}

Status Store::InsertWorkspaceLocked(const Workspace& ws) {
  auto stmt = db_.Prepare(fmt::format(
      "INSERT INTO workspaces ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      kWorkspaceColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, ws.id).Bind(2, ws.tenant_id).Bind(3, ws.name).Bind(4, ws.image)
      .Bind(5, ws.image_version).Bind(6, ws.size).Bind(7, ws.vcpus).Bind(8, ws.memory_mib)
      .Bind(9, ws.disk_gib).Bind(10, ws.idle_timeout_s)
      .Bind(11, IdleActionName(ws.idle_action)).Bind(12, ws.max_runtime_s)
      .Bind(13, ws.auto_start).Bind(14, DumpJson(ws.env)).Bind(15, DumpJson(ws.labels))
      .Bind(16, workspace::StateName(ws.state)).Bind(17, ws.error).Bind(18, ws.transport)
      .Bind(19, ws.uuid).Bind(20, ws.vsock_cid).Bind(21, ws.created_at).Bind(22, ws.updated_at)
      .Bind(23, ws.started_at).Bind(24, ws.last_active_at).Bind(25, ws.agent_port)
      .Bind(26, DumpJson(network::PolicyJson(ws.network))).Bind(27, ws.net_uid)
      .Bind(28, ws.screen).Bind(29, ws.disk_gen).Bind(30, ws.disk_parent)
      .Bind(31, ws.resume_memory).Bind(32, ws.from_checkpoint).Bind(33, ws.fresh_identity)
      .Bind(34, CheckpointEvery(ws)).Bind(35, CheckpointKeep(ws));
  auto status = stmt->Run();
  if (!status && status.error().code == ErrorCode::kAlreadyExists) {
    return Fail(ErrorCode::kAlreadyExists,
                fmt::format("a workspace named '{}' already exists", ws.name));
  }
  return status;
}

Result<Workspace> Store::GetWorkspace(const std::string& tenant_id,
                                      const std::string& id_or_name) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM workspaces WHERE tenant_id = ? AND (id = ? OR name = ?)", kWorkspaceColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, id_or_name).Bind(3, id_or_name);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", id_or_name));
  return ReadWorkspace(*stmt);
}

Result<Workspace> Store::GetWorkspaceById(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format("SELECT {} FROM workspaces WHERE id = ?", kWorkspaceColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, id);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", id));
  return ReadWorkspace(*stmt);
}

Result<std::vector<Workspace>> Store::ListWorkspaces(const std::string& tenant_id,
                                                     const WorkspaceFilter& filter) {
  std::lock_guard lock(mutex_);
  std::string sql = fmt::format(
      "SELECT {} FROM workspaces WHERE tenant_id = ?1 AND (?2 IS NULL OR state = ?2) AND id > ?3",
      kWorkspaceColumns);
  for (size_t i = 0; i < filter.labels.size(); ++i) {
    sql += fmt::format(" AND json_extract(labels, ?{}) = ?{}", 5 + 2 * i, 6 + 2 * i);
  }
  sql += " ORDER BY id LIMIT ?4";
  auto stmt = db_.Prepare(sql);
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id);
  if (filter.state) {
    stmt->Bind(2, workspace::StateName(*filter.state));
  } else {
    stmt->Bind(2, nullptr);
  }
  stmt->Bind(3, filter.after_id).Bind(4, filter.limit);
  for (size_t i = 0; i < filter.labels.size(); ++i) {
    // json_extract paths quote the key so any label name is a literal.
    std::string path = "$.\"" + filter.labels[i].first + "\"";
    stmt->Bind(static_cast<int>(5 + 2 * i), path);
    stmt->Bind(static_cast<int>(6 + 2 * i), filter.labels[i].second);
  }
  return Collect(std::move(stmt));
}

Result<std::vector<Workspace>> Store::ListAllWorkspaces() {
  std::lock_guard lock(mutex_);
  return Collect(db_.Prepare(fmt::format("SELECT {} FROM workspaces ORDER BY id", kWorkspaceColumns)));
}

Status Store::UpdateWorkspace(const Workspace& ws) {
  std::lock_guard lock(mutex_);
  return UpdateWorkspaceLocked(ws);
}

Result<Event> Store::UpdateWorkspace(const Workspace& ws, const NewEvent& event) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (auto s = UpdateWorkspaceLocked(ws); !s) return Fail(s.error());
  auto added = AddEventLocked(ws.id, ws.tenant_id, event);
  if (!added) return Fail(added.error());
  if (auto s = tx.Commit(); !s) return Fail(s.error());
  return added;
}

Status Store::UpdateWorkspaceLocked(const Workspace& ws) {
  auto stmt = db_.Prepare(
      "UPDATE workspaces SET name = ?, idle_timeout_s = ?, idle_action = ?, max_runtime_s = ?, "
      "auto_start = ?, env = ?, labels = ?, state = ?, error = ?, updated_at = ?, started_at = ?, "
      "last_active_at = ?, image_version = ?, agent_port = ?, network = ?, resume_memory = ?, fresh_identity = ?, "
      "checkpoint_every_s = ?, checkpoint_keep = ? WHERE id = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, ws.name).Bind(2, ws.idle_timeout_s).Bind(3, IdleActionName(ws.idle_action))
      .Bind(4, ws.max_runtime_s).Bind(5, ws.auto_start).Bind(6, DumpJson(ws.env))
      .Bind(7, DumpJson(ws.labels)).Bind(8, workspace::StateName(ws.state)).Bind(9, ws.error)
      .Bind(10, ws.updated_at).Bind(11, ws.started_at).Bind(12, ws.last_active_at)
      .Bind(13, ws.image_version).Bind(14, ws.agent_port)
      .Bind(15, DumpJson(network::PolicyJson(ws.network))).Bind(16, ws.resume_memory).Bind(17, ws.fresh_identity)
      .Bind(18, CheckpointEvery(ws)).Bind(19, CheckpointKeep(ws)).Bind(20, ws.id);
  auto status = stmt->Run();
  if (!status && status.error().code == ErrorCode::kAlreadyExists) {
    return Fail(ErrorCode::kAlreadyExists,
                fmt::format("a workspace named '{}' already exists", ws.name));
  }
  if (status && db_.Changes() == 0) {
    return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", ws.id));
  }
  return status;
}

Status Store::DeleteWorkspace(const std::string& id) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (auto s = DeleteWorkspaceLocked(id); !s) return s;
  return tx.Commit();
}

Result<Event> Store::DeleteWorkspace(const std::string& id, const std::string& tenant_id,
                                     const NewEvent& event) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  if (auto s = DeleteWorkspaceLocked(id); !s) return Fail(s.error());
  auto added = AddEventLocked(id, tenant_id, event);
  if (!added) return Fail(added.error());
  if (auto s = tx.Commit(); !s) return Fail(s.error());
  return added;
}

Status Store::DeleteWorkspaceLocked(const std::string& id) {
  for (const char* sql : {"DELETE FROM idempotency_keys WHERE workspace_id = ?",
                          "DELETE FROM workspaces WHERE id = ?"}) {
    auto stmt = db_.Prepare(sql);
    if (!stmt) return Fail(stmt.error());
    stmt->Bind(1, id);
    if (auto s = stmt->Run(); !s) return s;
  }
  return {};
}

Result<std::vector<int64_t>> Store::UsedVsockCids() {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("SELECT vsock_cid FROM workspaces WHERE vsock_cid IS NOT NULL");
  if (!stmt) return Fail(stmt.error());
  std::vector<int64_t> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back(stmt->Int(0));
  }
  return out;
}

Result<int64_t> Store::AssignNetworkUid(const std::string& id, int64_t first, int64_t count) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  auto current = db_.Prepare("SELECT net_uid FROM workspaces WHERE id = ?");
  if (!current) return Fail(current.error());
  current->Bind(1, id);
  auto row = current->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", id));
  if (auto uid = current->OptInt(0); uid && *uid >= first && *uid < first + count) return *uid;
  // The lowest free uid of the range. UNIQUE (net_uid) backs this up should two berthds ever
  // share a database.
  auto free = db_.Prepare(
      "SELECT MIN(c) FROM (SELECT ?1 AS c UNION ALL SELECT net_uid + 1 FROM workspaces "
      "WHERE net_uid >= ?1 AND net_uid < ?1 + ?2) WHERE c < ?1 + ?2 AND c NOT IN "
      "(SELECT net_uid FROM workspaces WHERE net_uid IS NOT NULL)");
  if (!free) return Fail(free.error());
  free->Bind(1, first).Bind(2, count);
  auto found = free->Step();
  if (!found) return Fail(found.error());
  auto uid = *found ? free->OptInt(0) : std::nullopt;
  if (!uid) {
    return Fail(ErrorCode::kResourceExhausted,
                fmt::format("all {} workspace uids from {} are taken", count, first));
  }
  auto set = db_.Prepare("UPDATE workspaces SET net_uid = ? WHERE id = ?");
  if (!set) return Fail(set.error());
  set->Bind(1, *uid).Bind(2, id);
  if (auto s = set->Run(); !s) return Fail(s.error());
  if (auto s = tx.Commit(); !s) return Fail(s.error());
  return *uid;
}

// --- idempotency -------------------------------------------------------------------------------

Result<std::optional<std::string>> Store::FindIdempotencyKey(const std::string& tenant_id,
                                                             const std::string& key) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "SELECT workspace_id FROM idempotency_keys WHERE tenant_id = ? AND key = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, key);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(stmt->Text(0));
}

Status Store::InsertIdempotencyKey(const std::string& tenant_id, const std::string& key,
                                   const std::string& workspace_id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "INSERT INTO idempotency_keys (tenant_id, key, workspace_id, created_at) VALUES (?, ?, ?, ?)");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, key).Bind(3, workspace_id).Bind(4, now);
  return stmt->Run();
}

// --- events and usage --------------------------------------------------------------------------

Result<Event> Store::AddEvent(const std::string& workspace_id, const std::string& tenant_id,
                              int64_t at, const std::string& type, const std::string& message,
                              const nlohmann::json& data) {
  std::lock_guard lock(mutex_);
  return AddEventLocked(workspace_id, tenant_id, NewEvent{at, type, message, data});
}

Result<Event> Store::AddEvent(const std::string& workspace_id, const std::string& tenant_id,
                              const NewEvent& event) {
  std::lock_guard lock(mutex_);
  return AddEventLocked(workspace_id, tenant_id, event);
}

void Store::SetEventRetention(int64_t keep) {
  std::lock_guard lock(mutex_);
  events_keep_ = std::max(keep, kMinEventsKept);
}

Result<Event> Store::AddEventLocked(const std::string& workspace_id, const std::string& tenant_id,
                                    const NewEvent& event) {
  auto stmt = db_.Prepare(
      "INSERT INTO events (workspace_id, tenant_id, at, type, message, data, actor) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, workspace_id).Bind(2, tenant_id).Bind(3, event.at).Bind(4, event.type)
      .Bind(5, event.message).Bind(6, DumpJson(event.data)).Bind(7, event.actor);
  if (auto s = stmt->Run(); !s) return Fail(s.error());
  Event added{db_.LastInsertRowId(), workspace_id, event.at, event.type, event.message, event.data,
              event.actor};
  // The bound, in batches: one index walk of `keep` entries per kEventPruneBatch events. A
  // failed prune loses nothing and is tried again with the next batch.
  if (++unpruned_[workspace_id] >= kEventPruneBatch) {
    auto prune = db_.Prepare(
        "DELETE FROM events WHERE workspace_id = ? AND id < (SELECT id FROM events "
        "WHERE workspace_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)");
    if (prune) {
      prune->Bind(1, workspace_id).Bind(2, workspace_id).Bind(3, events_keep_ - 1);
      if (prune->Run()) unpruned_.erase(workspace_id);
    }
  }
  return added;
}

Result<std::vector<Event>> Store::ListEvents(const std::string& workspace_id, int64_t after_id,
                                             int limit) {
  EventFilter filter;
  filter.after_id = after_id;
  filter.limit = limit;
  return ListEvents(workspace_id, filter);
}

Result<std::vector<Event>> Store::ListEvents(const std::string& workspace_id,
                                             const EventFilter& filter) {
  // Every type and actor was checked (ParseEventTypes, ParseEventActors) or comes from berthd:
  // none holds a GLOB metacharacter, and each is bound, never spliced into the SQL.
  std::string sql =
      "SELECT id, workspace_id, at, type, message, data, actor FROM events "
      "WHERE workspace_id = ? AND id > ?";
  std::vector<std::string> binds;
  auto any_of = [&](const std::vector<std::string>& entries, auto clause) {
    if (entries.empty()) return;
    sql += " AND (";
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) sql += " OR ";
      sql += clause(entries[i]);
    }
    sql += ")";
  };
  any_of(filter.types, [&](const std::string& t) {
    if (t.ends_with('*')) {
      binds.push_back(t);  // "desktop_*": the GLOB pattern itself
      return "type GLOB ?";
    }
    binds.push_back(t);
    return "type = ?";
  });
  any_of(filter.actors, [&](const std::string& a) {
    binds.push_back(a);
    if (!IsActorKind(a)) return "actor = ?";
    binds.push_back(a + "_*");
    return "(actor = ? OR actor GLOB ?)";
  });
  if (filter.since > 0) sql += " AND at >= ?";
  sql += " ORDER BY id LIMIT ?";
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(sql);
  if (!stmt) return Fail(stmt.error());
  int n = 1;
  stmt->Bind(n++, workspace_id);
  stmt->Bind(n++, filter.after_id);
  for (const auto& b : binds) stmt->Bind(n++, b);
  if (filter.since > 0) stmt->Bind(n++, filter.since);
  stmt->Bind(n, static_cast<int64_t>(filter.limit));
  std::vector<Event> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    auto data = ParseJson(stmt->Text(5));
    out.push_back({stmt->Int(0), stmt->Text(1), stmt->Int(2), stmt->Text(3), stmt->Text(4),
                   data ? std::move(*data) : nlohmann::json::object(), stmt->Text(6)});
  }
  return out;
}

Status Store::OpenUsage(const Workspace& ws, int64_t now) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  auto close = db_.Prepare("UPDATE usage SET ended_at = ? WHERE workspace_id = ? AND ended_at IS NULL");
  if (!close) return Fail(close.error());
  close->Bind(1, now).Bind(2, ws.id);
  if (auto s = close->Run(); !s) return s;
  auto open = db_.Prepare(
      "INSERT INTO usage (workspace_id, tenant_id, size, vcpus, started_at) VALUES (?, ?, ?, ?, ?)");
  if (!open) return Fail(open.error());
  open->Bind(1, ws.id).Bind(2, ws.tenant_id).Bind(3, ws.size).Bind(4, ws.vcpus).Bind(5, now);
  if (auto s = open->Run(); !s) return s;
  return tx.Commit();
}

Status Store::CloseUsage(const std::string& workspace_id, int64_t now) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("UPDATE usage SET ended_at = ? WHERE workspace_id = ? AND ended_at IS NULL");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, now).Bind(2, workspace_id);
  return stmt->Run();
}

Result<std::vector<Store::UsageRow>> Store::Usage(const std::string& tenant_id, int64_t from,
                                                  int64_t to, int64_t now) {
  std::lock_guard lock(mutex_);
  // Each interval clipped to [from, to); open intervals count up to `now`. An interval that
  // starts at `to` itself is listed with what it has had (nothing): with the default range
  // (to = now) a workspace that started this second is running, and must not be missing.
  auto stmt = db_.Prepare(
      "SELECT workspace_id, size, "
      "  SUM(MAX(0, MIN(COALESCE(ended_at, ?4), ?3) - MAX(started_at, ?2))), "
      "  SUM(vcpus * MAX(0, MIN(COALESCE(ended_at, ?4), ?3) - MAX(started_at, ?2))) "
      "FROM usage WHERE tenant_id = ?1 AND started_at <= ?3 AND COALESCE(ended_at, ?4) > ?2 "
      "GROUP BY workspace_id, size ORDER BY workspace_id");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, from).Bind(3, to).Bind(4, now);
  std::vector<UsageRow> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back({stmt->Text(0), stmt->OptText(1), stmt->Int(2), stmt->Int(3)});
  }
  return out;
}

}  // namespace berth::store
