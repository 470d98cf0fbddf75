// A typed client of berthd's own v1 API (docs/api.md) over HTTP, on ApiClient: the one place
// where the CLI, MCP (`berth mcp`) and the tests page through lists, wait for a state, wake a
// workspace and read berthd's JSON (the wire types of common/v1/). Workspace-scoped agent calls
// (exec, processes, files, ports, tunnels) go through berthd with common/client's exec.h,
// files.h, ports.h and tunnel.h, on the scope Agent() gives.
//
// Every call blocks the calling thread and ends by its deadline, retries included: a request
// that berthd holds (POST …/wait, waking a workspace) waits up to the deadline, and a 503 with
// Retry-After (a workspace waking without the request held) is waited out and the request
// sent again while the deadline allows. An answer that is not what docs/api.md says is an
// `internal` error naming the route, never a throw.
//
// Thread safety: a BerthClient holds configuration only; any thread may call any method,
// concurrently. Each call opens its own connection.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/client/api_client.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/v1/admin.h"
#include "common/v1/checkpoint.h"
#include "common/v1/template.h"
#include "common/v1/events.h"
#include "common/v1/preview.h"
#include "common/v1/workspace.h"

namespace berth::client {

// A workspace's agent as reached through berthd: a client whose calls end by the deadline it
// was made with, and the scope ("{base}/v1/workspaces/{ws}") for common/client's typed calls,
// e.g. client::ExecStream(agent.client, agent.scope, request, on_event).
struct WorkspaceAgent {
  ApiClient client;
  std::string scope;
};

// Up to `max` workspaces of a list, and whether berthd has more past them.
struct WorkspaceListing {
  std::vector<v1::Workspace> workspaces;
  bool more = false;
};

// What a restore answers (POST …/checkpoints/{cp}/restore): the workspace as it is now, and the
// checkpoint taken of the state the restore left (absent when the restore was asked without
// one), which restoring undoes it.
struct CheckpointRestore {
  v1::Workspace workspace;
  std::optional<v1::Checkpoint> undo;
};

// A screenshot of a workspace's screen (GET …/desktop/screenshot).
struct DesktopShot {
  std::string bytes;
  std::string mime;
  int screen_width = 0;
  int screen_height = 0;
  int image_width = 0;
  int image_height = 0;
};

class BerthClient {
 public:
  // Workspaces per page when walking a whole list: berthd's default page.
  static constexpr int kPageSize = 100;

  // `base_path`: where berthd's API sits below the server's root ("" normally; "/berth" behind
  // a proxy that mounts it there). `options` set the step timeouts and the response cap; every
  // call gives its own deadline.
  BerthClient(Endpoint endpoint, std::string api_key, std::string base_path = {},
              ClientOptions options = {});

  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& api_key() const { return api_key_; }
  const std::string& base_path() const { return base_path_; }

  // "{base}/v1/…" for a path under the API root ("/v1/me").
  std::string Route(std::string_view path) const;
  // "{base}/v1/workspaces/{ws}{rest}", `ws` (an id or a name) percent-encoded.
  std::string WorkspaceRoute(std::string_view ws, std::string_view rest = {}) const;
  // A plain ApiClient for berthd with this key and `deadline` (for calls not typed here).
  ApiClient Http(Deadline deadline) const;

  // --- identity ---
  Result<v1::Health> Health(Deadline deadline) const;
  // Which tenant and key this is; unauthenticated for a refused key.
  Result<v1::Me> Me(Deadline deadline) const;

  // --- workspaces ---
  // `idempotency_key`: a retry with the same key answers the workspace made the first time
  // (`existed`, if given, then says so).
  Result<v1::Workspace> CreateWorkspace(const v1::CreateWorkspace& request, Deadline deadline,
                                        std::string_view idempotency_key = {},
                                        bool* existed = nullptr) const;
  Result<v1::Workspace> GetWorkspace(std::string_view ws, Deadline deadline) const;
  // One page of GET /v1/workspaces: at most `limit` (1..v1::kMaxPageSize) after `after`.
  Result<v1::WorkspacePage> ListWorkspacePage(const v1::WorkspaceFilter& filter, int limit,
                                              std::string_view after, Deadline deadline) const;
  // Every workspace that matches `filter`, page after page in id order, to `on_workspace`;
  // it returns false to stop (ForEach then answers true: it stopped with more unread, or
  // false: the list ended). A server whose `next` does not move forward is an error, so a
  // broken berthd cannot keep this going until the deadline.
  Result<bool> ForEachWorkspace(const v1::WorkspaceFilter& filter,
                                const std::function<bool(const v1::Workspace&)>& on_workspace,
                                Deadline deadline, int page_size = kPageSize) const;
  // The first `max` workspaces that match (all of them by default).
  Result<WorkspaceListing> ListWorkspaces(const v1::WorkspaceFilter& filter, Deadline deadline,
                                          size_t max = SIZE_MAX) const;
  Result<v1::Workspace> PatchWorkspace(std::string_view ws, const v1::PatchWorkspace& patch,
                                       Deadline deadline) const;
  // The lifecycle actions; each answers the workspace in its new state (stopping, ...).
  Result<v1::Workspace> DeleteWorkspace(std::string_view ws, Deadline deadline) const;
  Result<v1::Workspace> StartWorkspace(std::string_view ws, Deadline deadline) const;
  Result<v1::Workspace> StopWorkspace(std::string_view ws, bool force, Deadline deadline) const;
  Result<v1::Workspace> HibernateWorkspace(std::string_view ws, Deadline deadline) const;
  Result<v1::Workspace> RestartWorkspace(std::string_view ws, Deadline deadline) const;
  Result<v1::Workspace> KeepAlive(std::string_view ws, Deadline deadline) const;

  // Waits until the workspace is in `state` (POST …/wait, asked again while berthd's own
  // timeout runs out before the deadline). failed_precondition at once when it settles in
  // another state (error, or stopped while waiting for running); deadline_exceeded at the
  // deadline, saying where it is.
  Result<v1::Workspace> Wait(std::string_view ws, v1::State state, Deadline deadline) const;
  // Waits until GET answers 404 after a delete (there is no state to wait for). Asks again
  // every 250 ms, then less often. failed_precondition when it leaves `deleting` for another
  // state.
  Status WaitDeleted(std::string_view ws, Deadline deadline) const;
  // Makes sure the workspace runs before a stream opens (a session, a copy, a tunnel): a
  // booting one is waited for, a stopped or hibernated one started, unless its auto_start is
  // off (failed_precondition, saying how to start it). `note`, when given, hears what happens
  // ("starting api (stopped)…"). Answers the running workspace.
  Result<v1::Workspace> EnsureRunning(std::string_view ws, Deadline deadline,
                                      const std::function<void(std::string_view)>& note = {}) const;

  // --- events and usage ---
  // Which events (?type=, ?actor=, ?since=; docs/api.md), as the caller wrote them: lists
  // separated by commas ("exec,desktop_*", "key:k_1,system"), a time (ISO 8601 or unix
  // seconds). Empty: no filter. berthd checks them.
  struct EventSelect {
    std::string types;
    std::string actors;
    std::string since;
  };
  // Events after the event id `after`, at most `limit` (1..v1::kMaxEventPage).
  Result<std::vector<v1::Event>> ListEvents(std::string_view ws, int64_t after, int limit,
                                            Deadline deadline, const EventSelect& select = {}) const;
  // Events after `after`, then live ones as they happen, to `on_event` (keepalives are not
  // passed on); an error from it ends the stream and is returned. Ends when berthd ends the
  // stream or at the deadline (kNoDeadline: until then).
  Status FollowEvents(std::string_view ws, int64_t after,
                      const std::function<Status(const v1::Event&)>& on_event,
                      Deadline deadline, const EventSelect& select = {}) const;
  // Running time per workspace over [from, to) (unix seconds; default the last 30 days).
  Result<v1::Usage> GetUsage(std::optional<int64_t> from, std::optional<int64_t> to,
                             Deadline deadline) const;
  // The same with the times as the caller wrote them (ISO 8601 or unix seconds; "" for the
  // default), checked by berthd.
  Result<v1::Usage> GetUsage(std::string_view from, std::string_view to, Deadline deadline) const;

  // --- the desktop (docs/api.md, "Desktop") ---
  // GET …/desktop/screenshot: the image and the sizes its headers state.
  Result<DesktopShot> DesktopScreenshot(std::string_view ws, std::string_view format, double scale,
                                        Deadline deadline) const;
  // POST …/desktop/actions: the API's answer ({done, screen}).
  Result<nlohmann::json> DesktopActions(std::string_view ws, const nlohmann::json& request,
                                        Deadline deadline) const;
  // GET …/desktop/control, waiting up to `wait_release` for a person to hand back when set.
  Result<nlohmann::json> DesktopControl(std::string_view ws, std::optional<std::chrono::seconds> wait_release,
                                        Deadline deadline) const;
  // GET …/desktop/clipboard ({text}) without `text`; PUT …/desktop/clipboard {text} ({bytes})
  // with it.
  Result<nlohmann::json> DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                          Deadline deadline) const;
  // POST …/desktop/control/request {reason, timeout_s}: asks a person to take over and waits
  // up to `timeout` for their hand-back; the state then, with `answered` and `url`.
  Result<nlohmann::json> DesktopRequestHuman(std::string_view ws, std::string_view reason,
                                             std::chrono::seconds timeout, Deadline deadline) const;

  // --- the guest network (docs/api.md, "Network"): the API's answer, a JSON object ---
  Result<nlohmann::json> GetNetwork(std::string_view ws, Deadline deadline) const;
  // Replaces the egress policy; it applies to the running guest at once.
  Result<nlohmann::json> SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                    Deadline deadline) const;

  // --- previews (docs/api.md, "Previews") ---
  // Makes a preview link for a port (POST …/previews); for a private one the answer carries
  // `token` and `link`, which berthd shows only here.
  Result<v1::Preview> CreatePreview(std::string_view ws, const v1::CreatePreview& request,
                                    Deadline deadline) const;
  // The workspace's previews, newest first, with their status and last use (no tokens).
  Result<std::vector<v1::Preview>> ListPreviews(std::string_view ws, Deadline deadline) const;
  // Revokes one (it stops working at once); the preview as it is now (status "revoked").
  Result<v1::Preview> RevokePreview(std::string_view ws, std::string_view id,
                                    Deadline deadline) const;

  // --- checkpoints (docs/api.md, "Checkpoints") ---
  // Each call answers once berthd has done it (it runs behind the workspace's queued
  // operations). A running, stopped or hibernated workspace can be checkpointed (with memory:
  // running or hibernated); another state is failed_precondition. A checkpoint (`cp`) is named
  // by its id or its name.
  // Takes one (POST …/checkpoints): the checkpoint, with its size.
  Result<v1::Checkpoint> CreateCheckpoint(std::string_view ws, const v1::CreateCheckpoint& request,
                                          Deadline deadline) const;
  // The workspace's checkpoints, newest first.
  Result<std::vector<v1::Checkpoint>> ListCheckpoints(std::string_view ws, Deadline deadline) const;
  Result<v1::Checkpoint> GetCheckpoint(std::string_view ws, std::string_view cp,
                                       Deadline deadline) const;
  // Deletes one; the checkpoint as it was.
  Result<v1::Checkpoint> DeleteCheckpoint(std::string_view ws, std::string_view cp,
                                          Deadline deadline) const;
  // Brings the workspace's disks back to the checkpoint; with `request.undo` (the default)
  // berthd first checkpoints the state it leaves, and the answer names that checkpoint.
  Result<CheckpointRestore> RestoreCheckpoint(std::string_view ws, std::string_view cp,
                                              const v1::RestoreCheckpoint& request,
                                              Deadline deadline) const;

  // What changed from `cp` to checkpoint `to` or "current" (GET …/checkpoints/{cp}/diff): the
  // guest compares, so a stopped workspace is started first. `max_entries` per list.
  Result<v1::CheckpointDiff> DiffCheckpoint(std::string_view ws, std::string_view cp, std::string_view to,
                                            int max_entries, Deadline deadline) const;

  // --- forks and templates (docs/api.md, "Forks", "Templates") ---
  // New workspaces from a checkpoint (POST …/checkpoints/{cp}/fork): `count` of them, each
  // `creating` (wait for running).
  Result<std::vector<v1::Workspace>> ForkCheckpoint(std::string_view ws, std::string_view cp, std::string_view name,
                                                    int count, Deadline deadline) const;
  // A fork of a workspace as it is now (POST /v1/workspaces {name, from: {workspace}}): berthd
  // checkpoints it first (with memory when it runs or is hibernated).
  Result<v1::Workspace> ForkWorkspace(std::string_view name, std::string_view ws, Deadline deadline) const;
  // A workspace made from a template (POST /v1/workspaces {name, template}).
  Result<v1::Workspace> CreateFromTemplate(std::string_view name, std::string_view template_name,
                                           Deadline deadline) const;
  Result<v1::Template> CreateTemplate(const v1::CreateTemplate& request, Deadline deadline) const;
  Result<std::vector<v1::Template>> ListTemplates(Deadline deadline) const;
  Result<v1::Template> GetTemplate(std::string_view name, Deadline deadline) const;
  Result<v1::Template> DeleteTemplate(std::string_view name, Deadline deadline) const;

  // --- tenants and keys (admin scope) ---
  Result<v1::Tenant> CreateTenant(std::string_view name, Deadline deadline) const;
  Result<std::vector<v1::Tenant>> ListTenants(Deadline deadline) const;
  // A tenant (id or name) with its limits and use (operator scope).
  Result<v1::TenantDetail> GetTenant(std::string_view tenant, Deadline deadline) const;
  // Sets or resets (null) a tenant's limits; the tenant as it is now (operator scope).
  Result<v1::TenantDetail> SetTenantLimits(std::string_view tenant, const v1::TenantLimitsPatch& patch,
                                           Deadline deadline) const;
  Result<v1::NewKey> CreateKey(const v1::CreateKey& request, Deadline deadline) const;
  // `tenant`: an id or name; empty for every tenant's keys.
  Result<std::vector<v1::ApiKey>> ListKeys(std::string_view tenant, Deadline deadline) const;
  Status RevokeKey(std::string_view id, Deadline deadline) const;

  // --- through to the agent ---
  // The workspace's agent through berthd, for calls that end by `deadline` (kNoDeadline for
  // a port forwarder or an interactive session, which last as long as the user wants).
  WorkspaceAgent Agent(std::string_view ws, Deadline deadline) const;

 private:
  // JSON in, JSON out, with the deadline; `what` names the call in a malformed-answer error.
  Result<nlohmann::json> Call(http::bhttp::verb method, const std::string& target,
                              const std::optional<nlohmann::json>& body, Deadline deadline,
                              const Headers& headers = {}) const;
  ApiClient ClientFor(Deadline deadline) const;
  Result<v1::Workspace> Action(std::string_view ws, std::string_view action,
                               const std::optional<nlohmann::json>& body, Deadline deadline) const;

  Endpoint endpoint_;
  std::string api_key_;
  std::string base_path_;
  ClientOptions options_;
};

// An answer that did not parse as the wire type: `internal`, naming the call.
Error MalformedAnswer(std::string_view method, std::string_view target, const Error& error);

}  // namespace berth::client
