// The process table over HTTP:
//   GET    /v1/processes                  {"processes": [ProcessInfo...]}
//   GET    /v1/processes/{id}             ProcessInfo (id: pid or tag)
//   GET    /v1/processes/{id}/output      NDJSON: buffered output, then live with ?follow=1;
//                                         ?offset=N / ?stderr_offset=N skip bytes already seen
//   POST   /v1/processes/{id}/stdin       body bytes → stdin; ?close=1 closes it after
//   POST   /v1/processes/{id}/signal      {"signal": "TERM" | 15} → to the process group
//   DELETE /v1/processes/{id}             SIGKILL to the group; answers the ProcessInfo
#include "guest-agent/process_stream.h"
#include "guest-agent/process_table.h"
#include "guest-agent/api_context.h"

namespace berth::agent {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

// After a DELETE, how long to wait for the process to be reaped so the answer shows its end.
// SIGKILL is not catchable: only a process in uninterruptible sleep takes longer.
constexpr std::chrono::milliseconds kKillWait{5'000};
// stdin bodies stream through in chunks of this size (each written before the next is read).
constexpr size_t kStdinChunk = 64u << 10;

http::Task<std::shared_ptr<Process>> FindOr404(http::Exchange& ex, const ApiContext& ctx) {
  std::string id(ex.param("id"));
  auto process = ctx.processes.Find(id);
  if (!process) co_await ex.SendError({ErrorCode::kNotFound, "no process " + id});
  co_return process;
}

http::Task<void> List(http::Exchange& ex, const ApiContext& ctx) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : ctx.processes.List()) list.push_back(p->Info().ToJson());
  nlohmann::json body = {{"processes", std::move(list)}};
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> Get(http::Exchange& ex, const ApiContext& ctx) {
  auto process = co_await FindOr404(ex, ctx);
  if (!process) co_return;
  co_await ex.SendJson(status::ok, process->Info().ToJson());
}

http::Task<void> Output(http::Exchange& ex, const ApiContext& ctx) {
  auto follow = ex.query().GetBool("follow", false);
  auto offset = ex.query().GetInt("offset", 0, 0, std::numeric_limits<long long>::max());
  auto stderr_offset =
      ex.query().GetInt("stderr_offset", 0, 0, std::numeric_limits<long long>::max());
  for (const Error* e : {follow ? nullptr : &follow.error(), offset ? nullptr : &offset.error(),
                         stderr_offset ? nullptr : &stderr_offset.error()}) {
    if (e) {
      co_await ex.SendError(*e);
      co_return;
    }
  }
  auto process = co_await FindOr404(ex, ctx);
  if (!process) co_return;
  auto reader = process->Subscribe(/*pacing=*/false, static_cast<uint64_t>(*offset),
                                   static_cast<uint64_t>(*stderr_offset));
  auto guard = ctx.processes.OpenStream("process_output");
  const std::vector<std::pair<std::string, std::string>> headers = {{"Cache-Control", "no-store"}};
  if (!co_await ex.BeginChunked(status::ok, "application/x-ndjson", headers)) {
    co_return;
  }
  if (!co_await StreamOutputEvents(ex, *process, *reader, *follow)) co_return;
  co_await ex.EndChunked();
}

http::Task<void> Stdin(http::Exchange& ex, const ApiContext& ctx) {
  auto close = ex.query().GetBool("close", false);
  if (!close) {
    co_await ex.SendError(close.error());
    co_return;
  }
  auto process = co_await FindOr404(ex, ctx);
  if (!process) co_return;
  if (!process->has_stdin()) {
    Error error(ErrorCode::kFailedPrecondition,
                process->running() ? "the process has no open stdin" : "the process has ended");
    co_await ex.SendError(error);
    co_return;
  }
  uint64_t written = 0;
  // A named sink: a lambda converted to std::function inside the co_await expression would be
  // a temporary that g++ 12 may destroy twice.
  http::Exchange::ChunkSink sink = [&](std::string_view data) -> http::Task<Status> {
    auto ok = co_await process->WriteStdin(data);
    if (ok) written += data.size();
    co_return ok;
  };
  auto status = co_await ex.ReadBodyChunks(sink, kStdinChunk);
  if (status && *close) status = co_await process->CloseStdin();
  if (!status) {
    co_await ex.SendError(status.error());
    co_return;
  }
  nlohmann::json body = {{"pid", process->pid()}, {"written", written}, {"closed", *close}};
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> SignalProcess(http::Exchange& ex, const ApiContext& ctx) {
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto process = co_await FindOr404(ex, ctx);
  if (!process) co_return;
  std::string name;
  if (body->contains("signal") && (*body)["signal"].is_string()) {
    name = (*body)["signal"].get<std::string>();
  } else if (body->contains("signal") && (*body)["signal"].is_number_integer()) {
    name = std::to_string((*body)["signal"].get<int>());
  } else {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "signal must be a name or a number"});
    co_return;
  }
  auto signo = protocol::SignalFromName(name);
  if (!signo) {
    co_await ex.SendError(signo.error());
    co_return;
  }
  if (auto sent = process->Signal(*signo); !sent) {
    co_await ex.SendError(sent.error());
    co_return;
  }
  co_await ex.SendJson(status::ok, process->Info().ToJson());
}

http::Task<void> Delete(http::Exchange& ex, const ApiContext& ctx) {
  auto process = co_await FindOr404(ex, ctx);
  if (!process) co_return;
  if (process->running()) {
    process->Kill();
    co_await process->WaitExit(kKillWait);
  }
  co_await ex.SendJson(status::ok, process->Info().ToJson());
}

}  // namespace

void AddProcessRoutes(http::Router& router, ApiContext& ctx) {
  // ApiContext is a bundle of references: copied into each handler (the caller's is a local).
  auto bind = [&ctx](http::Task<void> (*fn)(http::Exchange&, const ApiContext&)) {
    return [ctx, fn](http::Exchange& ex) { return fn(ex, ctx); };
  };
  router.Add(verb::get, "/v1/processes", bind(List));
  router.Add(verb::get, "/v1/processes/{id}", bind(Get));
  router.Add(verb::get, "/v1/processes/{id}/output", bind(Output));
  router.Add(verb::post, "/v1/processes/{id}/stdin", bind(Stdin));
  router.Add(verb::post, "/v1/processes/{id}/signal", bind(SignalProcess));
  router.Add(verb::delete_, "/v1/processes/{id}", bind(Delete));
}

}  // namespace berth::agent
