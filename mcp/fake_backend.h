// A Backend in memory for the tools' unit tests: workspaces with names, states and labels, a
// scripted command runner, background processes with buffered output, files, ports, canned
// failures, and a record of the requests made. Thread-safe.
//
// Its lifecycle is simple on purpose: an action moves a workspace to the transitional state
// (creating, starting, stopping, hibernating) and WaitForState completes the transition, as a
// boot or shutdown that takes no time. Deletion is at once. Processes end when a test says so.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mcp/backend.h"

namespace berth::mcp {

class FakeBackend : public Backend {
 public:
  // How long the guest "paused" for each checkpoint with memory: a fixed value, so that tests
  // can look for it in what the tools say.
  static constexpr int64_t kFakePauseMs = 312;

  FakeBackend();

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
  // A preview as berthd would make it (url http://{port}-{name}.preview.localhost:8080/, a
  // token and link for a private one, 24 h by default), created at 1'700'000'000.
  Result<v1::Preview> CreatePreview(std::string_view ws, const v1::CreatePreview& request,
                                    Deadline deadline) override;
  // Checkpoints as berthd keeps them, of a running or stopped workspace, with memory of a
  // running one only (failed_precondition with berthd's words otherwise): ids cp_fake1,
  // cp_fake2, ..., 4096 bytes each, created at 1'700'000'000 plus their number, pause_ms
  // kFakePauseMs with memory. A restore with undo takes a "before_restore" one first; one of a
  // disk checkpoint wants a stopped workspace; one of a checkpoint with memory takes a running
  // or stopped one, keeps a running one's memory in its undo, and leaves it starting.
  Result<v1::Checkpoint> CreateCheckpoint(std::string_view ws, const v1::CreateCheckpoint& request,
                                          Deadline deadline) override;
  Result<std::vector<v1::Checkpoint>> ListCheckpoints(std::string_view ws, Deadline deadline) override;
  Result<client::CheckpointRestore> RestoreCheckpoint(std::string_view ws, std::string_view cp,
                                                      const v1::RestoreCheckpoint& request,
                                                      Deadline deadline) override;
  // The diff SetDiffForTest gave (CannedDiff() until then) from checkpoint `cp` of `ws` (id or
  // name) to "current" or another of its checkpoints, both named by id in the answer: not_found
  // for an unknown one, before a stopped workspace is woken (as berthd does); each file list cut
  // to `max_entries`, marked truncated, the counts kept, as the guest cuts them.
  Result<v1::CheckpointDiff> DiffCheckpoint(std::string_view ws, std::string_view cp, std::string_view to,
                                            int max_entries, Deadline deadline) override;
  // Templates AddTemplateForTest added; a workspace from one is made as CreateWorkspace makes
  // one, with the template's image, and is running.
  Result<std::vector<v1::Template>> ListTemplates(Deadline deadline) override;
  Result<v1::Workspace> CreateFromTemplate(std::string_view name, std::string_view template_name,
                                           Deadline deadline) override;
  void AddTemplateForTest(v1::Template t);
  // The policy as stored (isolated: true, no refusals).
  Result<nlohmann::json> GetNetwork(std::string_view ws, Deadline deadline) override;
  // The events AddEventForTest added to `ws`; `select.types` as exact types only.
  Result<std::vector<v1::Event>> ListEvents(std::string_view ws, int64_t after, int limit,
                                            const client::BerthClient::EventSelect& select,
                                            Deadline deadline) override;
  void AddEventForTest(const std::string& ws, v1::Event event);
  Result<nlohmann::json> SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                    Deadline deadline) override;
  // A 1280x800 screen whose image is `scale` of it (the bytes: "PNG" or "JPEG" and the
  // sizes, no real image).
  Result<client::DesktopShot> DesktopScreenshot(std::string_view ws, std::string_view format, double scale,
                                                Deadline deadline) override;
  // Checks only that the request is an object: {done: its action count, screen 1280x800}.
  Result<nlohmann::json> DesktopActions(std::string_view ws, const nlohmann::json& request,
                                        Deadline deadline) override;
  // The agent holds it.
  Result<nlohmann::json> DesktopControl(std::string_view ws, std::optional<std::chrono::seconds> wait_release,
                                        Deadline deadline) override;
  // A person answers at once with the note "done: <reason>" (reason "nobody": nobody comes).
  Result<nlohmann::json> DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                          Deadline deadline) override;
  Result<nlohmann::json> DesktopRequestHuman(std::string_view ws, std::string_view reason, std::chrono::seconds timeout,
                                             Deadline deadline) override;

  // --- test controls ---
  // The last actions request, as the tools built it.
  std::optional<nlohmann::json> LastActionsForTest() const;
  // A workspace as if made earlier, in `state`; its id.
  std::string AddWorkspaceForTest(const std::string& name, v1::State state,
                                  v1::StringMap labels = {});
  // What RunCommand does: gets the request and the event sink, answers the end status. The
  // default sends start (pid 100), the command's argv joined by spaces on stdout, and end 0.
  using CommandScript = std::function<Result<protocol::ExitStatus>(
      const protocol::ExecRequest& request, const ExecEventFn& on_event)>;
  void ScriptCommandsForTest(CommandScript script);
  // Output for a background process, and its end.
  void AppendOutputForTest(std::string_view ws, int pid, std::string_view stdout_data,
                           std::string_view stderr_data = {});
  void EndProcessForTest(std::string_view ws, int pid, int exit_code);
  void SetPortsForTest(std::string_view ws, std::vector<protocol::PortInfo> ports);
  // The next call of `method` ("CreateWorkspace", "RunCommand", ...) fails with `error`.
  void FailNextForTest(const std::string& method, Error error);
  // Every call so far, by method name, in order.
  std::vector<std::string> CallsForTest() const;
  // The last create request, as the tools built it.
  std::optional<v1::CreateWorkspace> LastCreateForTest() const;
  // The last preview request, as the tools built it.
  std::optional<v1::CreatePreview> LastPreviewForTest() const;
  // The last diff asked for, as the tools asked it.
  struct DiffCall {
    std::string ws, cp, to;
    int max_entries = 0;
  };
  std::optional<DiffCall> LastDiffForTest() const;
  // What DiffCheckpoint answers from now on.
  void SetDiffForTest(protocol::DiffResult result);
  // The default answer: under /workspace and /home/agent, added a directory /workspace/app (3
  // entries, 2048 bytes) and a file /workspace/notes.txt (12 bytes), changed
  // /workspace/README.md (300 bytes), removed /home/agent/old.log (10 bytes); packages curl
  // 8.5.0 installed, libc6 2.36-9 -> 2.36-10 changed, nano 7.2-1 removed; took 420 ms.
  static protocol::DiffResult CannedDiff();
  // The deadline the last call was given.
  Deadline LastDeadlineForTest() const;
  // The file's content, if it exists.
  std::optional<std::string> FileForTest(std::string_view ws, const std::string& path) const;

 private:
  struct Process {
    protocol::ProcessInfo info;
    std::string stdout_data;
    std::string stderr_data;
  };
  struct File {
    std::string content;
    uint32_t mode = 0644;
    int64_t mtime_ns = 0;
  };
  struct Space {
    v1::Workspace ws;
    std::map<int, Process> processes;
    std::map<std::string, File> files;  // absolute paths; directories are implied
    std::vector<protocol::PortInfo> ports;
    v1::NetworkPolicy network;
    std::vector<v1::Event> events;
    std::vector<v1::Checkpoint> checkpoints;  // oldest first
    std::optional<std::string> disk_parent;   // the checkpoint the disks stand on
  };
  // A new checkpoint of the space's disks (and memory), which then stand on it. Under mutex_.
  v1::Checkpoint CheckpointLocked(Space& space, std::string name, std::string kind, bool memory);
  // Records the call and returns its canned failure, if any. Under mutex_.
  Status EnterLocked(const std::string& method, Deadline deadline);
  Result<Space*> FindLocked(std::string_view ws);
  Result<Process*> FindProcessLocked(Space& space, std::string_view id);
  // `ws` found and running (the agent calls): a stopped one is woken, as berthd does.
  Result<Space*> AgentLocked(std::string_view ws);
  bool IsDirectoryLocked(const Space& space, const std::string& path) const;

  mutable std::mutex mutex_;
  std::map<std::string, Space> spaces_;  // by id
  std::string clipboard_;                 // the desktop's, one for every workspace
  std::optional<nlohmann::json> last_actions_;
  int next_id_ = 1;
  int next_pid_ = 1000;
  int64_t clock_ns_ = 1'700'000'000'000'000'000;
  CommandScript script_;
  std::map<std::string, Error> failures_;
  std::vector<std::string> calls_;
  std::optional<v1::CreateWorkspace> last_create_;
  std::optional<v1::CreatePreview> last_preview_;
  std::optional<DiffCall> last_diff_;
  protocol::DiffResult diff_ = CannedDiff();
  int next_preview_ = 1;
  int next_checkpoint_ = 1;
  std::vector<v1::Template> templates_;
  Deadline last_deadline_{};
};

}  // namespace berth::mcp
