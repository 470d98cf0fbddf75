// The MCP Backend inside berthd (its /mcp): the workspace service directly, and each
// workspace's agent through its link, as one caller (the principal of the key the MCP session
// was opened with). It does what the HTTP routes do for that caller and nothing more: the key's
// scope is checked on every call, a sleeping workspace is woken (unless auto_start is off),
// each agent call holds a stream guard (activity, and a reason in `awake`), and an exec gets
// the workspace's env under its own. No loopback HTTP, and no second thread pool to keep it
// from deadlocking itself: the service's calls run on the service's own threads.
//
// Blocking, like every Backend: call it from the MCP pool, never from an I/O thread or a
// service strand. Any thread, concurrently.
#pragma once

#include <atomic>
#include <memory>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "controller/api/agent_events.h"
#include "controller/api/auth.h"
#include "controller/desktop/desktop_service.h"
#include "controller/preview/preview_service.h"
#include "controller/workspace/service.h"
#include "mcp/agent_backend.h"

namespace berth::api {

// What berthd's shutdown needs to know of the MCP calls in flight: Close() ends every call
// waiting on the service at once (Sync returns "shutting down"), and WaitIdle waits a while for
// the calls talking to an agent (Enter/Leave) to end. Every method may be called from any
// thread; nothing polls.
class McpCalls {
 public:
  // False once closing: the call must not start.
  bool Enter();
  void Leave();
  void Close();
  bool closing() const;
  // True if no call is in an agent exchange by `within`.
  bool WaitIdle(std::chrono::milliseconds within);
  int running() const;

  // Waits until `ready()` (checked under the lock; whoever makes it true calls Notify) or
  // closing. True if ready.
  bool WaitUntil(const std::function<bool()>& ready);
  void Notify();

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool closing_ = false;
  int running_ = 0;
};

class LocalBackend : public mcp::AgentBackend {
 public:
  // `io`: where the service's asynchronous calls resume (berthd's I/O context). `previews`:
  // berthd's preview grants and links. All must outlive the backend.
  // `desktop` and `pool` (berthd's desktop and its API pool): the desktop tools; without
  // them those calls are failed_precondition. `web_origin`: where the MCP client reached
  // berthd ("http://host:port"), for the desktop page's link request_human gives.
  LocalBackend(workspace::WorkspaceService& service, preview::PreviewService& previews,
               boost::asio::io_context& io, Principal principal, std::shared_ptr<McpCalls> calls,
               desktop::DesktopService* desktop = nullptr, boost::asio::thread_pool* pool = nullptr,
               std::string web_origin = {});

  Result<v1::Me> WhoAmI(Deadline deadline) override;
  Result<v1::Workspace> CreateWorkspace(const v1::CreateWorkspace& request, Deadline deadline) override;
  Result<v1::Workspace> GetWorkspace(std::string_view ws, Deadline deadline) override;
  Result<mcp::WorkspaceList> ListWorkspaces(const v1::WorkspaceFilter& filter, size_t max,
                                            Deadline deadline) override;
  Result<v1::Workspace> StartWorkspace(std::string_view ws, Deadline deadline) override;
  Result<v1::Workspace> StopWorkspace(std::string_view ws, bool force, Deadline deadline) override;
  Result<v1::Workspace> HibernateWorkspace(std::string_view ws, Deadline deadline) override;
  Result<v1::Workspace> DeleteWorkspace(std::string_view ws, Deadline deadline) override;
  Result<v1::Workspace> WaitForState(std::string_view ws, v1::State state, Deadline deadline) override;
  // Through the daemon's PreviewService, as POST …/previews does (write scope).
  Result<v1::Preview> CreatePreview(std::string_view ws, const v1::CreatePreview& request,
                                    Deadline deadline) override;
  Result<v1::Checkpoint> CreateCheckpoint(std::string_view ws, const v1::CreateCheckpoint& request,
                                          Deadline deadline) override;
  Result<std::vector<v1::Checkpoint>> ListCheckpoints(std::string_view ws, Deadline deadline) override;
  Result<client::CheckpointRestore> RestoreCheckpoint(std::string_view ws, std::string_view cp,
                                                      const v1::RestoreCheckpoint& request,
                                                      Deadline deadline) override;
  Result<v1::CheckpointDiff> DiffCheckpoint(std::string_view ws, std::string_view cp, std::string_view to,
                                            int max_entries, Deadline deadline) override;
  Result<std::vector<v1::Template>> ListTemplates(Deadline deadline) override;
  Result<v1::Workspace> CreateFromTemplate(std::string_view name, std::string_view template_name,
                                           Deadline deadline) override;
  // Through controller/desktop/agent_hands.h, as the desktop routes do.
  Result<client::DesktopShot> DesktopScreenshot(std::string_view ws, std::string_view format, double scale,
                                                Deadline deadline) override;
  Result<nlohmann::json> DesktopActions(std::string_view ws, const nlohmann::json& request,
                                        Deadline deadline) override;
  Result<nlohmann::json> DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                          Deadline deadline) override;
  Result<nlohmann::json> DesktopRequestHuman(std::string_view ws, std::string_view reason, std::chrono::seconds timeout,
                                             Deadline deadline) override;
  Result<nlohmann::json> DesktopControl(std::string_view ws, std::optional<std::chrono::seconds> wait_release,
                                        Deadline deadline) override;
  Result<nlohmann::json> GetNetwork(std::string_view ws, Deadline deadline) override;
  // The filters checked as GET …/events checks them.
  Result<std::vector<v1::Event>> ListEvents(std::string_view ws, int64_t after, int limit,
                                            const client::BerthClient::EventSelect& select,
                                            Deadline deadline) override;
  Result<nlohmann::json> SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                    Deadline deadline) override;

 protected:
  Result<AgentSession> OpenAgent(std::string_view ws, Access access, Deadline deadline) override;
  // On the workspace's timeline, by this session's key, as the routes record theirs.
  void NoteRan(const AgentSession& session, const Ran& ran) override;
  void NoteFileChange(const AgentSession& session, std::string_view type, const std::string& path,
                      const nlohmann::json& details) override;

 private:
  void Record(const std::string& workspace_id, const EventDraft& event);
  Status Require(Scope needed) const;
  // The workspace, for a desktop call needing `needed`, woken.
  Result<workspace::Workspace> AwakeForDesktop(std::string_view ws, Scope needed, Deadline deadline);
  // Runs one of the service's asynchronous calls to its end from this (blocking) thread.
  template <class T>
  T Sync(workspace::Task<T> task);
  v1::Workspace Wire(const workspace::Workspace& ws) const;

  workspace::WorkspaceService& service_;
  preview::PreviewService& previews_;
  boost::asio::io_context& io_;
  Principal principal_;
  std::shared_ptr<McpCalls> calls_;
  desktop::DesktopService* desktop_ = nullptr;
  boost::asio::thread_pool* pool_ = nullptr;
  std::string web_origin_;
};

}  // namespace berth::api
