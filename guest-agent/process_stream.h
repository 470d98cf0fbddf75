// A process's output as NDJSON events on a chunked HTTP response, shared by the exec stream
// (POST /v1/exec, Accept: application/x-ndjson) and GET /v1/processes/{id}/output.
#pragma once

#include <chrono>

#include "common/http/server.h"
#include "guest-agent/process_instance.h"

namespace berth::agent {

// Keepalive after this much silence: well inside the client's and any proxy's read timeout, so
// a quiet process does not get its stream cut, and often enough to notice a gone client.
inline constexpr std::chrono::milliseconds kKeepaliveInterval{15'000};

// Writes stdout/stderr events (with "offset") from `reader` to `ex`, whose chunked response
// the caller has begun. With `follow`, keeps streaming live output (keepalive events while
// quiet) until the process ends, then writes the end event. Without, stops after what is
// buffered now, with an end event only if the process has ended. An error means the client is
// gone; the process is unaffected. Data that is not valid UTF-8 goes as data_b64; an
// incomplete UTF-8 sequence at the end of a read waits for the rest.
http::Task<Status> StreamOutputEvents(http::Exchange& ex, Process& process,
                                      Process::Reader& reader, bool follow);

// Writes one event line (with its newline) as a chunk.
http::Task<Status> WriteEvent(http::Exchange& ex, const protocol::ExecEvent& event);

}  // namespace berth::agent
