// Berth's state in SQLite, in Berth's words: tenants, API keys (hashes only), workspaces,
// their events and usage. Every workspace lookup is by (tenant, id or name). Blocking and
// internally serialized; call it off I/O threads.
#pragma once

#include <mutex>
#include <unordered_map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "controller/store/event_filter.h"
#include "controller/store/sqlite.h"
#include "controller/workspace/quota.h"
#include "controller/workspace/workspace.h"

namespace berth::store {

struct Tenant {
  std::string id;
  std::string name;
  int64_t created_at = 0;
};

struct ApiKey {
  std::string id;
  std::string tenant_id;
  std::string prefix;
  std::string scope;  // admin | write | read
  std::string name;
  int64_t created_at = 0;
  std::optional<int64_t> last_used_at;
  std::optional<int64_t> revoked_at;
};

struct Event {
  int64_t id = 0;
  std::string workspace_id;
  int64_t at = 0;
  std::string type;  // created, started, stopped, stopped_by_idle, woken, crashed, error, ...
  std::string message;
  nlohmann::json data = nlohmann::json::object();
  // Who caused it (event_filter.h, "Actors"): "system", an API key's id, "preview".
  std::string actor = std::string(kSystemActor);
};

// An event to write together with a change of its workspace (the overloads of InsertWorkspace,
// UpdateWorkspace and DeleteWorkspace that take one).
struct NewEvent {
  int64_t at = 0;
  std::string type;
  std::string message;
  nlohmann::json data = nlohmann::json::object();
  std::string actor = std::string(kSystemActor);
};

// A preview grant (controller/preview/): one port of one workspace, public or behind a token.
struct Preview {
  std::string id;
  std::string tenant_id;
  std::string workspace_id;
  int port = 0;
  bool is_public = false;
  std::string created_by;  // the API key's id
  int64_t created_at = 0;
  int64_t expires_at = 0;
  std::optional<int64_t> last_used_at;
  std::optional<int64_t> revoked_at;
};

// A web UI session (controller/api/sessions.h): signed in with `key_id`, for its tenant.
struct Session {
  std::string id;
  std::string tenant_id;
  std::string key_id;
  int64_t created_at = 0;
  int64_t expires_at = 0;
  int64_t last_used_at = 0;
  std::optional<int64_t> revoked_at;
};

// A checkpoint (controller/workspace/checkpoints.cc): the frozen disk layers of generation
// `gen` of its workspace, on `parent`'s. `state` is "taking" until the transaction that makes
// it the workspace's past (Store::CommitDisks) and "ready" from then on.
struct Checkpoint {
  std::string id;  // "cp_" + 16 hex characters
  std::string tenant_id;
  std::string workspace_id;
  std::string name;
  std::string kind = "manual";  // manual | before_restore | rolling
  std::string state = "taking";
  int64_t gen = 0;
  std::optional<std::string> parent;
  bool memory = false;
  std::string taken_while;  // the workspace's state when it was taken
  std::optional<int64_t> pause_ms;
  std::string created_by;  // the API key's id ("" for berthd's own)
  int64_t created_at = 0;
};

// A template (controller/workspace/templates.cc): a checkpoint with memory published under a
// name for the tenant; new workspaces are forks of it.
// One built from a setup script is "building" while its workspace (berthd's, made for it) runs
// the script, then "ready" with the checkpoint taken after it, or "failed" with why.
struct Template {
  std::string id;  // "tpl_" + 16 hex characters
  std::string tenant_id;
  std::string name;
  std::string workspace_id;  // the checkpoint's workspace
  std::string checkpoint_id;  // empty until a build is ready
  std::string created_by;
  int64_t created_at = 0;
  std::string state = "ready";  // building, ready, failed
  std::string error;            // a failed build's reason
  std::string build;            // a script build's request (JSON: script, start, ready, timeout_s); empty: none
  std::string build_log;        // the end of its output
};

// What one disk change does to the checkpoint rows, in the transaction that moves the
// workspace to its new generation (Store::CommitDisks).
struct DiskChange {
  std::vector<std::string> ready;                                     // taking -> ready
  std::vector<std::pair<std::string, std::optional<std::string>>> reparent;  // (id, new parent)
  std::vector<std::string> removed;                                   // rows deleted
  std::vector<std::pair<std::string, int64_t>> paused_ms;            // (id, the guest's pause)
};

struct WorkspaceFilter {
  std::optional<workspace::State> state;
  std::vector<std::pair<std::string, std::string>> labels;  // all must match
  std::string after_id;  // pagination cursor: ids sort by creation
  int limit = 100;
};

class Store {
 public:
  // Opens (or creates) the database at `path` and migrates it.
  static Result<std::unique_ptr<Store>> Open(const std::string& path);

  // --- tenants and keys ---
  Result<Tenant> CreateTenant(const std::string& name, int64_t now);
  Result<Tenant> GetTenant(const std::string& id_or_name);
  Result<std::vector<Tenant>> ListTenants();
  Status InsertKey(const ApiKey& key, const std::string& hash);
  // The key whose hash matches, if not revoked.
  Result<ApiKey> FindKeyByHash(const std::string& hash);
  Result<std::vector<ApiKey>> ListKeys(const std::optional<std::string>& tenant_id);
  // The key with this id, revoked or not; not_found otherwise.
  Result<ApiKey> GetKey(const std::string& id);
  Status RevokeKey(const std::string& id, int64_t now);
  Status TouchKey(const std::string& id, int64_t now);
  // The operator's limits for a tenant (none set: all nullopt). not_found for no such tenant.
  Result<workspace::LimitOverrides> GetTenantLimits(const std::string& tenant_id);
  // Replaces the tenant's limits with `limits` (nullopt: the default).
  Status SetTenantLimits(const std::string& tenant_id, const workspace::LimitOverrides& limits);

  // --- workspaces ---
  Status InsertWorkspace(const workspace::Workspace& ws);
  // By (tenant, id or name); not_found otherwise.
  Result<workspace::Workspace> GetWorkspace(const std::string& tenant_id,
                                            const std::string& id_or_name);
  Result<workspace::Workspace> GetWorkspaceById(const std::string& id);
  Result<std::vector<workspace::Workspace>> ListWorkspaces(const std::string& tenant_id,
                                                           const WorkspaceFilter& filter);
  Result<std::vector<workspace::Workspace>> ListAllWorkspaces();
  // Writes every mutable field of `ws` (state, error, settings, timestamps).
  Status UpdateWorkspace(const workspace::Workspace& ws);
  Status DeleteWorkspace(const std::string& id);
  // The same three, each with its event in one transaction: a crash (berthd killed between
  // two statements) never leaves a workspace's change without its line on the timeline, nor
  // the line without the change. Nothing is written when any part fails. Return the event.
  // A non-empty `idempotency_key` is stored with the new workspace (a key whose workspace was
  // deleted names the new one), so a retry after a crash never makes a second workspace.
  Result<Event> InsertWorkspace(const workspace::Workspace& ws, const NewEvent& event,
                                const std::string& idempotency_key = {});
  Result<Event> UpdateWorkspace(const workspace::Workspace& ws, const NewEvent& event);
  Result<Event> DeleteWorkspace(const std::string& id, const std::string& tenant_id,
                                const NewEvent& event);
  Result<std::vector<int64_t>> UsedVsockCids();

  // --- checkpoints (store_checkpoints.cc) ---
  // A new row (state "taking"); already_exists for a name the workspace has already used.
  Status InsertCheckpoint(const Checkpoint& checkpoint);
  // A workspace's checkpoints, newest first ("taking" ones included: the caller decides).
  Result<std::vector<Checkpoint>> ListCheckpoints(const std::string& workspace_id);
  // One of a workspace's checkpoints by id or name.
  Result<Checkpoint> GetCheckpoint(const std::string& workspace_id, const std::string& id_or_name);
  // Any workspace's checkpoint by id (a fork's source, whose workspace the fork names only
  // through it).
  Result<Checkpoint> FindCheckpoint(const std::string& id);
  // In one transaction: `ws` as UpdateWorkspace writes it and its disk_gen and disk_parent,
  // the rows `change` names, and `event`. Commit point of every checkpoint, restore and
  // checkpoint deletion: before it the old disks are the workspace's, after it the new.
  Result<Event> CommitDisks(const workspace::Workspace& ws, const DiskChange& change, const NewEvent& event);
  // Drops a row that never became a checkpoint (a "taking" one after a crash).
  Status DeleteCheckpoint(const std::string& id);
  // The workspace's uid in [first, first + count): the one it has, or else the lowest free one,
  // stored before this returns (a workspace keeps it until deleted; one created before network
  // isolation gets one on its next boot). not_found for an unknown id, resource_exhausted when
  // the range is full.
  Result<int64_t> AssignNetworkUid(const std::string& id, int64_t first, int64_t count);

  // --- templates (store_templates.cc) ---
  // already_exists for a name the tenant has.
  Status InsertTemplate(const Template& t);
  // By name; every tenant's for an empty `tenant_id`.
  Result<std::vector<Template>> ListTemplates(const std::string& tenant_id);
  Result<Template> GetTemplate(const std::string& tenant_id, const std::string& id_or_name);
  Status DeleteTemplate(const std::string& id);
  // A build's end: `state` ready (with its checkpoint) or failed (with `error`), and its log.
  // not_found when the template was deleted meanwhile.
  Status FinishTemplate(const std::string& id, const std::string& state, const std::string& checkpoint_id,
                        const std::string& error, const std::string& build_log);

  // --- previews (store_previews.cc) ---
  // `token_hash` empty for a public preview.
  Status InsertPreview(const Preview& preview, const std::string& token_hash);
  // A workspace's previews, newest first, revoked ones included.
  Result<std::vector<Preview>> ListPreviews(const std::string& tenant_id, const std::string& workspace_id);
  Result<Preview> GetPreview(const std::string& tenant_id, const std::string& workspace_id,
                             const std::string& id);
  // The token's preview if it is not revoked (expiry is the caller's check); not_found
  // otherwise.
  Result<Preview> FindPreviewByTokenHash(const std::string& token_hash);
  // The workspace's public previews of `port` that are not revoked.
  Result<std::vector<Preview>> FindPublicPreviews(const std::string& workspace_id, int port);
  // not_found when there is no such preview or it is revoked already.
  Status RevokePreview(const std::string& tenant_id, const std::string& workspace_id,
                       const std::string& id, int64_t now);
  Status TouchPreview(const std::string& id, int64_t now);

  // --- sessions (store_sessions.cc) ---
  // Also removes sessions that ended (expired or revoked) more than a day before `now`.
  Status InsertSession(const Session& session, const std::string& token_hash, int64_t now);
  // The token's session while neither it nor its key is revoked (expiry is the caller's
  // check); not_found otherwise.
  Result<Session> FindSessionByTokenHash(const std::string& token_hash);
  // Session `id` and its token's hash, on the same terms (the hash signs the session's preview
  // passes, controller/api/sessions.h).
  Result<std::pair<Session, std::string>> FindSessionWithHash(const std::string& id);
  // A tenant's sessions that are not revoked, newest first; only `key_id`'s when set.
  Result<std::vector<Session>> ListSessions(const std::string& tenant_id,
                                            const std::optional<std::string>& key_id);
  // not_found when the tenant has no such session that is not revoked (or, with `key_id`
  // set, none of that key's).
  Status RevokeSession(const std::string& tenant_id, const std::string& id,
                       const std::optional<std::string>& key_id, int64_t now);
  Status TouchSession(const std::string& id, int64_t now);

  // --- idempotent creates ---
  Result<std::optional<std::string>> FindIdempotencyKey(const std::string& tenant_id,
                                                        const std::string& key);
  Status InsertIdempotencyKey(const std::string& tenant_id, const std::string& key,
                              const std::string& workspace_id, int64_t now);

  // --- events and usage ---
  Result<Event> AddEvent(const std::string& workspace_id, const std::string& tenant_id,
                         int64_t at, const std::string& type, const std::string& message,
                         const nlohmann::json& data = nlohmann::json::object());
  Result<Event> AddEvent(const std::string& workspace_id, const std::string& tenant_id,
                         const NewEvent& event);
  // A workspace's events in order, those `filter` selects, after its cursor.
  Result<std::vector<Event>> ListEvents(const std::string& workspace_id, const EventFilter& filter);
  Result<std::vector<Event>> ListEvents(const std::string& workspace_id, int64_t after_id,
                                        int limit);
  // The timeline's bound: each workspace keeps its newest `keep` events (at least 100); older
  // ones are deleted in batches, so a workspace holds at most keep + kEventPruneBatch - 1.
  void SetEventRetention(int64_t keep);
  static constexpr int kEventPruneBatch = 64;
  // Opens a usage interval for a workspace that started running; closes the open one.
  Status OpenUsage(const workspace::Workspace& ws, int64_t now);
  Status CloseUsage(const std::string& workspace_id, int64_t now);
  // Seconds and vCPU-seconds per workspace of a tenant over [from, to).
  struct UsageRow {
    std::string workspace_id;
    std::optional<std::string> size;
    int64_t seconds = 0;
    int64_t vcpu_seconds = 0;
  };
  Result<std::vector<UsageRow>> Usage(const std::string& tenant_id, int64_t from, int64_t to,
                                      int64_t now);

  Database& database() { return db_; }

 private:
  explicit Store(Database db) : db_(std::move(db)) {}
  // The statements themselves; the caller holds mutex_ (and, for several, a Transaction).
  Status InsertWorkspaceLocked(const workspace::Workspace& ws);
  Status UpdateWorkspaceLocked(const workspace::Workspace& ws);
  Status DeleteWorkspaceLocked(const std::string& id);
  Result<Event> AddEventLocked(const std::string& workspace_id, const std::string& tenant_id,
                               const NewEvent& event);
  std::mutex mutex_;
  Database db_;
  int64_t events_keep_ = kDefaultEventsKept;
  // Events added per workspace since its timeline was last pruned (under mutex_).
  std::unordered_map<std::string, int> unpruned_;
};

}  // namespace berth::store
