// The templates table (schema.h, migrations 13 and 14).
#include <fmt/format.h>

#include "controller/store/store.h"

namespace berth::store {
namespace {

constexpr const char* kTemplateColumns =
    "id, tenant_id, name, workspace_id, checkpoint_id, created_by, created_at, state, error, build, build_log";

Template ReadTemplate(const Statement& s) {
  Template t;
  t.id = s.Text(0);
  t.tenant_id = s.Text(1);
  t.name = s.Text(2);
  t.workspace_id = s.Text(3);
  t.checkpoint_id = s.Text(4);
  t.created_by = s.Text(5);
  t.created_at = s.Int(6);
  t.state = s.Text(7);
  t.error = s.Text(8);
  t.build = s.Text(9);
  t.build_log = s.Text(10);
  return t;
}

}  // namespace

Status Store::InsertTemplate(const Template& t) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format("INSERT INTO templates ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", kTemplateColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, t.id).Bind(2, t.tenant_id).Bind(3, t.name).Bind(4, t.workspace_id).Bind(5, t.checkpoint_id)
      .Bind(6, t.created_by).Bind(7, t.created_at).Bind(8, t.state).Bind(9, t.error).Bind(10, t.build)
      .Bind(11, t.build_log);
  auto status = stmt->Run();
  if (!status && status.error().code == ErrorCode::kAlreadyExists) {
    return Fail(ErrorCode::kAlreadyExists, fmt::format("a template named '{}' already exists", t.name));
  }
  return status;
}

Result<std::vector<Template>> Store::ListTemplates(const std::string& tenant_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format(
      "SELECT {} FROM templates WHERE (? = '' OR tenant_id = ?) ORDER BY name", kTemplateColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, tenant_id);
  std::vector<Template> out;
  for (;;) {
    auto row = stmt->Step();
    if (!row) return Fail(row.error());
    if (!*row) break;
    out.push_back(ReadTemplate(*stmt));
  }
  return out;
}

Result<Template> Store::GetTemplate(const std::string& tenant_id, const std::string& id_or_name) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(fmt::format("SELECT {} FROM templates WHERE tenant_id = ? AND (id = ? OR name = ?)",
                                      kTemplateColumns));
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, tenant_id).Bind(2, id_or_name).Bind(3, id_or_name);
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  if (!*row) return Fail(ErrorCode::kNotFound, fmt::format("no template '{}'", id_or_name));
  return ReadTemplate(*stmt);
}

Status Store::DeleteTemplate(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare("DELETE FROM templates WHERE id = ?");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, id);
  return stmt->Run();
}

Status Store::FinishTemplate(const std::string& id, const std::string& state, const std::string& checkpoint_id,
                             const std::string& error, const std::string& build_log) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.Prepare(
      "UPDATE templates SET state = ?, checkpoint_id = ?, error = ?, build_log = ? WHERE id = ? AND state = 'building'");
  if (!stmt) return Fail(stmt.error());
  stmt->Bind(1, state).Bind(2, checkpoint_id).Bind(3, error).Bind(4, build_log).Bind(5, id);
  if (auto s = stmt->Run(); !s) return s;
  if (db_.Changes() == 0) return Fail(ErrorCode::kNotFound, fmt::format("no template {} being built", id));
  return {};
}

}  // namespace berth::store
