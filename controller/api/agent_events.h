// The timeline's record of what goes through the agent's routes (agent_routes.cc): each exec
// with its command, how it ended and how long it took; each interactive session; each file
// written, moved, created or deleted through the API. Reads go unrecorded. Pure: built from
// what berthd saw of the exchange (agent_client::ProxyTrace), never from anything else the
// guest says. The guest's part (an exit code, a pid) is as the guest told it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/http/server.h"
#include "common/protocol/exec.h"
#include "controller/agent_client/agent_proxy.h"

namespace berth::api {

// What the request was: agent_routes.cc's kind, its method, and for files the path in the
// workspace and the query's op, to, recursive and archive.
struct AgentCall {
  std::string kind;
  http::bhttp::verb method = http::bhttp::verb::get;
  std::string path;
  std::optional<std::string> op;
  std::optional<std::string> to;
  bool recursive = false;
  bool archive = false;
  std::optional<uint64_t> content_length;
  std::optional<std::string> attach;  // a session's ?attach=
  int64_t duration_ms = 0;
};

struct EventDraft {
  std::string type;
  std::string message;
  nlohmann::json data = nlohmann::json::object();
};

// An exec as berthd saw it, whichever way it went: through the routes (from a ProxyTrace) or
// through berthd's in-process MCP backend (from the call itself).
struct ExecSeen {
  nlohmann::json request;  // the exec body (null: berthd did not read it)
  int status = 0;          // 200 ran, 202 started in the background, >= 400 refused, 0 no answer
  std::optional<protocol::ExitStatus> exit;  // how it ended, as the guest said
  std::optional<int64_t> pid;                // a background start's
  std::string refusal;                       // why it was refused, when it was
  bool complete = true;                      // the caller stayed to the end
  int64_t duration_ms = 0;
};
EventDraft ExecEventOf(const ExecSeen& seen);

// A file change: file_written (bytes when known), files_extracted, dir_created, file_moved
// (to), file_deleted (recursive).
EventDraft FileEventOf(std::string type, const std::string& path, const nlohmann::json& details);

// The event for a call that went through (nullopt: nothing to record, a read or a file
// operation that failed). Types: exec, session, file_written, files_extracted, dir_created,
// file_moved, file_deleted.
std::optional<EventDraft> AgentEvent(const AgentCall& call, const agent_client::ProxyTrace& trace);

// A command as the timeline shows it: the string, or the argv joined by spaces (arguments with
// spaces or quotes in single quotes), cut to kMaxCommandChars bytes on a UTF-8 boundary.
inline constexpr size_t kMaxCommandChars = 300;
std::string CommandLine(const nlohmann::json& cmd);

}  // namespace berth::api
