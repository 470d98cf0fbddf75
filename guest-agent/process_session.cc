#include "guest-agent/process_session.h"

#include <deque>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "guest-agent/process_table.h"

namespace berth::agent {
namespace {

namespace asio = boost::asio;
namespace websocket = http::websocket;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// A client that connects but never says what to start is dropped after this.
constexpr auto kStartTimeout = std::chrono::seconds(30);

struct Session {
  explicit Session(std::unique_ptr<http::WebSocket> socket) : ws(std::move(socket)) {}
  std::unique_ptr<http::WebSocket> ws;
  std::shared_ptr<Process> process;
  std::unique_ptr<Process::Reader> reader;  // owned by the write loop
  std::deque<std::string> control_out;      // text frames the read loop wants sent
  bool input_done = false;                  // the read loop has ended (client gone or closed)
};

std::string ErrorMessage(const Error& error) {
  protocol::ExecEvent event(protocol::ExecEvent::Type::kError);
  event.error = error;
  return event.ToLine();
}

http::Task<Status> SendText(http::WebSocket& ws, const std::string& text) {
  ws.text(true);
  auto [ec, n] = co_await ws.async_write(asio::buffer(text), kTuple);
  if (ec) co_return Fail(ErrorCode::kUnavailable, "websocket write: " + ec.message());
  co_return Status{};
}

// Sends an error message, then closes with a policy-violation code.
http::Task<void> Refuse(http::WebSocket& ws, const Error& error) {
  co_await SendText(ws, ErrorMessage(error));
  websocket::close_reason reason(websocket::close_code::policy_error);
  reason.reason = error.message.substr(0, 120);  // a close reason is limited to 123 bytes
  co_await ws.async_close(reason, kTuple);
}

// Applies one control message from the client.
http::Task<Status> HandleControl(Session& s, const std::string& text) {
  auto parsed = ParseJson(text);
  if (!parsed || !parsed->is_object() || !parsed->contains("type") ||
      !(*parsed)["type"].is_string()) {
    co_return Fail(ErrorCode::kInvalidArgument, "control messages are JSON objects with a type");
  }
  const nlohmann::json& msg = *parsed;
  std::string type = msg["type"].get<std::string>();
  if (type == "resize") {
    auto dimension = [&msg](const char* key) -> int64_t {
      auto it = msg.find(key);
      return it != msg.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
    };
    int64_t cols = dimension("cols");
    int64_t rows = dimension("rows");
    if (cols <= 0 || rows <= 0 || cols > 10000 || rows > 10000) {
      co_return Fail(ErrorCode::kInvalidArgument, "resize needs cols and rows between 1 and 10000");
    }
    protocol::PtySize size(static_cast<uint16_t>(cols), static_cast<uint16_t>(rows));
    co_return s.process->Resize(size);
  }
  if (type == "signal") {
    auto it = msg.find("signal");
    std::string name = it == msg.end()                ? std::string()
                       : it->is_number_integer()      ? std::to_string(it->get<int64_t>())
                       : it->is_string()              ? it->get<std::string>()
                                                      : std::string("(not a name or number)");
    auto signo = protocol::SignalFromName(name);
    if (!signo) co_return Fail(signo.error());
    co_return s.process->Signal(*signo);
  }
  if (type == "close_stdin") co_return co_await s.process->CloseStdin();
  co_return Fail(ErrorCode::kInvalidArgument, "unknown control message type " + type);
}

// Client → process: stdin frames and control messages, until the client closes or goes away.
http::Task<void> ReadLoop(std::shared_ptr<Session> s) {
  for (;;) {
    boost::beast::flat_buffer buffer;
    auto [ec, n] = co_await s->ws->async_read(buffer, kTuple);
    if (ec) break;
    std::string data = boost::beast::buffers_to_string(buffer.data());
    Status status;
    if (s->ws->got_text()) {
      status = co_await HandleControl(*s, data);
    } else if (!data.empty() && static_cast<unsigned char>(data[0]) == http::kChannelStdin) {
      // Awaited before the next frame is read: a process that does not read its input holds
      // the client back instead of filling the agent's memory.
      if (data.size() > 1) status = co_await s->process->WriteStdin(std::string_view(data).substr(1));
    } else {
      status = Fail(ErrorCode::kInvalidArgument, "binary frames from the client must be on channel 0");
    }
    if (!status) {
      s->control_out.push_back(ErrorMessage(status.error()));
      if (s->reader) s->reader->Wake();
    }
  }
  s->input_done = true;
  if (s->reader) s->reader->Wake();
}

// Process → client: output frames and queued control answers, until the output ends (true)
// or the client is gone (false).
http::Task<bool> PumpOutput(Session& s) {
  while (!s.input_done) {
    while (!s.control_out.empty()) {
      std::string text = std::move(s.control_out.front());
      s.control_out.pop_front();
      if (!co_await SendText(*s.ws, text)) co_return false;
    }
    Process::Item item = co_await s.reader->Next(std::chrono::hours(24));
    if (item.kind == Process::Item::Kind::kEnd) co_return true;
    if (item.kind != Process::Item::Kind::kData) continue;
    std::string frame;
    frame.reserve(item.data.size() + 1);
    frame.push_back(static_cast<char>(item.stream == OutputStream::kStdout ? http::kChannelStdout
                                                                           : http::kChannelStderr));
    frame += item.data;
    s.ws->binary(true);
    auto [ec, n] = co_await s.ws->async_write(asio::buffer(frame), kTuple);
    if (ec) co_return false;
  }
  co_return false;
}

http::Task<void> WriteLoop(std::shared_ptr<Session> s) {
  bool ended = co_await PumpOutput(*s);
  // Let the pumps run free: nobody paces them any more. If the client is gone, the process
  // runs on in the table.
  s->reader.reset();
  if (!ended) co_return;
  protocol::ExecEvent end(protocol::ExecEvent::Type::kEnd);
  end.exit = s->process->exit_status();
  if (!co_await SendText(*s->ws, end.ToLine())) co_return;
  co_await s->ws->async_close(websocket::close_code::normal, kTuple);
}

// Reads the start message and starts the process.
// `default_env`: the Berth-Env header of the upgrade request.
http::Task<Result<std::shared_ptr<Process>>> StartFromMessage(http::WebSocket& ws,
                                                              const ApiContext& ctx,
                                                              std::string default_env) {
  boost::beast::flat_buffer buffer;
  asio::steady_timer timer(co_await asio::this_coro::executor, kStartTimeout);
  timer.async_wait([&ws](boost::system::error_code ec) {
    if (!ec) boost::beast::get_lowest_layer(ws).cancel();
  });
  auto [ec, n] = co_await ws.async_read(buffer, kTuple);
  timer.cancel();
  if (ec) co_return Fail(ErrorCode::kDeadlineExceeded, "no start message: " + ec.message());
  if (!ws.got_text()) co_return Fail(ErrorCode::kInvalidArgument, "the first message must be text");
  auto msg = ParseJson(boost::beast::buffers_to_string(buffer.data()));
  if (!msg) co_return Fail(ErrorCode::kInvalidArgument, "start message: " + msg.error().message);
  auto start = protocol::SessionStart::FromJson(*msg);
  if (!start) co_return Fail(start.error());
  if (auto env = protocol::ApplyEnvHeader(default_env, start->env); !env) co_return Fail(env.error());
  auto spec = PrepareSpawn(ctx.options.default_user, start->cmd, start->env, start->cwd,
                           start->user, start->pty, /*stdin_pipe=*/true);
  if (!spec) co_return Fail(spec.error());
  Process::Options options;
  options.cmd = start->cmd ? protocol::CommandToJson(*start->cmd) : nlohmann::json(spec->argv);
  options.user = spec->user.name;
  options.tag = start->tag;
  co_return ctx.processes.Start(*spec, std::move(options));
}

}  // namespace

http::Task<void> ServeExecSession(http::Exchange& ex, const ApiContext& ctx) {
  std::shared_ptr<Process> attached;
  if (auto target = ex.query().Get("attach")) {
    attached = ctx.processes.Find(*target);
    if (!attached) {
      co_await ex.SendError({ErrorCode::kNotFound, "no process " + *target});
      co_return;
    }
  }
  if (!ex.IsWebSocketUpgrade()) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "this endpoint needs a WebSocket upgrade"});
    co_return;
  }
  // Checked before the upgrade, so a bad header is an HTTP 400 like any other bad request.
  std::string default_env(ex.header(protocol::kDefaultEnvHeader));
  protocol::EnvOverrides checked;
  if (auto env = protocol::ApplyEnvHeader(default_env, checked); !env) {
    co_await ex.SendError(env.error());
    co_return;
  }
  auto ws = co_await ex.AcceptWebSocket();
  if (!ws) co_return;
  auto guard = ctx.processes.OpenStream("session");
  auto s = std::make_shared<Session>(std::move(*ws));
  if (attached) {
    s->process = attached;
  } else {
    auto started = co_await StartFromMessage(*s->ws, ctx, std::move(default_env));
    if (!started) {
      co_await Refuse(*s->ws, started.error());
      co_return;
    }
    s->process = *started;
  }
  // Subscribed before anything else can run, so no output is missed.
  s->reader = s->process->Subscribe(/*pacing=*/true);
  nlohmann::json answer = {{"type", attached ? "attached" : "started"},
                           {"pid", s->process->pid()},
                           {"tag", s->process->tag() ? nlohmann::json(*s->process->tag())
                                                     : nlohmann::json(nullptr)},
                           {"pty", s->process->pty()}};
  std::string answer_text = DumpJson(answer);
  if (!co_await SendText(*s->ws, answer_text)) co_return;
  asio::co_spawn(co_await asio::this_coro::executor, ReadLoop(s), asio::detached);
  co_await WriteLoop(s);
}

}  // namespace berth::agent
