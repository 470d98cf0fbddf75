#include "controller/api/agent_events.h"

#include <fmt/format.h>

#include "common/json.h"
#include "common/protocol/exec.h"

namespace berth::api {
namespace {

using http::bhttp::verb;

// `s` cut to at most `max` bytes, never inside a UTF-8 sequence, with "…" when cut.
std::string Cut(std::string s, size_t max) {
  if (s.size() <= max) return s;
  s.resize(protocol::CompleteUtf8Prefix(std::string_view(s).substr(0, max)));
  return s + "…";
}

std::string Seconds(int64_t ms) {
  if (ms < 1000) return fmt::format("{} ms", ms);
  return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

// The message of an error answer ({"error": {"message"}}), when the tail holds all of it.
std::string ErrorMessage(const std::string& tail) {
  auto body = ParseJson(tail);
  if (!body || !body->is_object()) return {};
  auto error = body->find("error");
  if (error == body->end() || !error->is_object()) return {};
  auto message = error->find("message");
  if (message == error->end() || !message->is_string()) return {};
  return Cut(message->get<std::string>(), 200);
}

// How a streamed exec ended: its last NDJSON line, an "end" event.
std::optional<protocol::ExitStatus> StreamEnd(std::string_view tail) {
  while (!tail.empty() && tail.back() == '\n') tail.remove_suffix(1);
  size_t nl = tail.rfind('\n');
  std::string_view line = nl == std::string_view::npos ? tail : tail.substr(nl + 1);
  auto json = ParseJson(line);
  if (!json) return std::nullopt;
  auto event = protocol::ExecEvent::FromJson(*json);
  if (!event || event->type != protocol::ExecEvent::Type::kEnd) return std::nullopt;
  return event->exit;
}

ExecSeen SeenOf(const AgentCall& call, const agent_client::ProxyTrace& trace) {
  ExecSeen seen;
  if (trace.request_body) {
    if (auto body = ParseJson(*trace.request_body)) seen.request = std::move(*body);
  }
  seen.status = trace.answer.status;
  seen.complete = trace.answer.complete;
  seen.duration_ms = call.duration_ms;
  if (seen.status >= 400) {
    seen.refusal = ErrorMessage(trace.answer.tail);
  } else if (seen.status == 202) {
    if (auto body = ParseJson(trace.answer.tail); body && body->is_object()) {
      if (auto pid = body->find("pid"); pid != body->end() && pid->is_number_integer()) seen.pid = pid->get<int64_t>();
    }
  } else if (!trace.answer.exit_header.empty()) {
    seen.exit = protocol::ParseExitHeader(trace.answer.exit_header);
  } else if (trace.answer.complete) {
    seen.exit = StreamEnd(trace.answer.tail);
  }
  return seen;
}

// A WebSocket session: its start message (what ran) and its last message (how it ended), as
// the relay saw them go by.
std::optional<EventDraft> SessionEvent(const AgentCall& call, const agent_client::ProxyTrace& trace) {
  if (trace.answer.status != 101) return std::nullopt;  // refused: nothing ran
  EventDraft e;
  e.type = "session";
  e.data["duration_ms"] = call.duration_ms;
  std::string what = "an interactive session";
  if (call.attach) {
    e.data["attach"] = Cut(*call.attach, 128);
    what = fmt::format("a session attached to {}", Cut(*call.attach, 128));
  } else if (trace.answer.first_client_text) {
    auto start = ParseJson(*trace.answer.first_client_text);
    if (start && start->is_object() && start->value("type", "") == "start") {
      auto cmd = start->find("cmd");
      std::string line = cmd != start->end() && !cmd->is_null() ? CommandLine(*cmd) : "(login shell)";
      e.data["cmd"] = line;
      e.data["pty"] = start->contains("pty") && !(*start)["pty"].is_null();
      for (const char* key : {"cwd", "user", "tag"}) {
        if (auto it = start->find(key); it != start->end() && it->is_string()) {
          e.data[key] = Cut(it->get<std::string>(), 200);
        }
      }
      what = fmt::format("`{}`", line);
    }
  }
  std::optional<protocol::ExitStatus> exit;
  if (trace.answer.last_agent_text) exit = StreamEnd(*trace.answer.last_agent_text);
  if (exit && exit->exit_code) {
    e.data["exit_code"] = *exit->exit_code;
    if (exit->signal) e.data["signal"] = *exit->signal;
    e.message = exit->signal
                    ? fmt::format("{} killed by {} after {}", what, *exit->signal, Seconds(call.duration_ms))
                    : fmt::format("{} exited {} after {}", what, *exit->exit_code, Seconds(call.duration_ms));
  } else {
    e.message = fmt::format("{}, {} (the connection closed before it ended)", what, Seconds(call.duration_ms));
  }
  return e;
}

std::optional<EventDraft> FileEvent(const AgentCall& call, const agent_client::ProxyTrace& trace) {
  const int status = trace.answer.status;
  if (status < 200 || status >= 300) return std::nullopt;  // nothing changed
  if (call.method == verb::put) {
    nlohmann::json details = nlohmann::json::object();
    if (call.content_length && !call.archive) details["bytes"] = *call.content_length;
    return FileEventOf(call.archive ? "files_extracted" : "file_written", call.path, details);
  }
  if (call.method == verb::delete_) {
    return FileEventOf("file_deleted", call.path, {{"recursive", call.recursive}});
  }
  if (call.method == verb::post && call.op == "mkdir") {
    return FileEventOf("dir_created", call.path, nlohmann::json::object());
  }
  if (call.method == verb::post && call.op == "move" && call.to) {
    return FileEventOf("file_moved", call.path, {{"to", *call.to}});
  }
  return std::nullopt;
}

}  // namespace

EventDraft ExecEventOf(const ExecSeen& seen) {
  EventDraft e;
  e.type = "exec";
  std::string cmd = "(a command berthd did not read)";
  bool background = false;
  if (seen.request.is_object()) {
    if (auto it = seen.request.find("cmd"); it != seen.request.end()) cmd = CommandLine(*it);
    for (const char* key : {"cwd", "user", "tag"}) {
      if (auto it = seen.request.find(key); it != seen.request.end() && it->is_string()) {
        e.data[key] = Cut(it->get<std::string>(), 200);
      }
    }
    if (auto it = seen.request.find("background"); it != seen.request.end() && it->is_boolean()) {
      background = it->get<bool>();
    }
  }
  e.data["cmd"] = cmd;
  e.data["background"] = background;
  e.data["duration_ms"] = seen.duration_ms;
  e.data["status"] = seen.status;
  if (seen.status == 0) {
    e.message = fmt::format("`{}`: the workspace's agent did not answer", cmd);
    return e;
  }
  if (seen.status >= 400) {
    std::string why = Cut(seen.refusal, 200);
    e.message = fmt::format("`{}` refused ({}){}", cmd, seen.status, why.empty() ? "" : ": " + why);
    return e;
  }
  if (seen.status == 202) {
    if (seen.pid) e.data["pid"] = *seen.pid;
    e.message = fmt::format("`{}` started in the background", cmd);
    return e;
  }
  const auto& exit = seen.exit;
  if (!exit || !exit->exit_code) {
    e.message = seen.complete ? fmt::format("`{}` ran for {}", cmd, Seconds(seen.duration_ms))
                              : fmt::format("`{}`: the caller left after {}; it may still run", cmd,
                                            Seconds(seen.duration_ms));
    return e;
  }
  e.data["exit_code"] = *exit->exit_code;
  if (exit->signal) e.data["signal"] = *exit->signal;
  if (exit->timed_out) e.data["timed_out"] = true;
  if (exit->signal) {
    e.message = fmt::format("`{}` killed by {}{} after {}", cmd, *exit->signal,
                            exit->timed_out ? " (its timeout)" : "", Seconds(seen.duration_ms));
  } else {
    e.message = fmt::format("`{}` exited {} after {}", cmd, *exit->exit_code, Seconds(seen.duration_ms));
  }
  return e;
}

EventDraft FileEventOf(std::string type, const std::string& path, const nlohmann::json& details) {
  EventDraft e;
  e.type = std::move(type);
  e.data = details.is_object() ? details : nlohmann::json::object();
  e.data["path"] = path;
  if (e.type == "file_written") {
    auto bytes = e.data.find("bytes");
    e.message = bytes != e.data.end() && bytes->is_number_unsigned()
                    ? fmt::format("{} written ({} bytes)", path, bytes->get<uint64_t>())
                    : fmt::format("{} written", path);
  } else if (e.type == "files_extracted") {
    e.message = fmt::format("a tar archive extracted into {}", path);
  } else if (e.type == "dir_created") {
    e.message = fmt::format("{} created", path);
  } else if (e.type == "file_moved") {
    e.message = fmt::format("{} moved to {}", path, e.data.value("to", std::string("?")));
  } else if (e.type == "file_deleted") {
    e.message = fmt::format("{} deleted{}", path, e.data.value("recursive", false) ? " with what it held" : "");
  } else {
    e.message = path;
  }
  return e;
}

std::string CommandLine(const nlohmann::json& cmd) {
  if (cmd.is_string()) return Cut(cmd.get<std::string>(), kMaxCommandChars);
  if (!cmd.is_array()) return "(not a command)";
  std::string out;
  for (const auto& arg : cmd) {
    if (!arg.is_string()) return "(not a command)";
    const auto& a = arg.get_ref<const std::string&>();
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
    if (out.size() > kMaxCommandChars) break;
  }
  return Cut(std::move(out), kMaxCommandChars);
}

std::optional<EventDraft> AgentEvent(const AgentCall& call, const agent_client::ProxyTrace& trace) {
  if (call.kind == "exec" && call.method == verb::post) return ExecEventOf(SeenOf(call, trace));
  if (call.kind == "session") return SessionEvent(call, trace);
  if (call.kind == "files" && call.method != verb::get && call.method != verb::head) return FileEvent(call, trace);
  return std::nullopt;
}

}  // namespace berth::api
