#include "mcp/http_backend.h"

#include <charconv>

#include <fmt/format.h>

#include "common/client/exec.h"
#include "common/client/files.h"
#include "common/client/ports.h"

namespace berth::mcp {
namespace {

using http::bhttp::verb;

// How long one read or write to berthd may take before the call is given up; each call's
// deadline cuts it shorter. Long: a call on a stopped workspace waits for it to boot, and a
// streamed exec or follow only hears keepalives (every 15 s) while nothing happens.
constexpr std::chrono::milliseconds kIoTimeout{300'000};
// Answers read whole are JSON documents and bounded file reads; nothing near this.
constexpr size_t kMaxResponseBytes = 64u << 20;

client::ClientOptions Options() {
  client::ClientOptions options;
  options.io_timeout = kIoTimeout;
  options.max_response_bytes = kMaxResponseBytes;
  return options;
}

}  // namespace

HttpBackend::HttpBackend(Endpoint endpoint, std::string api_key)
    : berth_(std::move(endpoint), std::move(api_key), {}, Options()) {}

Result<v1::Me> HttpBackend::WhoAmI(Deadline deadline) { return berth_.Me(deadline); }

Result<v1::Workspace> HttpBackend::CreateWorkspace(const v1::CreateWorkspace& request,
                                                   Deadline deadline) {
  return berth_.CreateWorkspace(request, deadline);
}

Result<v1::Workspace> HttpBackend::GetWorkspace(std::string_view ws, Deadline deadline) {
  return berth_.GetWorkspace(ws, deadline);
}

Result<WorkspaceList> HttpBackend::ListWorkspaces(const v1::WorkspaceFilter& filter, size_t max,
                                                  Deadline deadline) {
  auto listed = berth_.ListWorkspaces(filter, deadline, max);
  if (!listed) return Fail(listed.error());
  WorkspaceList out;
  out.workspaces = std::move(listed->workspaces);
  out.more = listed->more;
  return out;
}

Result<v1::Workspace> HttpBackend::StartWorkspace(std::string_view ws, Deadline deadline) {
  return berth_.StartWorkspace(ws, deadline);
}

Result<v1::Workspace> HttpBackend::StopWorkspace(std::string_view ws, bool force,
                                                 Deadline deadline) {
  return berth_.StopWorkspace(ws, force, deadline);
}

Result<v1::Workspace> HttpBackend::HibernateWorkspace(std::string_view ws, Deadline deadline) {
  return berth_.HibernateWorkspace(ws, deadline);
}

Result<v1::Workspace> HttpBackend::DeleteWorkspace(std::string_view ws, Deadline deadline) {
  return berth_.DeleteWorkspace(ws, deadline);
}

Result<v1::Workspace> HttpBackend::WaitForState(std::string_view ws, v1::State state,
                                                Deadline deadline) {
  return berth_.Wait(ws, state, deadline);
}

Result<AgentBackend::AgentSession> HttpBackend::OpenAgent(std::string_view ws, Access /*access*/,
                                                          Deadline deadline) {
  return AgentSession{berth_.Agent(ws, deadline), nullptr, nlohmann::json::object()};
}

Result<v1::Preview> HttpBackend::CreatePreview(std::string_view ws,
                                               const v1::CreatePreview& request,
                                               Deadline deadline) {
  return berth_.CreatePreview(ws, request, deadline);
}

Result<v1::Checkpoint> HttpBackend::CreateCheckpoint(std::string_view ws,
                                                     const v1::CreateCheckpoint& request,
                                                     Deadline deadline) {
  return berth_.CreateCheckpoint(ws, request, deadline);
}

Result<std::vector<v1::Checkpoint>> HttpBackend::ListCheckpoints(std::string_view ws,
                                                                 Deadline deadline) {
  return berth_.ListCheckpoints(ws, deadline);
}

Result<client::CheckpointRestore> HttpBackend::RestoreCheckpoint(std::string_view ws,
                                                                 std::string_view cp,
                                                                 const v1::RestoreCheckpoint& request,
                                                                 Deadline deadline) {
  return berth_.RestoreCheckpoint(ws, cp, request, deadline);
}

Result<v1::CheckpointDiff> HttpBackend::DiffCheckpoint(std::string_view ws, std::string_view cp,
                                                       std::string_view to, int max_entries,
                                                       Deadline deadline) {
  return berth_.DiffCheckpoint(ws, cp, to, max_entries, deadline);
}

Result<std::vector<v1::Template>> HttpBackend::ListTemplates(Deadline deadline) {
  return berth_.ListTemplates(deadline);
}

Result<v1::Workspace> HttpBackend::CreateFromTemplate(std::string_view name, std::string_view template_name,
                                                      Deadline deadline) {
  return berth_.CreateFromTemplate(name, template_name, deadline);
}

Result<client::DesktopShot> HttpBackend::DesktopScreenshot(std::string_view ws, std::string_view format,
                                                           double scale, Deadline deadline) {
  return berth_.DesktopScreenshot(ws, format, scale, deadline);
}

Result<nlohmann::json> HttpBackend::DesktopActions(std::string_view ws, const nlohmann::json& request,
                                                   Deadline deadline) {
  return berth_.DesktopActions(ws, request, deadline);
}

Result<nlohmann::json> HttpBackend::DesktopControl(std::string_view ws,
                                                   std::optional<std::chrono::seconds> wait_release,
                                                   Deadline deadline) {
  return berth_.DesktopControl(ws, wait_release, deadline);
}

Result<nlohmann::json> HttpBackend::DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                                     Deadline deadline) {
  return berth_.DesktopClipboard(ws, text, deadline);
}

Result<nlohmann::json> HttpBackend::DesktopRequestHuman(std::string_view ws, std::string_view reason,
                                                        std::chrono::seconds timeout, Deadline deadline) {
  return berth_.DesktopRequestHuman(ws, reason, timeout, deadline);
}

Result<std::vector<v1::Event>> HttpBackend::ListEvents(std::string_view ws, int64_t after, int limit,
                                                       const client::BerthClient::EventSelect& select,
                                                       Deadline deadline) {
  return berth_.ListEvents(ws, after, limit, deadline, select);
}

Result<nlohmann::json> HttpBackend::GetNetwork(std::string_view ws, Deadline deadline) {
  return berth_.GetNetwork(ws, deadline);
}

Result<nlohmann::json> HttpBackend::SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                               Deadline deadline) {
  return berth_.SetNetwork(ws, policy, deadline);
}

}  // namespace berth::mcp
