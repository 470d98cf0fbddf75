#include "mcp/agent_backend.h"

#include <charconv>

#include <fmt/format.h>

#include "common/client/exec.h"
#include "common/client/files.h"
#include "common/client/ports.h"

namespace berth::mcp {
namespace {

using http::bhttp::verb;

// "bytes a-b/total" or "bytes */total" → total.
std::optional<uint64_t> TotalFromContentRange(std::string_view header) {
  auto slash = header.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view text = header.substr(slash + 1);
  uint64_t total = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), total);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return total;
}

}  // namespace

protocol::ExecRequest WithEnv(const protocol::ExecRequest& request, const nlohmann::json& env) {
  protocol::ExecRequest out = request;
  if (!env.is_object()) return out;
  for (const auto& [name, value] : env.items()) {
    if (!value.is_string() || out.env.contains(name)) continue;
    out.env[name] = value.get<std::string>();
  }
  return out;
}

Result<protocol::ExitStatus> AgentBackend::RunCommand(std::string_view ws,
                                                     const protocol::ExecRequest& request,
                                                     const ExecEventFn& on_event,
                                                     Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kWrite, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  auto with_env = WithEnv(request, agent_session->env);
  auto began = std::chrono::steady_clock::now();
  auto exit = client::ExecStream(agent.client, agent.scope, with_env, on_event);
  Ran ran;
  ran.request = &request;
  ran.exit = &exit;
  ran.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
  NoteRan(*agent_session, ran);
  return exit;
}

Result<StartedProcess> AgentBackend::StartProcess(std::string_view ws,
                                                 const protocol::ExecRequest& request,
                                                 Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kWrite, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  auto with_env = WithEnv(request, agent_session->env);
  auto started = client::StartBackground(agent.client, agent.scope, with_env);
  Ran ran;
  ran.request = &request;
  if (started) ran.pid = started->pid;
  if (!started) ran.refused = &started.error();
  NoteRan(*agent_session, ran);
  if (!started) return Fail(started.error());
  StartedProcess out;
  out.pid = started->pid;
  out.tag = started->tag;
  return out;
}

Result<std::vector<protocol::ProcessInfo>> AgentBackend::ListProcesses(std::string_view ws,
                                                                      Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  return client::ListProcesses(agent.client, agent.scope);
}

Result<protocol::ProcessInfo> AgentBackend::GetProcess(std::string_view ws, std::string_view id,
                                                      Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  return client::GetProcess(agent.client, agent.scope, id);
}

Result<protocol::ProcessInfo> AgentBackend::WaitForProcess(std::string_view ws,
                                                          std::string_view id,
                                                          Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  auto info = client::GetProcess(agent.client, agent.scope, id);
  if (!info || !info->running) return info;
  // Follow its output from where it is now (nothing old comes again) until the end event:
  // the agent says the moment it ends, and keepalives carry the stream while it is quiet.
  client::OutputOptions options;
  options.follow = true;
  options.stdout_offset = info->stdout_bytes;
  options.stderr_offset = info->stderr_bytes;
  // The follow stops a little before the deadline, which leaves time to look at the process
  // once more within it.
  constexpr std::chrono::seconds kLastLook{2};
  bool reserve = Remaining(deadline) > 2 * kLastLook;
  auto follower_session = OpenAgent(ws, Access::kRead, reserve ? deadline - kLastLook : deadline);
  if (!follower_session) return Fail(follower_session.error());
  auto& follower = follower_session->agent;
  auto ended = client::ProcessOutput(follower.client, follower.scope, id, options, {});
  if (!ended && ended.error().code != ErrorCode::kDeadlineExceeded) return Fail(ended.error());
  if (!reserve && !ended) return info;  // out of time: as it was, still running
  return client::GetProcess(agent.client, agent.scope, id);
}

Result<std::optional<protocol::ExitStatus>> AgentBackend::ReadProcessOutput(
    std::string_view ws, std::string_view id, const OutputRange& range,
    const ExecEventFn& on_event, Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  client::OutputOptions options;
  options.stdout_offset = range.stdout_offset;
  options.stderr_offset = range.stderr_offset;
  return client::ProcessOutput(agent.client, agent.scope, id, options, on_event);
}

Result<protocol::ProcessInfo> AgentBackend::SignalProcess(std::string_view ws, std::string_view id,
                                                         std::string_view signal,
                                                         Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kWrite, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  return client::Signal(agent.client, agent.scope, id, signal);
}

Result<protocol::ProcessInfo> AgentBackend::KillProcess(std::string_view ws, std::string_view id,
                                                       Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kWrite, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  return client::Kill(agent.client, agent.scope, id);
}

Result<protocol::FileInfo> AgentBackend::StatPath(std::string_view ws, const std::string& path,
                                                 Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  return client::Stat(agent.client, agent.scope, path);
}

// GET with a Range header; works as well when the server answers the whole file (it is skipped
// and cut here).
Result<FileChunk> AgentBackend::ReadFile(std::string_view ws, const std::string& path,
                                        uint64_t offset, uint64_t max, Deadline deadline) {
  FileChunk piece;
  piece.offset = offset;
  if (max == 0) return piece;
  int status = 0;
  bool is_json = false;
  uint64_t skip = 0;
  bool enough = false;
  client::Headers headers = {{"Range", fmt::format("bytes={}-{}", offset, offset + max - 1)}};
  auto on_status = [&](const client::Response& head) {
    status = head.status;
    is_json = head.Header("Content-Type").starts_with("application/json");
    if (auto range = TotalFromContentRange(head.Header("Content-Range")); range) {
      piece.size = range;
    } else if (status == 200 && !is_json) {
      uint64_t length = 0;
      auto text = head.Header("Content-Length");
      if (std::from_chars(text.data(), text.data() + text.size(), length).ec == std::errc()) {
        piece.size = length;
      }
    }
    if (status == 200) skip = offset;  // the server ignored the range
  };
  client::BodySink sink = [&](std::string_view data) -> Status {
    if (is_json && status == 200) {
      piece.directory = true;  // a directory's listing: not needed here
      enough = true;
      return Fail(ErrorCode::kFailedPrecondition, "directory");
    }
    size_t skipped = static_cast<size_t>(std::min<uint64_t>(skip, data.size()));
    skip -= skipped;
    data.remove_prefix(skipped);
    size_t room = static_cast<size_t>(max - piece.data.size());
    piece.data.append(data.substr(0, room));
    if (piece.data.size() >= max) {
      enough = true;  // stop reading: the disconnect is harmless
      return Fail(ErrorCode::kResourceExhausted, "enough");
    }
    return {};
  };
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  auto result = agent.client.Stream(verb::get, client::FilesTarget(agent.scope, path), headers,
                                    nullptr, std::nullopt, sink, on_status);
  if (!result && !enough) {
    if (status == 416) {
      uint64_t total = piece.size.value_or(0);
      if (offset == 0 && total == 0) {
        piece.size = 0;
        return piece;  // an empty file
      }
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("offset {} is past the end of {} ({} bytes)", offset, path, total));
    }
    return Fail(result.error());
  }
  if (piece.directory) piece.data.clear();
  return piece;
}

Result<protocol::FileInfo> AgentBackend::WriteFile(std::string_view ws, const std::string& path,
                                                  std::string_view content,
                                                  const WriteOptions& options,
                                                  Deadline deadline) {
  client::UploadOptions upload;
  upload.mode = options.mode;
  upload.overwrite = options.overwrite;
  auto agent_session = OpenAgent(ws, Access::kWrite, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  auto written = client::UploadBytes(agent.client, agent.scope, path, content, upload);
  if (written) NoteFileChange(*agent_session, "file_written", path, {{"bytes", content.size()}});
  return written;
}

Result<protocol::DirListing> AgentBackend::ListDirectory(std::string_view ws,
                                                        const std::string& path,
                                                        Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  return client::List(agent.client, agent.scope, path);
}

Status AgentBackend::DeletePath(std::string_view ws, const std::string& path, bool recursive,
                               Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kWrite, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  auto removed = client::Remove(agent.client, agent.scope, path, recursive);
  if (removed) NoteFileChange(*agent_session, "file_deleted", path, {{"recursive", recursive}});
  return removed;
}

Result<std::vector<protocol::PortInfo>> AgentBackend::ListPorts(std::string_view ws,
                                                               Deadline deadline) {
  auto agent_session = OpenAgent(ws, Access::kRead, deadline);
  if (!agent_session) return Fail(agent_session.error());
  auto& agent = agent_session->agent;
  return client::ListPorts(agent.client, agent.scope);
}

}  // namespace berth::mcp
