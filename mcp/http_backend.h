// The MCP Backend over berthd's HTTP API (docs/api.md) with one API key, on the typed client
// (common/client/berth_client.h): what `berth mcp` uses, and berthd's /mcp until it calls its
// workspace service directly. A key sees through it exactly what it sees through the API.
// Any thread, concurrently (each call opens its own connection).
#pragma once

#include <string>

#include "common/client/berth_client.h"
#include "mcp/backend.h"

namespace berth::mcp {

class HttpBackend : public Backend {
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

  Result<protocol::ExitStatus> RunCommand(std::string_view ws, const protocol::ExecRequest& request,
                                          const ExecEventFn& on_event, Deadline deadline) override;
  Result<StartedProcess> StartProcess(std::string_view ws, const protocol::ExecRequest& request,
                                      Deadline deadline) override;
  Result<std::vector<protocol::ProcessInfo>> ListProcesses(std::string_view ws,
                                                           Deadline deadline) override;
  Result<protocol::ProcessInfo> GetProcess(std::string_view ws, std::string_view id,
                                           Deadline deadline) override;
  Result<protocol::ProcessInfo> WaitForProcess(std::string_view ws, std::string_view id,
                                               Deadline deadline) override;
  Result<std::optional<protocol::ExitStatus>> ReadProcessOutput(std::string_view ws,
                                                                std::string_view id,
                                                                const OutputRange& range,
                                                                const ExecEventFn& on_event,
                                                                Deadline deadline) override;
  Result<protocol::ProcessInfo> SignalProcess(std::string_view ws, std::string_view id,
                                              std::string_view signal, Deadline deadline) override;
  Result<protocol::ProcessInfo> KillProcess(std::string_view ws, std::string_view id,
                                            Deadline deadline) override;

  Result<protocol::FileInfo> StatPath(std::string_view ws, const std::string& path,
                                      Deadline deadline) override;
  Result<FileChunk> ReadFile(std::string_view ws, const std::string& path, uint64_t offset,
                             uint64_t max, Deadline deadline) override;
  Result<protocol::FileInfo> WriteFile(std::string_view ws, const std::string& path,
                                       std::string_view content, const WriteOptions& options,
                                       Deadline deadline) override;
  Result<protocol::DirListing> ListDirectory(std::string_view ws, const std::string& path,
                                             Deadline deadline) override;
  Status DeletePath(std::string_view ws, const std::string& path, bool recursive,
                    Deadline deadline) override;

  Result<std::vector<protocol::PortInfo>> ListPorts(std::string_view ws, Deadline deadline) override;

 private:
  client::BerthClient berth_;
};

}  // namespace berth::mcp
