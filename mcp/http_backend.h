// The MCP Backend over berthd's HTTP API (docs/api.md) with one API key, on the typed client
// (common/client/berth_client.h): what `berth mcp` uses, and berthd's /mcp until it calls its
// workspace service directly. A key sees through it exactly what it sees through the API.
// Any thread, concurrently (each call opens its own connection).
#pragma once

#include <string>

#include "common/client/berth_client.h"
#include "mcp/agent_backend.h"

namespace berth::mcp {

class HttpBackend : public AgentBackend {
 public:
  explicit HttpBackend(client::BerthClient berth) : berth_(std::move(berth)) {}
  HttpBackend(Endpoint endpoint, std::string api_key);

  const client::BerthClient& berth() const { return berth_; }

  Result<v1::Me> WhoAmI(Deadline deadline) override;
  Result<v1::Workspace> CreateWorkspace(const v1::CreateWorkspace& request,
                                        Deadline deadline) override;
  Result<v1::Workspace> GetWorkspace(std::string_view ws, Deadline deadline) override;
  Result<WorkspaceList> ListWorkspaces(const v1::WorkspaceFilter& filter, size_t max,
                                       Deadline deadline) override;
  Result<v1::Workspace> StartWorkspace(std::string_view ws, Deadline deadline) override;
  Result<v1::Workspace> StopWorkspace(std::string_view ws, bool force, Deadline deadline) override;
  Result<v1::Workspace> HibernateWorkspace(std::string_view ws, Deadline deadline) override;
  Result<v1::Workspace> DeleteWorkspace(std::string_view ws, Deadline deadline) override;
  Result<v1::Workspace> WaitForState(std::string_view ws, v1::State state,
                                     Deadline deadline) override;

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
  Result<std::vector<v1::Event>> ListEvents(std::string_view ws, int64_t after, int limit,
                                            const client::BerthClient::EventSelect& select,
                                            Deadline deadline) override;
  Result<nlohmann::json> SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                    Deadline deadline) override;

 protected:
  // Through berthd: it checks the key's scope, wakes the workspace and adds its env.
  Result<AgentSession> OpenAgent(std::string_view ws, Access access, Deadline deadline) override;

 private:
  client::BerthClient berth_;
};

}  // namespace berth::mcp
