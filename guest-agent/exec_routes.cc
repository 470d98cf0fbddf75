// POST /v1/exec (wait for the result, stream NDJSON events, or start in the background) and
// GET /v1/exec/ws (interactive sessions, with or without a PTY; see process_session.h).
//
// Every process lands in the process table, so a client that loses a stream can find it again
// by pid or tag: if an NDJSON client disconnects mid-stream, the process keeps running, its
// output goes on into its ring buffer, and GET /v1/processes/{id}/output?follow=1 (or the
// WebSocket with ?attach=) picks it up.
#include <boost/beast/core/string.hpp>

#include "guest-agent/process_session.h"
#include "guest-agent/process_stream.h"
#include "guest-agent/process_table.h"
#include "guest-agent/api_context.h"

namespace berth::agent {
namespace {

using http::bhttp::status;
using protocol::ExecEvent;

bool WantsNdjson(const http::Exchange& ex) {
  std::string_view accept = ex.header(http::bhttp::field::accept);
  return accept.find("application/x-ndjson") != std::string_view::npos;
}

http::Task<void> WaitForResult(http::Exchange& ex, Process& process,
                               const protocol::ExecRequest& req) {
  uint64_t cap = req.max_output_bytes.value_or(protocol::kDefaultMaxOutputBytes);
  protocol::ExecResult result;
  result.pid = process.pid();
  result.tag = process.tag();
  auto reader = process.Subscribe(/*pacing=*/true);
  for (;;) {
    // No timeout: nothing is written until the end, and the server's io timeout applies only
    // to reads and writes in progress.
    Process::Item item = co_await reader->Next(std::chrono::hours(24 * 365));
    if (item.kind == Process::Item::Kind::kEnd) break;
    if (item.kind != Process::Item::Kind::kData) continue;
    std::string& out =
        item.stream == OutputStream::kStdout ? result.stdout_data : result.stderr_data;
    size_t room = out.size() < cap ? cap - out.size() : 0;
    if (item.data.size() > room) result.truncated = true;
    out.append(item.data, 0, std::min(room, item.data.size()));
  }
  result.exit = process.exit_status();
  auto body = result.ToJson();
  std::vector<std::pair<std::string, std::string>> headers;
  if (auto exit = protocol::ExitHeaderValue(result.exit); !exit.empty()) {
    headers.emplace_back(protocol::kExitHeader, std::move(exit));
  }
  co_await ex.SendJson(status::ok, body, headers);
}

http::Task<void> StreamEvents(http::Exchange& ex, Process& process) {
  auto reader = process.Subscribe(/*pacing=*/true);
  const std::vector<std::pair<std::string, std::string>> headers = {{"Cache-Control", "no-store"}};
  auto begun = co_await ex.BeginChunked(status::ok, "application/x-ndjson", headers);
  if (!begun) co_return;
  ExecEvent start(ExecEvent::Type::kStart);
  start.pid = process.pid();
  start.tag = process.tag();
  if (!co_await WriteEvent(ex, start)) co_return;
  // A failure here means the client went away: the process runs on in the table.
  if (!co_await StreamOutputEvents(ex, process, *reader, /*follow=*/true)) co_return;
  co_await ex.EndChunked();
}

// An exec request, read whole: larger than other requests for its stdin (berthd's clipboard
// puts up to 1 MiB of text there, which JSON may escape to 6 bytes a byte).
constexpr size_t kMaxExecRequest = 8u << 20;

http::Task<void> HandleExec(http::Exchange& ex, const ApiContext& ctx) {
  auto body = co_await ex.ReadJson(kMaxExecRequest);
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto req = protocol::ExecRequest::FromJson(*body);
  if (!req) {
    co_await ex.SendError(req.error());
    co_return;
  }
  if (auto env = protocol::ApplyEnvHeader(ex.header(protocol::kDefaultEnvHeader), req->env); !env) {
    co_await ex.SendError(env.error());
    co_return;
  }
  bool stream = WantsNdjson(ex);
  // stdin: the given string (then closed), a pipe kept open for a background process, or
  // /dev/null.
  bool stdin_pipe = req->stdin_data.has_value() || req->background;
  auto spec = PrepareSpawn(ctx.options.default_user, req->cmd, req->env, req->cwd,
                           req->user, std::nullopt, stdin_pipe);
  if (!spec) {
    co_await ex.SendError(spec.error());
    co_return;
  }
  Process::Options options;
  options.cmd = protocol::CommandToJson(req->cmd);
  options.user = spec->user.name;
  options.tag = req->tag;
  if (req->timeout_ms) options.timeout = std::chrono::milliseconds(*req->timeout_ms);
  options.stdin_data = req->stdin_data;
  auto process = ctx.processes.Start(*spec, std::move(options));
  if (!process) {
    co_await ex.SendError(process.error());
    co_return;
  }
  if (req->background) {
    nlohmann::json started = {{"pid", (*process)->pid()},
                              {"tag", (*process)->tag() ? nlohmann::json(*(*process)->tag())
                                                        : nlohmann::json(nullptr)}};
    co_await ex.SendJson(status::accepted, started);
    co_return;
  }
  auto guard = ctx.processes.OpenStream("exec");
  if (stream) {
    co_await StreamEvents(ex, **process);
  } else {
    co_await WaitForResult(ex, **process, *req);
  }
}

}  // namespace

void AddExecRoutes(http::Router& router, ApiContext& ctx) {
  // ApiContext is a bundle of references: copied into each handler (the caller's is a local).
  router.Add(http::bhttp::verb::post, "/v1/exec",
             [ctx](http::Exchange& ex) { return HandleExec(ex, ctx); });
  router.Add(http::bhttp::verb::get, "/v1/exec/ws",
             [ctx](http::Exchange& ex) { return ServeExecSession(ex, ctx); });
}

}  // namespace berth::agent
