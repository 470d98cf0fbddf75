#include "common/client/exec.h"

#include <fmt/format.h>

#include "common/http/url.h"
#include "common/json.h"

namespace berth::client {
namespace {

using http::bhttp::verb;
using protocol::ExecEvent;

std::string Path(std::string_view scope, std::string_view rest) {
  return fmt::format("{}{}", scope, rest);
}

std::string ProcessPath(std::string_view scope, std::string_view id, std::string_view rest = {}) {
  return fmt::format("{}/processes/{}{}", scope, http::PercentEncode(id, false), rest);
}

// Streams an NDJSON response to `on_event`; remembers the end event.
Result<std::optional<protocol::ExitStatus>> StreamEvents(ApiClient& client, verb method,
                                                         const std::string& target,
                                                         std::string body,
                                                         const ExecEventCallback& on_event) {
  std::optional<protocol::ExitStatus> end;
  NdjsonSplitter splitter([&](const nlohmann::json& line) -> Status {
    auto event = ExecEvent::FromJson(line);
    if (!event) return Fail(event.error());
    if (event->type == ExecEvent::Type::kEnd) end = event->exit;
    if (event->type == ExecEvent::Type::kError) return Fail(*event->error);
    return on_event ? on_event(*event) : Status{};
  });
  Headers headers = {{"Accept", "application/x-ndjson"}};
  if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
  // Buffered: the request can be sent again if berthd answers that the workspace is waking.
  auto status = client.StreamBuffered(method, target, headers, body,
                                      [&](std::string_view data) { return splitter.Feed(data); });
  if (!status) return Fail(status.error());
  if (auto finished = splitter.Finish(); !finished) return Fail(finished.error());
  return end;
}

}  // namespace

Result<protocol::ExecResult> Exec(ApiClient& client, std::string_view scope,
                                  const protocol::ExecRequest& request) {
  auto json = client.Json(verb::post, Path(scope, "/exec"), request.ToJson());
  if (!json) return Fail(json.error());
  return protocol::ExecResult::FromJson(*json);
}

Result<protocol::ExitStatus> ExecStream(ApiClient& client, std::string_view scope,
                                        const protocol::ExecRequest& request,
                                        const ExecEventCallback& on_event) {
  auto end = StreamEvents(client, verb::post, Path(scope, "/exec"), DumpJson(request.ToJson()),
                          on_event);
  if (!end) return Fail(end.error());
  if (!*end) return Fail(ErrorCode::kUnavailable, "the exec stream ended without an end event");
  return **end;
}

Result<Started> StartBackground(ApiClient& client, std::string_view scope,
                                protocol::ExecRequest request) {
  request.background = true;
  auto json = client.Json(verb::post, Path(scope, "/exec"), request.ToJson());
  if (!json) return Fail(json.error());
  // Checked field by field: json::value() throws on a peer's wrong type.
  auto pid = OptionalInt(*json, "pid");
  if (!json->is_object() || !pid || !*pid || **pid <= 0 || **pid > INT32_MAX) {
    return Fail(ErrorCode::kInternal, "background exec answered without a pid");
  }
  Started started;
  started.pid = static_cast<int>(**pid);
  if (auto tag = OptionalString(*json, "tag"); tag && *tag) started.tag = **tag;
  return started;
}

Result<std::vector<protocol::ProcessInfo>> ListProcesses(ApiClient& client, std::string_view scope) {
  auto json = client.Json(verb::get, Path(scope, "/processes"));
  if (!json) return Fail(json.error());
  if (!json->contains("processes") || !(*json)["processes"].is_array()) {
    return Fail(ErrorCode::kInternal, "process list without processes");
  }
  std::vector<protocol::ProcessInfo> out;
  for (const auto& p : (*json)["processes"]) {
    auto info = protocol::ProcessInfo::FromJson(p);
    if (!info) return Fail(info.error());
    out.push_back(std::move(*info));
  }
  return out;
}

Result<protocol::ProcessInfo> GetProcess(ApiClient& client, std::string_view scope,
                                         std::string_view id) {
  auto json = client.Json(verb::get, ProcessPath(scope, id));
  if (!json) return Fail(json.error());
  return protocol::ProcessInfo::FromJson(*json);
}

Result<std::optional<protocol::ExitStatus>> ProcessOutput(ApiClient& client, std::string_view scope,
                                                          std::string_view id,
                                                          const OutputOptions& options,
                                                          const ExecEventCallback& on_event) {
  std::string target = ProcessPath(
      scope, id,
      fmt::format("/output?follow={}&offset={}&stderr_offset={}", options.follow ? 1 : 0,
                  options.stdout_offset, options.stderr_offset));
  return StreamEvents(client, verb::get, target, {}, on_event);
}

Status SendStdin(ApiClient& client, std::string_view scope, std::string_view id,
                 std::string_view data, bool close) {
  auto response = client.Request(verb::post, ProcessPath(scope, id, close ? "/stdin?close=1" : "/stdin"),
                                 data, "application/octet-stream");
  if (!response) return Fail(response.error());
  if (response->status < 200 || response->status >= 300) return Fail(ApiClient::ErrorFrom(*response));
  return {};
}

Result<protocol::ProcessInfo> Signal(ApiClient& client, std::string_view scope,
                                     std::string_view id, std::string_view signal) {
  nlohmann::json body = {{"signal", std::string(signal)}};
  auto json = client.Json(verb::post, ProcessPath(scope, id, "/signal"), body);
  if (!json) return Fail(json.error());
  return protocol::ProcessInfo::FromJson(*json);
}

Result<protocol::ProcessInfo> Kill(ApiClient& client, std::string_view scope, std::string_view id) {
  auto json = client.Json(verb::delete_, ProcessPath(scope, id));
  if (!json) return Fail(json.error());
  return protocol::ProcessInfo::FromJson(*json);
}

// --- sessions ---------------------------------------------------------------------------------

Status ExecSession::ReadHello(std::string_view expected_type) {
  for (;;) {
    auto frame = ws_->Read(std::chrono::seconds(30));
    if (!frame) return Fail(frame.error());
    if (!frame->text) continue;
    // The peer is not trusted: a message that does not parse, or fields of the wrong type,
    // are an error, never a throw.
    auto msg = ParseJson(frame->data);
    if (!msg || !msg->is_object()) {
      return Fail(ErrorCode::kInternal, "the session's first message is not a JSON object");
    }
    auto type = OptionalString(*msg, "type");
    if (type && type->value_or("") == "error") {
      auto event = ExecEvent::FromJson(*msg);
      if (event && event->error) return Fail(*event->error);
      return Fail(ErrorCode::kInternal, "session refused");
    }
    if (!type || type->value_or("") != expected_type) {
      return Fail(ErrorCode::kInternal, fmt::format("expected {}, got {}", expected_type,
                                                    frame->data.substr(0, 200)));
    }
    auto pid = OptionalInt(*msg, "pid");
    if (!pid) return Fail(ErrorCode::kInternal, "the session's pid is not an integer");
    pid_ = static_cast<int>(pid->value_or(0));
    auto tag = OptionalString(*msg, "tag");
    if (tag && *tag) tag_ = **tag;
    return {};
  }
}

Result<std::unique_ptr<ExecSession>> OpenSession(ApiClient& client, std::string_view scope,
                                                 const protocol::SessionStart& start) {
  auto ws = client.OpenWebSocket(Path(scope, "/exec/ws"));
  if (!ws) return Fail(ws.error());
  std::unique_ptr<ExecSession> session(new ExecSession(std::move(*ws)));
  if (auto sent = session->ws_->SendText(DumpJson(start.ToJson())); !sent) return Fail(sent.error());
  if (auto hello = session->ReadHello("started"); !hello) return Fail(hello.error());
  return session;
}

Result<std::unique_ptr<ExecSession>> AttachSession(ApiClient& client, std::string_view scope,
                                                   std::string_view id) {
  auto ws = client.OpenWebSocket(
      Path(scope, fmt::format("/exec/ws?attach={}", http::PercentEncode(id, false))));
  if (!ws) return Fail(ws.error());
  std::unique_ptr<ExecSession> session(new ExecSession(std::move(*ws)));
  if (auto hello = session->ReadHello("attached"); !hello) return Fail(hello.error());
  return session;
}

Status ExecSession::WriteStdin(std::string_view data) {
  std::string frame;
  frame.reserve(data.size() + 1);
  frame.push_back(static_cast<char>(http::kChannelStdin));
  frame.append(data);
  return ws_->SendBinary(frame);
}

Status ExecSession::Resize(uint16_t cols, uint16_t rows) {
  nlohmann::json msg = {{"type", "resize"}, {"cols", cols}, {"rows", rows}};
  return ws_->SendText(DumpJson(msg));
}

Status ExecSession::Signal(std::string_view signal) {
  nlohmann::json msg = {{"type", "signal"}, {"signal", std::string(signal)}};
  return ws_->SendText(DumpJson(msg));
}

Status ExecSession::CloseStdin() { return ws_->SendText(R"({"type":"close_stdin"})"); }

Result<ExecSession::Event> ExecSession::ReadEvent(std::chrono::milliseconds timeout) {
  for (;;) {
    auto frame = ws_->Read(timeout);
    if (!frame) return Fail(frame.error());
    Event event;
    if (!frame->text) {
      if (frame->data.empty()) continue;
      unsigned char channel = static_cast<unsigned char>(frame->data[0]);
      if (channel != http::kChannelStdout && channel != http::kChannelStderr) continue;
      event.kind = channel == http::kChannelStdout ? Event::Kind::kStdout : Event::Kind::kStderr;
      event.data = frame->data.substr(1);
      return event;
    }
    auto msg = ParseJson(frame->data);
    if (!msg) continue;  // not JSON: nothing this client can act on
    auto parsed = ExecEvent::FromJson(*msg);
    if (!parsed) continue;  // a message type this client does not know
    if (parsed->type == ExecEvent::Type::kEnd) {
      event.kind = Event::Kind::kEnd;
      event.exit = parsed->exit;
      return event;
    }
    if (parsed->type == ExecEvent::Type::kError) {
      event.kind = Event::Kind::kError;
      event.error = parsed->error.value_or(Error{ErrorCode::kInternal, "error"});
      return event;
    }
  }
}

Result<protocol::ExitStatus> ExecSession::WaitEnd(std::chrono::milliseconds timeout,
                                                  std::string* out) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Fail(ErrorCode::kDeadlineExceeded, "no end event in time");
    auto event = ReadEvent(left);
    if (!event) return Fail(event.error());
    if (event->kind == Event::Kind::kEnd) return event->exit;
    if (out != nullptr && event->kind != Event::Kind::kError) out->append(event->data);
  }
}

Status ExecSession::Close() { return ws_->Close(); }

}  // namespace berth::client
