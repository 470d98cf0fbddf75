// GET /v1/exec/ws: an interactive session over a WebSocket, with or without a PTY.
//
// Start: the client's first text frame is {"type":"start", cmd, env, cwd, user, tag,
// pty: {"cols","rows"}} (cmd defaults to the user's login shell; no pty means pipes); the server
// answers {"type":"started","pid":N,"tag":...}. Attach: ?attach=PID_OR_TAG, no start frame; the
// server answers {"type":"attached","pid":N,"tag":...}, replays the buffered output, then
// streams live.
//
// Binary frames carry a one-byte channel prefix (as Kubernetes exec): 0 stdin (client→server),
// 1 stdout, 2 stderr (a PTY has only 1). Text frames carry JSON control from the client:
// {"type":"resize","cols","rows"}, {"type":"signal","signal":"INT"} (to the process group),
// {"type":"close_stdin"} (EOF: ^D on a PTY, closing the pipe otherwise). The server sends
// {"type":"error","error":{code,message}} for a control message it could not apply, and at the
// end {"type":"end","exit_code","signal","duration_ms","timed_out"}, then closes normally. A
// session that fails to start gets the error message and a policy-violation close.
//
// Output is read from the process only as fast as the client takes it. If the WebSocket
// drops, the process keeps running in the process table and can be attached again.
#pragma once

#include "common/http/server.h"
#include "guest-agent/api_context.h"

namespace berth::agent {

http::Task<void> ServeExecSession(http::Exchange& ex, const ApiContext& ctx);

}  // namespace berth::agent
