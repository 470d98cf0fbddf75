// What the MCP tools need from Berth, in Berth's words: workspaces and their lifecycle, the
// processes, files and ports of a workspace. The tools call only this; HttpBackend
// (http_backend.h) implements it over berthd's HTTP API for `berth mcp`, and berthd can serve
// its /mcp with an implementation that calls the workspace service directly and the agent
// through its link. FakeBackend (fake_backend.h) is the one the tools' unit tests use.
//
// One Backend acts for one caller (an API key, a principal): every call runs as that caller
// and sees exactly what the caller may see through the API, including its errors (not_found
// for another tenant's workspace, permission_denied for a read key that acts). A workspace
// (`ws`) is named by its id or its name. Calls that reach the agent wake a stopped or
// hibernated workspace first (unless its auto_start is off: failed_precondition), as the API
// does.
//
// Every call blocks until it is done or its deadline has passed (deadline_exceeded); nothing
// of a call outlives its deadline. Any thread may call any method, concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/client/berth_client.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/protocol/exec.h"
#include "common/protocol/files.h"
#include "common/protocol/ports.h"
#include "common/v1/admin.h"
#include "common/v1/checkpoint.h"
#include "common/v1/preview.h"
#include "common/v1/workspace.h"

namespace berth::mcp {

// Up to the asked number of workspaces, and whether more match past them.
struct WorkspaceList {
  WorkspaceList() = default;
  std::vector<v1::Workspace> workspaces;
  bool more = false;
};

// A process started in the background.
struct StartedProcess {
  StartedProcess() = default;
  int pid = 0;
  std::optional<std::string> tag;
};

// Where a read of a process's buffered output starts, per stream (bytes before an offset are
// skipped; bytes the agent no longer buffers are simply absent).
struct OutputRange {
  OutputRange() = default;
  uint64_t stdout_offset = 0;
  uint64_t stderr_offset = 0;
};

// Receives a command's events as they come (start, stdout/stderr data, end; keepalives may be
// left out). An error it returns stops the call (the process keeps running) and is returned.
using ExecEventFn = std::function<Status(const protocol::ExecEvent&)>;

// A piece of a file.
struct FileChunk {
  FileChunk() = default;
  std::string data;               // at most the bytes asked for
  uint64_t offset = 0;            // of data[0] in the file
  std::optional<uint64_t> size;   // the file's size, when known
  bool directory = false;         // the path is a directory: no data
};

struct WriteOptions {
  WriteOptions() = default;
  std::optional<uint32_t> mode;  // default: the existing file's, else 0644
  bool overwrite = true;         // false: already_exists when the file exists
};

class Backend {
 public:
  virtual ~Backend() = default;

  // --- the caller ---
  // Which tenant and key the calls run as; unauthenticated when the caller is refused.
  virtual Result<v1::Me> WhoAmI(Deadline deadline) = 0;

  // --- workspaces ---
  // Creates a workspace (it boots in the background: state creating). already_exists for a
  // name the tenant uses.
  virtual Result<v1::Workspace> CreateWorkspace(const v1::CreateWorkspace& request,
                                                Deadline deadline) = 0;
  virtual Result<v1::Workspace> GetWorkspace(std::string_view ws, Deadline deadline) = 0;
  // The first `max` workspaces that match, in id order (the API's), and whether there are more.
  virtual Result<WorkspaceList> ListWorkspaces(const v1::WorkspaceFilter& filter, size_t max,
                                               Deadline deadline) = 0;
  // The lifecycle actions answer the workspace in the state the action put it in (starting,
  // stopping, hibernating, deleting) without waiting for it to get further; an action that
  // makes no sense in the current state is failed_precondition.
  virtual Result<v1::Workspace> StartWorkspace(std::string_view ws, Deadline deadline) = 0;
  virtual Result<v1::Workspace> StopWorkspace(std::string_view ws, bool force,
                                              Deadline deadline) = 0;
  virtual Result<v1::Workspace> HibernateWorkspace(std::string_view ws, Deadline deadline) = 0;
  virtual Result<v1::Workspace> DeleteWorkspace(std::string_view ws, Deadline deadline) = 0;
  // Waits until the workspace is in `state`: failed_precondition when it settles in another
  // one (error, or stopped while waiting for running), deadline_exceeded at the deadline.
  virtual Result<v1::Workspace> WaitForState(std::string_view ws, v1::State state,
                                             Deadline deadline) = 0;

  // --- processes ---
  // Runs a command and streams its events to `on_event` until it ends: the end's status.
  // request.timeout_ms, when set, is the agent's limit for the process (it is killed then);
  // `deadline` is the call's.
  virtual Result<protocol::ExitStatus> RunCommand(std::string_view ws,
                                                  const protocol::ExecRequest& request,
                                                  const ExecEventFn& on_event,
                                                  Deadline deadline) = 0;
  // Starts a command in the background and answers at once.
  virtual Result<StartedProcess> StartProcess(std::string_view ws,
                                              const protocol::ExecRequest& request,
                                              Deadline deadline) = 0;
  // Processes started through Berth, running or ended.
  virtual Result<std::vector<protocol::ProcessInfo>> ListProcesses(std::string_view ws,
                                                                   Deadline deadline) = 0;
  // `id`: a pid or a tag.
  virtual Result<protocol::ProcessInfo> GetProcess(std::string_view ws, std::string_view id,
                                                   Deadline deadline) = 0;
  // Waits until the process has ended or the deadline comes, whichever is first, and answers
  // the process then (still running when the deadline came first; that is not an error).
  virtual Result<protocol::ProcessInfo> WaitForProcess(std::string_view ws, std::string_view id,
                                                       Deadline deadline) = 0;
  // The process's buffered output from `range` on, to `on_event`, without waiting for more.
  // The end status when the process has ended, nullopt while it runs.
  virtual Result<std::optional<protocol::ExitStatus>> ReadProcessOutput(
      std::string_view ws, std::string_view id, const OutputRange& range,
      const ExecEventFn& on_event, Deadline deadline) = 0;
  // `signal`: a name ("TERM", "SIGINT") or a number; the process alone gets it.
  virtual Result<protocol::ProcessInfo> SignalProcess(std::string_view ws, std::string_view id,
                                                      std::string_view signal,
                                                      Deadline deadline) = 0;
  // Kills the process's whole group.
  virtual Result<protocol::ProcessInfo> KillProcess(std::string_view ws, std::string_view id,
                                                    Deadline deadline) = 0;

  // --- files (absolute, normalised guest paths) ---
  virtual Result<protocol::FileInfo> StatPath(std::string_view ws, const std::string& path,
                                              Deadline deadline) = 0;
  // At most `max` bytes from `offset`. invalid_argument for an offset past the end (an empty
  // file read from 0 is an empty chunk).
  virtual Result<FileChunk> ReadFile(std::string_view ws, const std::string& path,
                                     uint64_t offset, uint64_t max, Deadline deadline) = 0;
  // Replaces the file atomically (readers never see half of it); missing parent directories
  // are created. The new file's stat.
  virtual Result<protocol::FileInfo> WriteFile(std::string_view ws, const std::string& path,
                                               std::string_view content,
                                               const WriteOptions& options,
                                               Deadline deadline) = 0;
  // failed_precondition when the path is not a directory.
  virtual Result<protocol::DirListing> ListDirectory(std::string_view ws, const std::string& path,
                                                     Deadline deadline) = 0;
  // A directory that is not empty needs `recursive`.
  virtual Status DeletePath(std::string_view ws, const std::string& path, bool recursive,
                            Deadline deadline) = 0;

  // --- ports ---
  virtual Result<std::vector<protocol::PortInfo>> ListPorts(std::string_view ws,
                                                            Deadline deadline) = 0;

  // --- previews (docs/api.md, "Previews") ---
  // A preview link to a port, as POST …/previews makes it: for a private one with `token`
  // and `link` (shown only here). Does not wake the workspace.
  virtual Result<v1::Preview> CreatePreview(std::string_view ws, const v1::CreatePreview& request,
                                            Deadline deadline) = 0;

  // --- checkpoints (docs/api.md, "Checkpoints") ---
  // As the API does them: the disks of a running, stopped or hibernated workspace, and the
  // memory of a running or hibernated one (failed_precondition otherwise, saying why). None
  // wakes a stopped workspace.
  virtual Result<v1::Checkpoint> CreateCheckpoint(std::string_view ws,
                                                  const v1::CreateCheckpoint& request,
                                                  Deadline deadline) = 0;
  // Newest first.
  virtual Result<std::vector<v1::Checkpoint>> ListCheckpoints(std::string_view ws,
                                                              Deadline deadline) = 0;
  // `cp`: an id or a name. With `request.undo`, the answer's `undo` is the checkpoint of the
  // state the restore left.
  virtual Result<client::CheckpointRestore> RestoreCheckpoint(std::string_view ws,
                                                              std::string_view cp,
                                                              const v1::RestoreCheckpoint& request,
                                                              Deadline deadline) = 0;
  // What changed from checkpoint `cp` (an id or a name) to checkpoint `to` or "current" (the
  // workspace now), as GET …/checkpoints/{cp}/diff answers it: files under /workspace and the
  // home directory, and Debian packages; at most `max_entries` (1..protocol::kMaxDiffEntries)
  // files per list (added, changed, removed), the counts going on. Unlike the calls above, the
  // guest compares, so a stopped or hibernated workspace is woken first (unless its auto_start
  // is off: failed_precondition); not_found for an unknown checkpoint, before any wake.
  virtual Result<v1::CheckpointDiff> DiffCheckpoint(std::string_view ws, std::string_view cp,
                                                    std::string_view to, int max_entries,
                                                    Deadline deadline) = 0;

  // --- templates (docs/api.md, "Forks") ---
  // The tenant's templates, by name.
  virtual Result<std::vector<v1::Template>> ListTemplates(Deadline deadline) = 0;
  // A workspace resumed from a template's memory (POST /v1/workspaces {name, template}); it is
  // creating, and running with the template's programs once its fork is given its identity.
  virtual Result<v1::Workspace> CreateFromTemplate(std::string_view name, std::string_view template_name,
                                                   Deadline deadline) = 0;

  // --- the desktop (desktop images; docs/api.md, "Desktop") ---
  // The screen now, scaled (0.05-1), as "png" or "jpeg"; locked during a private takeover.
  virtual Result<client::DesktopShot> DesktopScreenshot(std::string_view ws, std::string_view format,
                                                        double scale, Deadline deadline) = 0;
  // Computer-use actions, as POST …/desktop/actions takes them: {done, screen}; locked while a
  // person holds control.
  virtual Result<nlohmann::json> DesktopActions(std::string_view ws, const nlohmann::json& request,
                                                Deadline deadline) = 0;
  // Who holds the desktop; with `wait_release`, after waiting that long at most for a person
  // to hand back.
  virtual Result<nlohmann::json> DesktopControl(std::string_view ws,
                                                std::optional<std::chrono::seconds> wait_release,
                                                Deadline deadline) = 0;
  // The guest's clipboard: {text} without `text`; with it, puts it there: {bytes}. Reading is
  // locked during a private takeover, writing while a person holds control.
  virtual Result<nlohmann::json> DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                                  Deadline deadline) = 0;
  // Asks a person to take over (the reason shows on the desktop page) and waits up to
  // `timeout` for them to take over and hand back: the control state then, with `answered`
  // (they did) and `url` (the desktop page).
  virtual Result<nlohmann::json> DesktopRequestHuman(std::string_view ws, std::string_view reason,
                                                     std::chrono::seconds timeout, Deadline deadline) = 0;

  // --- the timeline: GET …/events with its filters (docs/api.md, "The timeline") ---
  virtual Result<std::vector<v1::Event>> ListEvents(std::string_view ws, int64_t after, int limit,
                                                    const client::BerthClient::EventSelect& select,
                                                    Deadline deadline) = 0;

  // --- the guest network: the API's answer of GET|PATCH …/network (docs/api.md, "Network") ---
  virtual Result<nlohmann::json> GetNetwork(std::string_view ws, Deadline deadline) = 0;
  // Replaces the egress policy; it applies to the running guest at once.
  virtual Result<nlohmann::json> SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                            Deadline deadline) = 0;
};

}  // namespace berth::mcp
