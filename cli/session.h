// Interactive exec sessions over the exec WebSocket ({scope}/exec/ws), for `berth exec` (pipes)
// and `berth shell` (a PTY): local stdin goes up as it is typed or piped, remote stdout and
// stderr come down as they are produced, local signals and terminal resizes are forwarded.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "common/client/api_client.h"
#include "common/protocol/exec.h"

namespace berth::cli {

struct SessionOptions {
  SessionOptions() = default;
  bool forward_stdin = true;  // read in_fd and send it; its EOF closes the remote stdin
  bool pty = false;           // a PTY session: SIGWINCH becomes a resize of the remote PTY
  // Sends SIGKILL to the remote process after this long (its exit status is then 137).
  std::optional<std::chrono::milliseconds> timeout;
  int in_fd = 0;
  int out_fd = 1;
  int err_fd = 2;
};

// Opens the WebSocket, sends the start message and waits for "started" (an "error" answer is
// returned as its Error).
Result<std::unique_ptr<client::WebSocketConnection>> OpenExecSession(
    client::ApiClient& client, std::string_view scope, const protocol::SessionStart& start);

// Pumps a started session until the remote process ends and returns how it ended. SIGINT,
// SIGTERM and SIGHUP are forwarded to the remote process; a third one gives up at once (the
// exit status is then 128 + the signal). A local stdout that is gone (EPIPE) sends SIGPIPE to
// the remote process, as a local pipeline would. Blocks the calling thread; uses a helper
// thread for stdin (which works for files, pipes and terminals alike).
Result<protocol::ExitStatus> RunSession(client::WebSocketConnection& ws,
                                        const SessionOptions& options);

}  // namespace berth::cli
