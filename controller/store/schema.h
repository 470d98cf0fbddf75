// The database schema as numbered migrations. Append only: a published migration never
// changes, because databases in the field have already applied it.
#pragma once

#include <string_view>
#include <vector>

namespace berth::store {

inline const std::vector<std::string_view>& Migrations() {
  static const std::vector<std::string_view> kMigrations = {
      // 1: tenants, keys, workspaces, their events and usage, idempotent creates.
      R"sql(
CREATE TABLE tenants (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  hash TEXT NOT NULL UNIQUE,          -- hex SHA-256 of the key; the key itself is never stored
  prefix TEXT NOT NULL,               -- the first characters, to recognise a key in a list
  scope TEXT NOT NULL CHECK (scope IN ('admin', 'write', 'read')),
  name TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER
);
CREATE TABLE workspaces (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  name TEXT NOT NULL,
  image TEXT NOT NULL,
  image_version TEXT NOT NULL,
  size TEXT,
  vcpus INTEGER NOT NULL,
  memory_mib INTEGER NOT NULL,
  disk_gib INTEGER NOT NULL,
  idle_timeout_s INTEGER NOT NULL,
  idle_action TEXT NOT NULL CHECK (idle_action IN ('stop', 'hibernate')),
  max_runtime_s INTEGER,
  auto_start INTEGER NOT NULL,
  env TEXT NOT NULL DEFAULT '{}',
  labels TEXT NOT NULL DEFAULT '{}',
  state TEXT NOT NULL,
  error TEXT,
  transport TEXT NOT NULL,
  uuid TEXT NOT NULL UNIQUE,
  vsock_cid INTEGER UNIQUE,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  started_at INTEGER,
  last_active_at INTEGER,
  UNIQUE (tenant_id, name)
);
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  workspace_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  at INTEGER NOT NULL,
  type TEXT NOT NULL,
  message TEXT NOT NULL DEFAULT '',
  data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_workspace ON events (workspace_id, id);
CREATE TABLE usage (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  workspace_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  size TEXT,
  vcpus INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER                     -- NULL while running; closed on stop or reconcile
);
CREATE INDEX usage_by_tenant ON usage (tenant_id, started_at);
CREATE TABLE idempotency_keys (
  tenant_id TEXT NOT NULL,
  key TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, key)
);
)sql",
      // 2: the host port the forward transport uses for this boot (passt forwards it to the
      // agent); kept so a restarted berthd reaches VMs that kept running.
      R"sql(
ALTER TABLE workspaces ADD COLUMN agent_port INTEGER;
)sql",
      // 3: guest network isolation. `net_uid` is the workspace's own uid from the reserved
      // range (its passt and QEMU run as it; nftables matches it), assigned on its first boot
      // after this migration and kept until it is deleted; `network` its egress policy as JSON.
      R"sql(
ALTER TABLE workspaces ADD COLUMN net_uid INTEGER;
ALTER TABLE workspaces ADD COLUMN network TEXT NOT NULL DEFAULT '{"egress":"open","allow":[]}';
CREATE UNIQUE INDEX workspaces_by_net_uid ON workspaces (net_uid);
)sql",
      // 4: the operator scope. `admin` used to reach every tenant; it now manages its own
      // tenant's keys, and `operator` (tenants, every tenant's keys) takes over what the first
      // key could do. SQLite cannot change a CHECK constraint, so the table is rebuilt (no
      // other table refers to it). The first key (the one berthd made on its first start, in
      // tenant "default") becomes the operator key; other admin keys keep their name and
      // lose their reach into other tenants.
      R"sql(
CREATE TABLE api_keys_v4 (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (scope IN ('operator', 'admin', 'write', 'read')),
  name TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER
);
INSERT INTO api_keys_v4 (id, tenant_id, hash, prefix, scope, name, created_at, last_used_at,
                         revoked_at)
  SELECT id, tenant_id, hash, prefix, scope, name, created_at, last_used_at, revoked_at
  FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_v4 RENAME TO api_keys;
UPDATE api_keys SET scope = 'operator'
  WHERE id = (SELECT id FROM api_keys
              WHERE scope = 'admin' AND tenant_id = 't_default' AND name = 'first admin key'
              ORDER BY created_at, rowid LIMIT 1);
)sql",
      // 5: per-tenant limits set by the operator (controller/workspace/quota.h). A NULL column
      // follows berthd's configured default, so changing the default reaches every tenant the
      // operator did not set apart; a tenant without a row has only defaults.
      R"sql(
CREATE TABLE tenant_limits (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
  workspaces INTEGER CHECK (workspaces >= 0),
  vcpus INTEGER CHECK (vcpus >= 0),
  memory_mib INTEGER CHECK (memory_mib >= 0),
  disk_gib INTEGER CHECK (disk_gib >= 0)
);
)sql",
      // 6: previews (controller/preview/): a grant to one port of one workspace, public or
      // behind a token (hashed, like API keys), expiring, revocable, with its last use. Gone
      // with its workspace.
      R"sql(
CREATE TABLE previews (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
  public INTEGER NOT NULL CHECK (public IN (0, 1)),
  token_hash TEXT UNIQUE,             -- hex SHA-256 of the token; NULL for a public preview
  created_by TEXT NOT NULL DEFAULT '',  -- the API key's id
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER,
  CHECK ((public = 1) = (token_hash IS NULL))
);
CREATE INDEX previews_by_workspace ON previews (workspace_id, port);
)sql",
      // 7: the web UI's sign-in sessions (controller/api/sessions.h): a cookie's secret,
      // hashed like API keys, bound to the key that opened it (revoking the key ends them),
      // with an absolute expiry and an idle one (last_used_at).
      R"sql(
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  key_id TEXT NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  token_hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX sessions_by_tenant ON sessions (tenant_id, key_id);
)sql",
      // 8: the desktop's screen size, chosen at create (fw_cfg opt/berth/screen).
      R"sql(
ALTER TABLE workspaces ADD COLUMN screen TEXT NOT NULL DEFAULT '1280x800';
)sql",
      // 9: who caused each event (event_filter.h), and reading a timeline by type.
      R"sql(
ALTER TABLE events ADD COLUMN actor TEXT NOT NULL DEFAULT 'system';
CREATE INDEX events_by_workspace_type ON events (workspace_id, type, id);
)sql",
      // 10: checkpoints (controller/workspace/checkpoints.cc). A workspace's disks are layers:
      // `disk_gen` names its current top (root.qcow2/data.qcow2 for 0, root.g<N>.qcow2 after)
      // and `disk_parent` the checkpoint that top is an overlay on (NULL: the image). A
      // checkpoint owns the frozen layers of generation `gen`, on `parent`'s. A row `taking`
      // is not yet a checkpoint: start-up finishes or drops it.
      R"sql(
ALTER TABLE workspaces ADD COLUMN disk_gen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN disk_parent TEXT;
CREATE TABLE checkpoints (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('manual', 'before_restore', 'rolling')),
  state TEXT NOT NULL CHECK (state IN ('taking', 'ready')),
  gen INTEGER NOT NULL,
  parent TEXT,
  memory INTEGER NOT NULL CHECK (memory IN (0, 1)),
  taken_while TEXT NOT NULL,          -- the workspace's state then: stopped, running, ...
  pause_ms INTEGER,                   -- how long the guest was paused (memory checkpoints)
  created_by TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  UNIQUE (workspace_id, name),
  UNIQUE (workspace_id, gen)
);
)sql",
      // 11: a restored checkpoint with memory (controller/workspace/checkpoints.cc): the
      // checkpoint whose memory the workspace's next start resumes instead of booting, committed
      // with the disks it matches and cleared when the workspace runs.
      "ALTER TABLE workspaces ADD COLUMN resume_memory TEXT;",
      // 12: forks (controller/workspace/forks.cc). A fork's first layers are overlays on
      // `from_checkpoint`'s (another workspace's, which cannot delete it while the fork lives);
      // `fresh_identity` is 1 until the fork's guest has taken an identity of its own.
      R"sql(
ALTER TABLE workspaces ADD COLUMN from_checkpoint TEXT;
ALTER TABLE workspaces ADD COLUMN fresh_identity INTEGER NOT NULL DEFAULT 0;
)sql",
      // 13: templates (controller/workspace/templates.cc): a tenant's checkpoint with memory
      // under a name. The checkpoint's workspace cannot delete it (nor itself) while it is one.
      R"sql(
CREATE TABLE templates (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  checkpoint_id TEXT NOT NULL,
  created_by TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  UNIQUE (tenant_id, name)
);
)sql",
      // 14: templates built from a setup script (templates.cc): building, ready or failed, the
      // build's request and the end of its output. Those of migration 13 are ready.
      R"sql(
ALTER TABLE templates ADD COLUMN state TEXT NOT NULL DEFAULT 'ready';
ALTER TABLE templates ADD COLUMN error TEXT NOT NULL DEFAULT '';
ALTER TABLE templates ADD COLUMN build TEXT NOT NULL DEFAULT '';
ALTER TABLE templates ADD COLUMN build_log TEXT NOT NULL DEFAULT '';
)sql",
      // 15: rolling checkpoints (checkpoints: {every, keep}); NULL: none.
      R"sql(
ALTER TABLE workspaces ADD COLUMN checkpoint_every_s INTEGER;
ALTER TABLE workspaces ADD COLUMN checkpoint_keep INTEGER;
)sql",
  };
  return kMigrations;
}

}  // namespace berth::store
