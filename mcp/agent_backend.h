// The half of the MCP Backend that talks to a workspace's agent (processes, files, ports), once,
// for both ways of reaching it: through berthd's HTTP API (HttpBackend, `berth mcp`) and
// straight to the agent inside berthd (api::LocalBackend, berthd's /mcp). A subclass says how
// to reach the agent (OpenAgent); everything else is the same client code (common/client).
// Any thread, concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/client/berth_client.h"
#include "mcp/backend.h"

namespace berth::mcp {

class AgentBackend : public Backend {
 public:
  // What a call does to the workspace: reads need a read key, anything else a write key.
  enum class Access { kRead, kWrite };
  // A way to the agent for one call.
  struct AgentSession {
    client::WorkspaceAgent agent;
    // Held for as long as the call lasts (in berthd: the workspace's stream guard, which keeps
    // it awake and counts as activity). May be empty.
    std::shared_ptr<void> hold;
    // The workspace's env, put under each exec's own (in berthd; over HTTP berthd does it).
    nlohmann::json env = nlohmann::json::object();
    // The workspace's id (in berthd, for its timeline; empty over HTTP).
    std::string workspace_id;
  };
  // A command this backend ran or started, for berthd's timeline.
  struct Ran {
    const protocol::ExecRequest* request = nullptr;
    // How it went: the exit of a command run to its end, the pid of a background start, or
    // the error of a call that failed.
    const Result<protocol::ExitStatus>* exit = nullptr;
    std::optional<int64_t> pid;
    const Error* refused = nullptr;
    std::chrono::milliseconds took{0};
  };

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

 protected:
  // The agent of `ws` for a call that ends by `deadline`: permission_denied when the caller may
  // not do `access`, and a sleeping workspace woken first (unless auto_start is off).
  virtual Result<AgentSession> OpenAgent(std::string_view ws, Access access, Deadline deadline) = 0;
  // What a call did, for the workspace's timeline, once the agent answered: over HTTP berthd's
  // routes record it, so these do nothing; berthd's in-process backend records it. `type` and
  // `details` as controller/api/agent_events.h's file events.
  virtual void NoteRan(const AgentSession& session, const Ran& ran) {
    (void)session;
    (void)ran;
  }
  virtual void NoteFileChange(const AgentSession& session, std::string_view type, const std::string& path,
                              const nlohmann::json& details) {
    (void)session;
    (void)type;
    (void)path;
    (void)details;
  }
};

// `request` with `env` under its own env (the request's variables win).
protocol::ExecRequest WithEnv(const protocol::ExecRequest& request, const nlohmann::json& env);

}  // namespace berth::mcp
