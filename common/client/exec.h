// Typed client calls for exec, process and session endpoints, on top of ApiClient. `scope` is
// the prefix the API lives under: "/v1" for berth-agent, "/v1/workspaces/{id}" for berthd.
// Blocking; call from one thread per ApiClient call (each call opens its own connection).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/client/api_client.h"
#include "common/protocol/exec.h"

namespace berth::client {

using ExecEventCallback = std::function<Status(const protocol::ExecEvent&)>;

// POST {scope}/exec, waiting for the result. A command that runs long needs a client whose
// io_timeout is above its run time (nothing is sent until the end).
Result<protocol::ExecResult> Exec(ApiClient& client, std::string_view scope,
                                  const protocol::ExecRequest& request);

// POST {scope}/exec as an NDJSON stream: every event goes to `on_event` (start, stdout/stderr
// with decoded data, keepalive, end); returns the end event's status. An error returned by
// `on_event` disconnects (the process keeps running on the agent) and is returned.
Result<protocol::ExitStatus> ExecStream(ApiClient& client, std::string_view scope,
                                        const protocol::ExecRequest& request,
                                        const ExecEventCallback& on_event);

struct Started {
  int pid = 0;
  std::optional<std::string> tag;
};
// POST {scope}/exec with background: true (202).
Result<Started> StartBackground(ApiClient& client, std::string_view scope,
                                protocol::ExecRequest request);

Result<std::vector<protocol::ProcessInfo>> ListProcesses(ApiClient& client, std::string_view scope);
// `id` is a pid or a tag.
Result<protocol::ProcessInfo> GetProcess(ApiClient& client, std::string_view scope,
                                         std::string_view id);

struct OutputOptions {
  bool follow = false;
  uint64_t stdout_offset = 0;  // skip stdout bytes before this offset
  uint64_t stderr_offset = 0;
};
// GET {scope}/processes/{id}/output: buffered output (then live with follow) to `on_event`.
// Returns the end status when an end event came (always with follow, unless disconnected),
// nullopt when the stream ended without one (not following a running process).
Result<std::optional<protocol::ExitStatus>> ProcessOutput(ApiClient& client, std::string_view scope,
                                                          std::string_view id,
                                                          const OutputOptions& options,
                                                          const ExecEventCallback& on_event);

// POST {scope}/processes/{id}/stdin; `close` closes stdin after the data.
Status SendStdin(ApiClient& client, std::string_view scope, std::string_view id,
                 std::string_view data, bool close = false);
// POST {scope}/processes/{id}/signal; `signal` is a name ("TERM", "SIGINT") or a number.
Result<protocol::ProcessInfo> Signal(ApiClient& client, std::string_view scope,
                                     std::string_view id, std::string_view signal);
// DELETE {scope}/processes/{id}: kills the process group, answers the process.
Result<protocol::ProcessInfo> Kill(ApiClient& client, std::string_view scope, std::string_view id);

// An interactive session over {scope}/exec/ws. Used from one thread.
class ExecSession {
 public:
  struct Event {
    enum class Kind { kStdout, kStderr, kEnd, kError };
    Event() = default;
    Kind kind = Kind::kStdout;
    std::string data;          // kStdout/kStderr
    protocol::ExitStatus exit;  // kEnd
    Error error;                // kError
  };

  int pid() const { return pid_; }
  const std::optional<std::string>& tag() const { return tag_; }

  Status WriteStdin(std::string_view data);
  Status Resize(uint16_t cols, uint16_t rows);
  Status Signal(std::string_view signal);
  Status CloseStdin();
  // The next event; deadline_exceeded when nothing comes within `timeout` (the session is
  // unusable afterwards: a WebSocket read cannot be resumed), unavailable once closed.
  Result<Event> ReadEvent(std::chrono::milliseconds timeout);
  // Reads until the end event, appending output to `out` (if given). The exit status.
  Result<protocol::ExitStatus> WaitEnd(std::chrono::milliseconds timeout, std::string* out = nullptr);
  // Closes the WebSocket; the process keeps running if it has not ended.
  Status Close();

 private:
  friend Result<std::unique_ptr<ExecSession>> OpenSession(ApiClient&, std::string_view,
                                                          const protocol::SessionStart&);
  friend Result<std::unique_ptr<ExecSession>> AttachSession(ApiClient&, std::string_view,
                                                            std::string_view);
  explicit ExecSession(std::unique_ptr<WebSocketConnection> ws) : ws_(std::move(ws)) {}
  Status ReadHello(std::string_view expected_type);
  std::unique_ptr<WebSocketConnection> ws_;
  int pid_ = 0;
  std::optional<std::string> tag_;
};

// Starts a session ({"type":"start",...}) and waits for "started".
Result<std::unique_ptr<ExecSession>> OpenSession(ApiClient& client, std::string_view scope,
                                                 const protocol::SessionStart& start);
// Attaches to a running (or finished) process by pid or tag: its buffered output comes first.
Result<std::unique_ptr<ExecSession>> AttachSession(ApiClient& client, std::string_view scope,
                                                   std::string_view id);

}  // namespace berth::client
