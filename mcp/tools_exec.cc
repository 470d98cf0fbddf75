// exec and the process tools: run a command and wait for it (output bounded, head and tail
// kept), or start it in the background and read its output, list and kill processes later.
#include <fmt/format.h>

#include "common/json.h"
#include "mcp/text_limits.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;
using protocol::ExecEvent;

constexpr int kDefaultTimeoutSeconds = 120;
constexpr int kMaxTimeoutSeconds = 3600;
// What one answer shows of each output stream by default, and at most. About 8k tokens: enough
// for a build's errors, small enough to leave the context window for the work.
constexpr int kDefaultOutputBytes = 32 * 1024;
constexpr int kMaxOutputBytes = 1024 * 1024;
// process_output's wait: the longest one call may block.
constexpr int kMaxWaitSeconds = 300;

int IntArg(const json& args, const char* key, int fallback) {
  auto it = args.find(key);
  return it != args.end() && it->is_number() ? it->get<int>() : fallback;
}

std::string IdArg(const json& args) {
  const json& id = args["id"];
  return id.is_string() ? id.get<std::string>() : DumpJson(id);
}

std::string DescribeExit(const protocol::ExitStatus& exit) {
  std::string seconds = fmt::format("{:.2f} s", static_cast<double>(exit.duration_ms) / 1000.0);
  if (exit.timed_out) {
    return fmt::format("timed out after {}; its process group was killed", seconds);
  }
  if (exit.signal) return fmt::format("killed by signal {} after {}", *exit.signal, seconds);
  return fmt::format("exit code {} in {}", exit.exit_code.value_or(-1), seconds);
}

json ExitJson(const protocol::ExitStatus& exit) {
  json out = json::object();
  out["exit_code"] = exit.exit_code ? json(*exit.exit_code) : json(nullptr);
  out["signal"] = exit.signal ? json(*exit.signal) : json(nullptr);
  out["timed_out"] = exit.timed_out;
  out["duration_ms"] = exit.duration_ms;
  return out;
}

void AppendStream(std::string& text, std::string_view name, const HeadTail& stream) {
  if (stream.total() == 0) return;
  text += fmt::format("\n--- {}{} ---\n", name,
                      stream.truncated() ? fmt::format(" ({} bytes, cut)", stream.total()) : "");
  text += stream.Render();
  if (!text.ends_with('\n')) text += '\n';
}

Result<protocol::ExecRequest> BuildRequest(const json& args) {
  protocol::ExecRequest request;
  auto cmd = protocol::CommandFromJson(args["cmd"]);
  if (!cmd) return Fail(cmd.error());
  request.cmd = std::move(*cmd);
  if (args.contains("cwd")) request.cwd = args["cwd"].get<std::string>();
  if (args.contains("user")) request.user = args["user"].get<std::string>();
  if (args.contains("stdin")) request.stdin_data = args["stdin"].get<std::string>();
  if (args.contains("tag")) {
    std::string tag = args["tag"].get<std::string>();
    auto valid = protocol::ValidateTag(tag);
    if (!valid) return Fail(valid.error());
    request.tag = std::move(tag);
  }
  if (args.contains("env")) {
    for (const auto& [key, value] : args["env"].items()) request.env[key] = value.get<std::string>();
  }
  return request;
}

// The deadline of a command that may run `seconds`: its own time and room for the rest of the
// call (waking the workspace, sending the output).
Deadline CommandDeadline(int seconds) {
  return ToolContext::CallDeadline(std::chrono::seconds(seconds) + ToolContext::kDefaultCallTimeout);
}

Result<ToolResult> Exec(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto request = BuildRequest(args);
  if (!request) return Fail(request.error());
  bool background = args.value("background", false);
  if (background) {
    if (args.contains("timeout")) request->timeout_ms = IntArg(args, "timeout", 0) * 1000ull;
    auto started = ctx.backend().StartProcess(*ws, *request, ToolContext::CallDeadline());
    if (!started) return Fail(started.error());
    std::string id = started->tag ? *started->tag : std::to_string(started->pid);
    json structured = json::object();
    structured["pid"] = started->pid;
    structured["tag"] = started->tag ? json(*started->tag) : json(nullptr);
    return ToolResult::Text(
        fmt::format("Started in the background: pid {}{}. Read its output with process_output "
                    "(id {}), stop it with process_kill; process_list shows it.",
                    started->pid, started->tag ? fmt::format(", tag '{}'", *started->tag) : "",
                    id),
        structured);
  }
  int timeout = IntArg(args, "timeout", kDefaultTimeoutSeconds);
  request->timeout_ms = static_cast<uint64_t>(timeout) * 1000;
  size_t max_output = static_cast<size_t>(IntArg(args, "max_output", kDefaultOutputBytes));
  HeadTail out(max_output);
  HeadTail err(max_output);
  int pid = 0;
  ExecEventFn on_event = [&](const ExecEvent& event) -> Status {
    if (event.type == ExecEvent::Type::kStart) pid = event.pid;
    if (event.type == ExecEvent::Type::kStdout) out.Append(event.data);
    if (event.type == ExecEvent::Type::kStderr) err.Append(event.data);
    return {};
  };
  auto exit = ctx.backend().RunCommand(*ws, *request, on_event, CommandDeadline(timeout));
  if (!exit) return Fail(exit.error());
  std::string text = DescribeExit(*exit);
  if (exit->timed_out) {
    text += fmt::format(" (timeout {} s; for long commands pass background: true and read "
                        "process_output)",
                        timeout);
  }
  AppendStream(text, "stdout", out);
  AppendStream(text, "stderr", err);
  if (out.total() == 0 && err.total() == 0) text += "\n(no output)";
  json structured = ExitJson(*exit);
  structured["pid"] = pid;
  structured["stdout"] = out.Render();
  structured["stderr"] = err.Render();
  structured["stdout_bytes"] = out.total();
  structured["stderr_bytes"] = err.total();
  structured["truncated"] = out.truncated() || err.truncated();
  return ToolResult::Text(std::move(text), structured);
}

std::string DescribeProcess(const protocol::ProcessInfo& p) {
  std::string cmd = p.cmd.is_string() ? p.cmd.get<std::string>() : DumpJson(p.cmd);
  std::string state = p.running ? "running" : DescribeExit(p.exit);
  return fmt::format("pid {}{}: {} — {} (user {}, started {})", p.pid,
                     p.tag ? fmt::format(" [tag {}]", *p.tag) : "", state, cmd, p.user,
                     p.started_at);
}

Result<ToolResult> ProcessList(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  auto processes = ctx.backend().ListProcesses(*ws, ToolContext::CallDeadline());
  if (!processes) return Fail(processes.error());
  json list = json::array();
  std::string text;
  if (processes->empty()) {
    text = "No processes were started through Berth in this workspace (or the workspace "
           "restarted since).";
  } else {
    text = fmt::format("{} process{} started through Berth:\n", processes->size(),
                       processes->size() == 1 ? "" : "es");
  }
  for (const auto& p : *processes) {
    text += "- " + DescribeProcess(p) + "\n";
    list.push_back(p.ToJson());
  }
  json structured = json::object();
  structured["processes"] = std::move(list);
  return ToolResult::Text(std::move(text), structured);
}

Result<ToolResult> ProcessOutput(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  std::string id = IdArg(args);
  Backend& backend = ctx.backend();
  // wait: until the process ends or the time is up (the backend hears the end as it happens).
  int wait = IntArg(args, "wait", 0);
  auto info = wait > 0
                  ? backend.WaitForProcess(*ws, id, ToolContext::CallDeadline(std::chrono::seconds(wait)))
                  : backend.GetProcess(*ws, id, ToolContext::CallDeadline());
  if (!info) return Fail(info.error());
  uint64_t max = static_cast<uint64_t>(IntArg(args, "max_bytes", kDefaultOutputBytes));
  OutputRange options;
  // Without offsets: the last `max` bytes of each stream, the part that says what is going on.
  options.stdout_offset = args.contains("stdout_offset")
                              ? args["stdout_offset"].get<uint64_t>()
                              : (info->stdout_bytes > max ? info->stdout_bytes - max : 0);
  options.stderr_offset = args.contains("stderr_offset")
                              ? args["stderr_offset"].get<uint64_t>()
                              : (info->stderr_bytes > max ? info->stderr_bytes - max : 0);
  struct Collected {
    std::string data;
    std::optional<uint64_t> first;  // offset of the first byte received
    uint64_t next = 0;              // offset after the last byte kept
  };
  Collected out, err;
  out.next = options.stdout_offset;
  err.next = options.stderr_offset;
  bool enough = false;
  ExecEventFn on_event = [&](const ExecEvent& event) -> Status {
    Collected* c = event.type == ExecEvent::Type::kStdout   ? &out
                   : event.type == ExecEvent::Type::kStderr ? &err
                                                            : nullptr;
    if (!c) return {};
    uint64_t at = event.offset.value_or(c->next);
    if (!c->first) c->first = at;
    if (c->data.size() < max) {
      std::string_view piece = Utf8Prefix(event.data, max - c->data.size());
      c->data.append(piece);
      c->next = at + piece.size();
    }
    if (out.data.size() >= max && err.data.size() >= max) {
      enough = true;  // both streams are full: stop reading (the disconnect is harmless)
      return Fail(ErrorCode::kResourceExhausted, "enough output");
    }
    return {};
  };
  auto ended = backend.ReadProcessOutput(*ws, id, options, on_event, ToolContext::CallDeadline());
  if (!ended && !enough) return Fail(ended.error());

  std::string state = info->running ? "still running" : DescribeExit(info->exit);
  std::string text = fmt::format("{} — {}\n", DescribeProcess(*info), state);
  auto section = [&](std::string_view name, const Collected& c, uint64_t asked, uint64_t total) {
    if (c.data.empty()) {
      text += fmt::format("--- {}: nothing after byte {} (of {}) ---\n", name, asked, total);
      return;
    }
    std::string note;
    if (c.first && *c.first > asked) {
      note = fmt::format("; bytes {}..{} are no longer buffered", asked, *c.first);
    }
    text += fmt::format("--- {} bytes {}..{} of {}{} ---\n", name, c.first.value_or(asked), c.next,
                        total, note);
    text += c.data;
    if (!text.ends_with('\n')) text += '\n';
  };
  section("stdout", out, options.stdout_offset, info->stdout_bytes);
  section("stderr", err, options.stderr_offset, info->stderr_bytes);
  bool more = out.next < info->stdout_bytes || err.next < info->stderr_bytes || info->running;
  if (more) {
    text += fmt::format("For later output call process_output with stdout_offset={} "
                        "stderr_offset={}.",
                        out.next, err.next);
  }
  json structured = info->ToJson();
  structured["stdout"] = out.data;
  structured["stderr"] = err.data;
  structured["next_stdout_offset"] = out.next;
  structured["next_stderr_offset"] = err.next;
  return ToolResult::Text(std::move(text), structured);
}

Result<ToolResult> ProcessKill(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  std::string id = IdArg(args);
  Result<protocol::ProcessInfo> info;
  std::string what;
  if (args.contains("signal")) {
    std::string signal = args["signal"].get<std::string>();
    auto valid = protocol::SignalFromName(signal);
    if (!valid) return Fail(valid.error());
    info = ctx.backend().SignalProcess(*ws, id, signal, ToolContext::CallDeadline());
    what = fmt::format("Sent SIG{} to", protocol::SignalName(*valid));
  } else {
    info = ctx.backend().KillProcess(*ws, id, ToolContext::CallDeadline());
    what = "Killed the process group of";
  }
  if (!info) return Fail(info.error());
  return ToolResult::Text(fmt::format("{} {}", what, DescribeProcess(*info)), info->ToJson());
}

json Offset(std::string_view description) {
  json out = json::object();
  out["type"] = "integer";
  out["description"] = std::string(description);
  out["minimum"] = 0;
  return out;
}

json IdSchema() {
  json id = json::object();
  id["description"] = "The process: its pid, or the tag given when it was started.";
  json as_string = json::object();
  as_string["type"] = "string";
  json as_int = json::object();
  as_int["type"] = "integer";
  id["anyOf"] = json::array({as_string, as_int});
  return id;
}

}  // namespace

std::vector<Tool> ExecTools() {
  std::vector<Tool> tools;

  json exec = json::object();
  json cmd = json::object();
  cmd["description"] =
      "The command: a string run by /bin/sh -c (pipes, &&, redirections work), or an argv "
      "array run without a shell, e.g. [\"python3\", \"-c\", \"print(1)\"].";
  json cmd_string = json::object();
  cmd_string["type"] = "string";
  cmd_string["minLength"] = 1;
  json cmd_argv = json::object();
  cmd_argv["type"] = "array";
  cmd_argv["items"] = json::object({{"type", "string"}});
  cmd_argv["minItems"] = 1;
  cmd["anyOf"] = json::array({cmd_string, cmd_argv});
  exec["cmd"] = cmd;
  exec["workspace"] = schema::WorkspaceArg();
  exec["cwd"] = schema::String("Working directory (default: the user's home). Your files "
                               "belong under /workspace, the durable disk.");
  exec["env"] = json::object();
  exec["env"]["type"] = "object";
  exec["env"]["description"] = "Extra environment variables.";
  exec["env"]["additionalProperties"] = json::object({{"type", "string"}});
  exec["stdin"] = schema::String("Text written to the command's standard input (then closed).");
  exec["timeout"] = schema::Integer(
      fmt::format("Seconds before the command and its children are killed (default {} when "
                  "waiting; none in the background).",
                  kDefaultTimeoutSeconds),
      1, kMaxTimeoutSeconds);
  exec["background"] = schema::Boolean(
      "Start the command and answer at once with its pid (and tag), for servers, watchers and "
      "long builds; read its output later with process_output.");
  exec["tag"] = schema::String("A name for the process (e.g. 'dev-server') to use instead of "
                               "its pid in process_output and process_kill.");
  exec["user"] = schema::String("Run as this user (default: 'agent', who has passwordless sudo).");
  exec["max_output"] = schema::Integer(
      fmt::format("Bytes of each of stdout and stderr to show (default {}); past that the "
                  "start and the end are kept.",
                  kDefaultOutputBytes),
      1024, kMaxOutputBytes);
  json exec_hints = Mutating(true, false);
  exec_hints["openWorldHint"] = true;
  tools.push_back(Tool{
      "exec", "Run a command",
      "Run a command in a workspace (a Debian Linux VM) and wait for it: answers the exit "
      "code, stdout and stderr (long output keeps its start and end). Install what you need "
      "with sudo apt-get, pip or npm: it stays. A stopped workspace starts by itself first. "
      "With background: true it answers at once with a pid; use that for servers and anything "
      "that runs longer than a few minutes.",
      schema::Object(exec, {"cmd"}), exec_hints, Exec});

  json list = json::object();
  list["workspace"] = schema::WorkspaceArg();
  tools.push_back(Tool{"process_list", "List processes",
                       "List the processes started through Berth in a workspace (exec, "
                       "background ones included): pid, tag, command, running or how they "
                       "ended.",
                       schema::Object(list), ReadOnly(), ProcessList});

  json output = json::object();
  output["id"] = IdSchema();
  output["workspace"] = schema::WorkspaceArg();
  output["max_bytes"] = schema::Integer(
      fmt::format("Bytes of each stream to show (default {}).", kDefaultOutputBytes), 1,
      kMaxOutputBytes);
  output["stdout_offset"] = Offset(
      "Show stdout from this byte on (the offset a previous call gave). Default: the last "
      "max_bytes.");
  output["stderr_offset"] = Offset("Show stderr from this byte on; as stdout_offset.");
  output["wait"] = schema::Integer(
      "Wait up to this many seconds for the process to end before answering (default 0).", 0,
      kMaxWaitSeconds);
  tools.push_back(Tool{
      "process_output", "Read a process's output",
      "Read the output of a process started with exec (usually in the background), and whether "
      "it still runs or how it ended. Without offsets it shows the latest output; each answer "
      "gives the offsets to pass to read on from there. 'wait' waits for it to end.",
      schema::Object(output, {"id"}), ReadOnly(), ProcessOutput});

  json kill = json::object();
  kill["id"] = IdSchema();
  kill["workspace"] = schema::WorkspaceArg();
  kill["signal"] = schema::String("Send this signal instead (TERM, INT, HUP, KILL, ...) to the "
                                  "process only. Default: kill its whole process group.");
  tools.push_back(Tool{"process_kill", "Stop a process",
                       "Stop a process started with exec: kills it and its children, or sends "
                       "'signal'.",
                       schema::Object(kill, {"id"}), Mutating(true, true), ProcessKill});
  return tools;
}

}  // namespace berth::mcp
