#include "mcp/fake_backend.h"

#include <cmath>

#include <algorithm>

#include <fmt/format.h>

#include "common/protocol/exec.h"

namespace berth::mcp {
namespace {

using v1::State;

std::string BaseName(const std::string& path) {
  return path == "/" ? "/" : path.substr(path.rfind('/') + 1);
}

bool Under(const std::string& path, const std::string& dir) {
  std::string prefix = dir == "/" ? "/" : dir + "/";
  return path.size() > prefix.size() && path.starts_with(prefix);
}

protocol::FileInfo InfoFor(const std::string& path, std::string type, uint64_t size, uint32_t mode,
                           int64_t mtime_ns) {
  protocol::FileInfo info;
  info.name = BaseName(path);
  info.path = path;
  info.type = std::move(type);
  info.size = size;
  info.mode = mode;
  info.mtime_ns = mtime_ns;
  info.owner = "agent";
  info.group = "agent";
  info.uid = info.gid = 1000;
  return info;
}

}  // namespace

FakeBackend::FakeBackend() {
  script_ = [](const protocol::ExecRequest& request,
               const ExecEventFn& on_event) -> Result<protocol::ExitStatus> {
    protocol::ExecEvent start(protocol::ExecEvent::Type::kStart);
    start.pid = 100;
    if (auto s = on_event(start); !s) return Fail(s.error());
    auto argv = protocol::CommandArgv(request.cmd);
    protocol::ExecEvent out(protocol::ExecEvent::Type::kStdout);
    out.data = fmt::format("{}", fmt::join(argv, " "));
    if (auto s = on_event(out); !s) return Fail(s.error());
    protocol::ExitStatus exit;
    exit.exit_code = 0;
    protocol::ExecEvent end(protocol::ExecEvent::Type::kEnd);
    end.exit = exit;
    if (auto s = on_event(end); !s) return Fail(s.error());
    return exit;
  };
}

Status FakeBackend::EnterLocked(const std::string& method, Deadline deadline) {
  calls_.push_back(method);
  last_deadline_ = deadline;
  auto it = failures_.find(method);
  if (it == failures_.end()) return {};
  Error error = it->second;
  failures_.erase(it);
  return Fail(std::move(error));
}

Result<FakeBackend::Space*> FakeBackend::FindLocked(std::string_view ws) {
  for (auto& [id, space] : spaces_) {
    if (id == ws || space.ws.name == ws) return &space;
  }
  return Fail(ErrorCode::kNotFound, fmt::format("workspace '{}' not found", ws));
}

Result<FakeBackend::Space*> FakeBackend::AgentLocked(std::string_view ws) {
  auto space = FindLocked(ws);
  if (!space) return space;
  v1::Workspace& w = (*space)->ws;
  if (w.state == State::kStopped || w.state == State::kHibernated) {
    if (!w.auto_start) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("workspace '{}' is {} and auto_start is off", w.name,
                              v1::StateName(w.state)));
    }
    w.state = State::kRunning;  // woken, at once
  }
  if (w.state != State::kRunning && w.state != State::kCreating && w.state != State::kStarting) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("workspace '{}' is {}", w.name, v1::StateName(w.state)));
  }
  w.state = State::kRunning;
  return space;
}

Result<FakeBackend::Process*> FakeBackend::FindProcessLocked(Space& space, std::string_view id) {
  for (auto& [pid, process] : space.processes) {
    if (std::to_string(pid) == id || (process.info.tag && *process.info.tag == id)) {
      return &process;
    }
  }
  return Fail(ErrorCode::kNotFound, fmt::format("no process '{}'", id));
}

bool FakeBackend::IsDirectoryLocked(const Space& space, const std::string& path) const {
  if (path == "/" || path == "/workspace") return true;
  for (const auto& [file, _] : space.files) {
    if (Under(file, path)) return true;
  }
  return false;
}

// --- the caller, workspaces -------------------------------------------------------------------

Result<v1::Me> FakeBackend::WhoAmI(Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("WhoAmI", deadline); !s) return Fail(s.error());
  v1::Me me;
  me.tenant_id = "tn_fake";
  me.tenant_name = "default";
  me.key_id = "key_fake";
  me.key_prefix = "bk_fake";
  me.scope = v1::Scope::kWrite;
  return me;
}

std::string FakeBackend::AddWorkspaceForTest(const std::string& name, State state,
                                             v1::StringMap labels) {
  std::lock_guard lock(mutex_);
  Space space;
  space.ws.id = fmt::format("ws_{:016x}", next_id_++);
  space.ws.name = name;
  space.ws.tenant = "tn_fake";
  space.ws.image = "base";
  space.ws.image_version = "v1";
  space.ws.size = "small";
  space.ws.state = state;
  space.ws.transport = "unix";
  space.ws.labels = std::move(labels);
  space.ws.created_at = space.ws.updated_at = 1'700'000'000 + next_id_;
  std::string id = space.ws.id;
  spaces_.emplace(id, std::move(space));
  return id;
}

Result<v1::Workspace> FakeBackend::CreateWorkspace(const v1::CreateWorkspace& request,
                                                   Deadline deadline) {
  {
    std::lock_guard lock(mutex_);
    if (auto s = EnterLocked("CreateWorkspace", deadline); !s) return Fail(s.error());
    last_create_ = request;
    for (const auto& [id, space] : spaces_) {
      if (space.ws.name == request.name) {
        return Fail(ErrorCode::kAlreadyExists,
                    fmt::format("a workspace named '{}' exists", request.name));
      }
    }
  }
  std::string id = AddWorkspaceForTest(request.name, State::kCreating,
                                       request.labels.value_or(v1::StringMap{}));
  std::lock_guard lock(mutex_);
  v1::Workspace& ws = spaces_.at(id).ws;
  ws.image = request.image.value_or("base");
  ws.size = request.cpus || request.memory_mib ? std::nullopt
                                               : std::optional<std::string>(request.size.value_or("small"));
  ws.cpus = request.cpus.value_or(1);
  ws.memory_mib = request.memory_mib.value_or(1024);
  ws.disk_gib = request.disk_gib.value_or(10);
  ws.idle_timeout = request.idle_timeout.value_or(1800);
  ws.idle_action = request.idle_action.value_or(v1::IdleAction::kStop);
  ws.max_runtime = request.max_runtime;
  ws.auto_start = request.auto_start.value_or(true);
  ws.env = request.env.value_or(v1::StringMap{});
  return ws;
}

void FakeBackend::AddTemplateForTest(v1::Template t) {
  std::lock_guard lock(mutex_);
  templates_.push_back(std::move(t));
}

Result<std::vector<v1::Template>> FakeBackend::ListTemplates(Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ListTemplates", deadline); !s) return Fail(s.error());
  return templates_;
}

Result<v1::Workspace> FakeBackend::CreateFromTemplate(std::string_view name, std::string_view template_name,
                                                      Deadline deadline) {
  v1::Template from;
  {
    std::lock_guard lock(mutex_);
    if (auto s = EnterLocked("CreateFromTemplate", deadline); !s) return Fail(s.error());
    auto t = std::find_if(templates_.begin(), templates_.end(),
                          [&](const v1::Template& t) { return t.name == template_name || t.id == template_name; });
    if (t == templates_.end()) return Fail(ErrorCode::kNotFound, fmt::format("no template '{}'", template_name));
    from = *t;
    for (const auto& [id, space] : spaces_) {
      if (space.ws.name == name) return Fail(ErrorCode::kAlreadyExists, fmt::format("a workspace named '{}' exists", name));
    }
  }
  std::string id = AddWorkspaceForTest(std::string(name), State::kCreating, {});
  std::lock_guard lock(mutex_);
  v1::Workspace& ws = spaces_.at(id).ws;
  ws.image = from.image.value_or("base");
  ws.forked_from = from.checkpoint_id;
  return ws;
}

Result<v1::Workspace> FakeBackend::GetWorkspace(std::string_view ws, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("GetWorkspace", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  return (*space)->ws;
}

Result<WorkspaceList> FakeBackend::ListWorkspaces(const v1::WorkspaceFilter& filter, size_t max,
                                                  Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ListWorkspaces", deadline); !s) return Fail(s.error());
  WorkspaceList out;
  for (const auto& [id, space] : spaces_) {  // in id order, as berthd lists them
    if (filter.state && space.ws.state != *filter.state) continue;
    bool labels_match = std::all_of(filter.labels.begin(), filter.labels.end(), [&](const auto& kv) {
      auto it = space.ws.labels.find(kv.first);
      return it != space.ws.labels.end() && it->second == kv.second;
    });
    if (!labels_match) continue;
    if (out.workspaces.size() == max) {
      out.more = true;
      break;
    }
    out.workspaces.push_back(space.ws);
  }
  return out;
}

Result<v1::Workspace> FakeBackend::StartWorkspace(std::string_view ws, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("StartWorkspace", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  v1::Workspace& w = (*space)->ws;
  if (w.state != State::kStopped && w.state != State::kHibernated && w.state != State::kError) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("workspace '{}' is {}", w.name, v1::StateName(w.state)));
  }
  w.state = State::kStarting;
  return w;
}

Result<v1::Workspace> FakeBackend::StopWorkspace(std::string_view ws, bool force,
                                                 Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked(force ? "StopWorkspace(force)" : "StopWorkspace", deadline); !s) {
    return Fail(s.error());
  }
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  v1::Workspace& w = (*space)->ws;
  if (w.state != State::kRunning && w.state != State::kStarting) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("workspace '{}' is {}", w.name, v1::StateName(w.state)));
  }
  w.state = State::kStopping;
  return w;
}

Result<v1::Workspace> FakeBackend::HibernateWorkspace(std::string_view ws, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("HibernateWorkspace", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  v1::Workspace& w = (*space)->ws;
  if (w.state != State::kRunning) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("workspace '{}' is {}", w.name, v1::StateName(w.state)));
  }
  w.state = State::kHibernating;
  return w;
}

Result<v1::Workspace> FakeBackend::DeleteWorkspace(std::string_view ws, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DeleteWorkspace", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  v1::Workspace out = (*space)->ws;
  out.state = State::kDeleting;
  spaces_.erase(out.id);
  return out;
}

Result<v1::Workspace> FakeBackend::WaitForState(std::string_view ws, State state,
                                                Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("WaitForState", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  v1::Workspace& w = (*space)->ws;
  // The transition under way completes now.
  switch (w.state) {
    case State::kCreating:
    case State::kStarting: w.state = State::kRunning; break;
    case State::kStopping: w.state = State::kStopped; break;
    case State::kHibernating: w.state = State::kHibernated; break;
    default: break;
  }
  if (w.state != state) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("workspace '{}' is {}", w.name, v1::StateName(w.state)));
  }
  return w;
}

// --- processes --------------------------------------------------------------------------------

void FakeBackend::ScriptCommandsForTest(CommandScript script) {
  std::lock_guard lock(mutex_);
  script_ = std::move(script);
}

Result<protocol::ExitStatus> FakeBackend::RunCommand(std::string_view ws,
                                                     const protocol::ExecRequest& request,
                                                     const ExecEventFn& on_event,
                                                     Deadline deadline) {
  CommandScript script;
  {
    std::lock_guard lock(mutex_);
    if (auto s = EnterLocked("RunCommand", deadline); !s) return Fail(s.error());
    auto space = AgentLocked(ws);
    if (!space) return Fail(space.error());
    script = script_;
  }
  // Outside the lock: a script may call back into the fake.
  return script(request, on_event);
}

Result<StartedProcess> FakeBackend::StartProcess(std::string_view ws,
                                                 const protocol::ExecRequest& request,
                                                 Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("StartProcess", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  Process process;
  process.info.pid = next_pid_++;
  process.info.tag = request.tag;
  process.info.cmd = protocol::CommandToJson(request.cmd);
  process.info.user = request.user.value_or("agent");
  process.info.running = true;
  process.info.started_at = "2026-01-01T00:00:00Z";
  StartedProcess out;
  out.pid = process.info.pid;
  out.tag = request.tag;
  (*space)->processes.emplace(out.pid, std::move(process));
  return out;
}

void FakeBackend::AppendOutputForTest(std::string_view ws, int pid, std::string_view stdout_data,
                                      std::string_view stderr_data) {
  std::lock_guard lock(mutex_);
  auto space = FindLocked(ws);
  if (!space) return;
  Process& p = (*space)->processes.at(pid);
  p.stdout_data.append(stdout_data);
  p.stderr_data.append(stderr_data);
  p.info.stdout_bytes = p.stdout_data.size();
  p.info.stderr_bytes = p.stderr_data.size();
}

void FakeBackend::EndProcessForTest(std::string_view ws, int pid, int exit_code) {
  std::lock_guard lock(mutex_);
  auto space = FindLocked(ws);
  if (!space) return;
  Process& p = (*space)->processes.at(pid);
  p.info.running = false;
  p.info.exit.exit_code = exit_code;
  p.info.ended_at = "2026-01-01T00:00:01Z";
}

Result<std::vector<protocol::ProcessInfo>> FakeBackend::ListProcesses(std::string_view ws,
                                                                      Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ListProcesses", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  std::vector<protocol::ProcessInfo> out;
  for (const auto& [pid, process] : (*space)->processes) out.push_back(process.info);
  return out;
}

Result<protocol::ProcessInfo> FakeBackend::GetProcess(std::string_view ws, std::string_view id,
                                                      Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("GetProcess", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  auto process = FindProcessLocked(**space, id);
  if (!process) return Fail(process.error());
  return (*process)->info;
}

Result<protocol::ProcessInfo> FakeBackend::WaitForProcess(std::string_view ws,
                                                          std::string_view id,
                                                          Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("WaitForProcess", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  auto process = FindProcessLocked(**space, id);
  if (!process) return Fail(process.error());
  // Nothing ends by itself here: as the deadline finds it.
  return (*process)->info;
}

Result<std::optional<protocol::ExitStatus>> FakeBackend::ReadProcessOutput(
    std::string_view ws, std::string_view id, const OutputRange& range,
    const ExecEventFn& on_event, Deadline deadline) {
  std::vector<protocol::ExecEvent> events;
  std::optional<protocol::ExitStatus> end;
  {
    std::lock_guard lock(mutex_);
    if (auto s = EnterLocked("ReadProcessOutput", deadline); !s) return Fail(s.error());
    auto space = AgentLocked(ws);
    if (!space) return Fail(space.error());
    auto process = FindProcessLocked(**space, id);
    if (!process) return Fail(process.error());
    const Process& p = **process;
    auto add = [&](protocol::ExecEvent::Type type, const std::string& data, uint64_t offset) {
      if (offset >= data.size()) return;
      protocol::ExecEvent event(type);
      event.data = data.substr(offset);
      event.offset = offset;
      events.push_back(std::move(event));
    };
    add(protocol::ExecEvent::Type::kStdout, p.stdout_data, range.stdout_offset);
    add(protocol::ExecEvent::Type::kStderr, p.stderr_data, range.stderr_offset);
    if (!p.info.running) end = p.info.exit;
  }
  for (const auto& event : events) {
    if (auto s = on_event(event); !s) return Fail(s.error());
  }
  return end;
}

Result<protocol::ProcessInfo> FakeBackend::SignalProcess(std::string_view ws, std::string_view id,
                                                         std::string_view signal,
                                                         Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("SignalProcess", deadline); !s) return Fail(s.error());
  auto signo = protocol::SignalFromName(signal);
  if (!signo) return Fail(signo.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  auto process = FindProcessLocked(**space, id);
  if (!process) return Fail(process.error());
  return (*process)->info;
}

Result<protocol::ProcessInfo> FakeBackend::KillProcess(std::string_view ws, std::string_view id,
                                                       Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("KillProcess", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  auto process = FindProcessLocked(**space, id);
  if (!process) return Fail(process.error());
  protocol::ProcessInfo& info = (*process)->info;
  info.running = false;
  info.exit.signal = "KILL";
  info.exit.exit_code = 128 + 9;
  return info;
}

// --- files ------------------------------------------------------------------------------------

Result<protocol::FileInfo> FakeBackend::StatPath(std::string_view ws, const std::string& path,
                                                 Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("StatPath", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  auto it = (*space)->files.find(path);
  if (it != (*space)->files.end()) {
    return InfoFor(path, "file", it->second.content.size(), it->second.mode, it->second.mtime_ns);
  }
  if (IsDirectoryLocked(**space, path)) return InfoFor(path, "dir", 4096, 0755, clock_ns_);
  return Fail(ErrorCode::kNotFound, fmt::format("stat {}: No such file or directory", path));
}

Result<FileChunk> FakeBackend::ReadFile(std::string_view ws, const std::string& path,
                                        uint64_t offset, uint64_t max, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ReadFile", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  FileChunk chunk;
  chunk.offset = offset;
  auto it = (*space)->files.find(path);
  if (it == (*space)->files.end()) {
    if (IsDirectoryLocked(**space, path)) {
      chunk.directory = true;
      return chunk;
    }
    return Fail(ErrorCode::kNotFound, fmt::format("open {}: No such file or directory", path));
  }
  const std::string& content = it->second.content;
  chunk.size = content.size();
  if (offset > content.size() || (offset == content.size() && offset > 0)) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("offset {} is past the end of {} ({} bytes)", offset, path,
                            content.size()));
  }
  chunk.data = content.substr(offset, max);
  return chunk;
}

Result<protocol::FileInfo> FakeBackend::WriteFile(std::string_view ws, const std::string& path,
                                                  std::string_view content,
                                                  const WriteOptions& options, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("WriteFile", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  auto& files = (*space)->files;
  auto it = files.find(path);
  if (it != files.end() && !options.overwrite) {
    return Fail(ErrorCode::kAlreadyExists, fmt::format("{} exists", path));
  }
  if (IsDirectoryLocked(**space, path)) {
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("{} is a directory", path));
  }
  File file;
  file.content = std::string(content);
  file.mode = options.mode.value_or(it != files.end() ? it->second.mode : 0644);
  file.mtime_ns = (clock_ns_ += 1'000'000);
  files[path] = file;
  return InfoFor(path, "file", file.content.size(), file.mode, file.mtime_ns);
}

Result<protocol::DirListing> FakeBackend::ListDirectory(std::string_view ws,
                                                        const std::string& path,
                                                        Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ListDirectory", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  if ((*space)->files.contains(path)) {
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("{} is not a directory", path));
  }
  if (!IsDirectoryLocked(**space, path)) {
    return Fail(ErrorCode::kNotFound, fmt::format("{}: No such file or directory", path));
  }
  protocol::DirListing listing;
  listing.path = path;
  std::map<std::string, protocol::FileInfo> entries;
  for (const auto& [file, data] : (*space)->files) {
    if (!Under(file, path)) continue;
    std::string rest = file.substr(path == "/" ? 1 : path.size() + 1);
    auto slash = rest.find('/');
    std::string child = (path == "/" ? "" : path) + "/" + rest.substr(0, slash);
    if (slash == std::string::npos) {
      entries[child] = InfoFor(child, "file", data.content.size(), data.mode, data.mtime_ns);
    } else if (!entries.contains(child)) {
      entries[child] = InfoFor(child, "dir", 4096, 0755, clock_ns_);
    }
  }
  for (auto& [name, info] : entries) listing.entries.push_back(std::move(info));
  return listing;
}

Status FakeBackend::DeletePath(std::string_view ws, const std::string& path, bool recursive,
                               Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DeletePath", deadline); !s) return s;
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  auto& files = (*space)->files;
  if (files.erase(path) > 0) return {};
  if (!IsDirectoryLocked(**space, path)) {
    return Fail(ErrorCode::kNotFound, fmt::format("{}: No such file or directory", path));
  }
  if (!recursive) {
    return Fail(ErrorCode::kAlreadyExists, fmt::format("rmdir {}: Directory not empty", path));
  }
  std::erase_if(files, [&](const auto& entry) { return Under(entry.first, path); });
  return {};
}

// --- ports, test controls ---------------------------------------------------------------------

Result<std::vector<protocol::PortInfo>> FakeBackend::ListPorts(std::string_view ws,
                                                               Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ListPorts", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  return (*space)->ports;
}

Result<v1::Preview> FakeBackend::CreatePreview(std::string_view ws,
                                               const v1::CreatePreview& request,
                                               Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("CreatePreview", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);  // a preview does not wake the workspace
  if (!space) return Fail(space.error());
  last_preview_ = request;
  v1::Preview preview;
  preview.id = fmt::format("pv_fake{}", next_preview_++);
  preview.workspace_id = (*space)->ws.id;
  preview.port = request.port;
  preview.is_public = request.is_public;
  preview.status = "active";
  preview.url = fmt::format("http://{}-{}.preview.localhost:8080/", request.port, (*space)->ws.name);
  if (!request.is_public) {
    preview.token = "bpt_" + preview.id;
    preview.link = preview.url + "?berth_preview_token=" + *preview.token;
  }
  preview.created_at = 1'700'000'000;
  preview.expires_at = preview.created_at + request.expires_in_s.value_or(24 * 3600);
  return preview;
}

v1::Checkpoint FakeBackend::CheckpointLocked(Space& space, std::string name, std::string kind, bool memory) {
  int n = next_checkpoint_++;
  v1::Checkpoint c;
  c.id = fmt::format("cp_fake{}", n);
  c.workspace_id = space.ws.id;
  c.name = name.empty() ? c.id : std::move(name);
  c.kind = std::move(kind);
  c.memory = memory;
  if (memory) c.pause_ms = kFakePauseMs;
  c.parent = space.disk_parent;
  c.taken_while = std::string(v1::StateName(space.ws.state));
  c.size_bytes = 4096;
  c.created_by = "key:key_fake";
  c.created_at = 1'700'000'000 + n;
  space.checkpoints.push_back(c);
  space.disk_parent = c.id;
  return c;
}

namespace {
Status Stopped(const v1::Workspace& w, std::string_view what) {
  if (w.state == State::kStopped) return {};
  return Fail(ErrorCode::kFailedPrecondition,
              fmt::format("cannot {} workspace '{}' while it is {}: stop it first", what, w.name,
                          v1::StateName(w.state)));
}
}  // namespace

Result<v1::Checkpoint> FakeBackend::CreateCheckpoint(std::string_view ws,
                                                     const v1::CreateCheckpoint& request,
                                                     Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("CreateCheckpoint", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  // As berthd: a running, stopped or hibernated workspace's disks; the memory of a running or
  // hibernated one.
  const v1::Workspace& w = (*space)->ws;
  if (request.memory && w.state == State::kStopped) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("workspace '{}' is stopped: it has no memory to checkpoint; take a checkpoint of its "
                            "disks (\"memory\": false), or start it first",
                            w.name));
  }
  if (w.state != State::kStopped && w.state != State::kRunning && w.state != State::kHibernated) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("cannot checkpoint workspace '{}' while it is {}: wait until it is running, stopped or "
                            "hibernated",
                            w.name, v1::StateName(w.state)));
  }
  std::string name = request.name.value_or("");
  for (const auto& c : (*space)->checkpoints) {
    if (!name.empty() && c.name == name) {
      return Fail(ErrorCode::kAlreadyExists, fmt::format("a checkpoint named '{}' exists", name));
    }
  }
  return CheckpointLocked(**space, std::move(name), "manual", request.memory);
}

Result<std::vector<v1::Checkpoint>> FakeBackend::ListCheckpoints(std::string_view ws, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ListCheckpoints", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  return std::vector<v1::Checkpoint>((*space)->checkpoints.rbegin(), (*space)->checkpoints.rend());
}

Result<client::CheckpointRestore> FakeBackend::RestoreCheckpoint(std::string_view ws, std::string_view cp,
                                                                 const v1::RestoreCheckpoint& request,
                                                                 Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked(request.undo ? "RestoreCheckpoint" : "RestoreCheckpoint(no undo)", deadline); !s) {
    return Fail(s.error());
  }
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  auto& list = (*space)->checkpoints;
  auto target = std::find_if(list.begin(), list.end(), [&](const v1::Checkpoint& c) { return c.id == cp || c.name == cp; });
  if (target == list.end()) {
    return Fail(ErrorCode::kNotFound, fmt::format("no checkpoint '{}' in this workspace", cp));
  }
  // As berthd for a checkpoint with memory: a running workspace's undo keeps its memory too,
  // and either way it ends starting (WaitForState finds it running, its programs resumed).
  // A checkpoint of disks only is restored into a stopped workspace here.
  v1::Workspace& w = (*space)->ws;
  const bool memory = target->memory;
  if (memory && w.state != State::kStopped && w.state != State::kRunning) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("cannot restore workspace '{}' while it is {}: start or stop it first", w.name,
                            v1::StateName(w.state)));
  }
  if (!memory) {
    if (auto s = Stopped(w, "restore"); !s) return Fail(s.error());
  }
  std::string target_id = target->id;  // the undo's push_back may move the list
  client::CheckpointRestore out;
  if (request.undo) out.undo = CheckpointLocked(**space, "", "before_restore", memory && w.state == State::kRunning);
  (*space)->disk_parent = target_id;
  if (memory) w.state = State::kStarting;
  out.workspace = w;
  return out;
}

protocol::DiffResult FakeBackend::CannedDiff() {
  protocol::DiffResult r;
  r.paths = {"/workspace", "/home/agent"};
  r.files.added = {{"/workspace/app", "dir", 2048, 3}, {"/workspace/notes.txt", "file", 12, 0}};
  r.files.changed = {{"/workspace/README.md", "file", 300, 0}};
  r.files.removed = {{"/home/agent/old.log", "file", 10, 0}};
  r.files.counts = {2, 1, 1};
  r.packages.installed = {{"curl", "", "8.5.0"}};
  r.packages.changed = {{"libc6", "2.36-9", "2.36-10"}};
  r.packages.removed = {{"nano", "7.2-1", ""}};
  r.took_ms = 420;
  return r;
}

Result<v1::CheckpointDiff> FakeBackend::DiffCheckpoint(std::string_view ws, std::string_view cp,
                                                       std::string_view to, int max_entries,
                                                       Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DiffCheckpoint", deadline); !s) return Fail(s.error());
  last_diff_ = DiffCall{std::string(ws), std::string(cp), std::string(to), max_entries};
  if (max_entries < 1 || max_entries > protocol::kMaxDiffEntries) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("max_entries must be 1 to {}", protocol::kMaxDiffEntries));
  }
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  // Both ends exist before the workspace is woken for them, as berthd checks.
  auto id_of = [&](std::string_view name) -> Result<std::string> {
    for (const auto& c : (*space)->checkpoints) {
      if (c.id == name || c.name == name) return c.id;
    }
    return Fail(ErrorCode::kNotFound,
                fmt::format("workspace '{}' has no checkpoint '{}'", (*space)->ws.name, name));
  };
  v1::CheckpointDiff out;
  auto from = id_of(cp);
  if (!from) return Fail(from.error());
  out.from = *from;
  out.to = "current";
  if (to != "current") {
    auto other = id_of(to);
    if (!other) return Fail(other.error());
    out.to = *other;
  }
  if (auto woken = AgentLocked(ws); !woken) return Fail(woken.error());
  out.result = diff_;
  // The guest cuts the file lists at max_entries; the package lists only at kMaxDiffEntries.
  auto cut = [&](std::vector<protocol::FileChange>& list) {
    if (list.size() <= static_cast<size_t>(max_entries)) return;
    list.resize(static_cast<size_t>(max_entries));
    out.result.files.truncated = true;
  };
  cut(out.result.files.added);
  cut(out.result.files.changed);
  cut(out.result.files.removed);
  return out;
}

namespace {
nlohmann::json NetworkAnswer(const v1::NetworkPolicy& policy) {
  nlohmann::json j = v1::ToJson(policy);
  j["isolated"] = true;
  j["counters"] = {{"refused_packets", 0}, {"refused_names", 0}};
  j["refused"] = nlohmann::json::array();
  j["refused_names"] = nlohmann::json::array();
  return j;
}
}  // namespace

Result<nlohmann::json> FakeBackend::GetNetwork(std::string_view ws, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("GetNetwork", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  return NetworkAnswer((*space)->network);
}

Result<nlohmann::json> FakeBackend::SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                               Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("SetNetwork", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  if (policy.egress != "open" && policy.egress != "none" && policy.egress != "allowlist") {
    return Fail(ErrorCode::kInvalidArgument, "egress must be open, none or allowlist");
  }
  (*space)->network = policy;
  return NetworkAnswer(policy);
}

Result<client::DesktopShot> FakeBackend::DesktopScreenshot(std::string_view ws, std::string_view format,
                                                           double scale, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DesktopScreenshot", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  client::DesktopShot shot;
  shot.screen_width = 1280;
  shot.screen_height = 800;
  shot.image_width = static_cast<int>(std::lround(1280 * scale));
  shot.image_height = static_cast<int>(std::lround(800 * scale));
  shot.mime = format == "jpeg" ? "image/jpeg" : "image/png";
  shot.bytes = fmt::format("{} {}x{}", format == "jpeg" ? "JPEG" : "PNG", shot.image_width, shot.image_height);
  return shot;
}

Result<nlohmann::json> FakeBackend::DesktopActions(std::string_view ws, const nlohmann::json& request,
                                                   Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DesktopActions", deadline); !s) return Fail(s.error());
  auto space = AgentLocked(ws);
  if (!space) return Fail(space.error());
  if (!request.is_object()) return Fail(ErrorCode::kInvalidArgument, "the body is an action or {\"actions\": [...]}");
  last_actions_ = request;
  size_t done = request.contains("actions") && request["actions"].is_array() ? request["actions"].size() : 1;
  return nlohmann::json{{"done", done}, {"screen", {{"width", 1280}, {"height", 800}}}};
}

Result<nlohmann::json> FakeBackend::DesktopControl(std::string_view ws, std::optional<std::chrono::seconds>,
                                                   Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DesktopControl", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  return nlohmann::json{{"holder", "agent"}, {"since", nullptr}, {"by", ""}, {"lease_expires", nullptr},
                        {"reason", ""}, {"private", false}};
}

Result<nlohmann::json> FakeBackend::DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                                     Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DesktopClipboard", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  if (!text) return nlohmann::json{{"text", clipboard_}};
  clipboard_ = *text;
  return nlohmann::json{{"bytes", text->size()}};
}

Result<nlohmann::json> FakeBackend::DesktopRequestHuman(std::string_view ws, std::string_view reason,
                                                        std::chrono::seconds, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("DesktopRequestHuman", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  const bool answered = reason != "nobody";
  nlohmann::json handback = answered ? nlohmann::json{{"note", fmt::format("done: {}", reason)},
                                                      {"by", "person"},
                                                      {"cause", "released"},
                                                      {"at", "2026-01-01T00:00:00Z"},
                                                      {"request", reason}}
                                     : nlohmann::json(nullptr);
  return nlohmann::json{{"holder", "agent"}, {"since", nullptr}, {"by", nullptr}, {"lease_expires", nullptr},
                        {"reason", nullptr}, {"private", false}, {"request", nullptr}, {"handback", handback},
                        {"answered", answered}, {"url", fmt::format("http://berth.test/w/{}/desktop", ws)}};
}

std::optional<nlohmann::json> FakeBackend::LastActionsForTest() const {
  std::lock_guard lock(mutex_);
  return last_actions_;
}

void FakeBackend::SetPortsForTest(std::string_view ws, std::vector<protocol::PortInfo> ports) {
  std::lock_guard lock(mutex_);
  if (auto space = FindLocked(ws); space) (*space)->ports = std::move(ports);
}

void FakeBackend::FailNextForTest(const std::string& method, Error error) {
  std::lock_guard lock(mutex_);
  failures_[method] = std::move(error);
}

std::vector<std::string> FakeBackend::CallsForTest() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

std::optional<v1::CreateWorkspace> FakeBackend::LastCreateForTest() const {
  std::lock_guard lock(mutex_);
  return last_create_;
}

std::optional<v1::CreatePreview> FakeBackend::LastPreviewForTest() const {
  std::lock_guard lock(mutex_);
  return last_preview_;
}

std::optional<FakeBackend::DiffCall> FakeBackend::LastDiffForTest() const {
  std::lock_guard lock(mutex_);
  return last_diff_;
}

void FakeBackend::SetDiffForTest(protocol::DiffResult result) {
  std::lock_guard lock(mutex_);
  diff_ = std::move(result);
}

Deadline FakeBackend::LastDeadlineForTest() const {
  std::lock_guard lock(mutex_);
  return last_deadline_;
}

std::optional<std::string> FakeBackend::FileForTest(std::string_view ws,
                                                    const std::string& path) const {
  std::lock_guard lock(mutex_);
  for (const auto& [id, space] : spaces_) {
    if (id != ws && space.ws.name != ws) continue;
    auto it = space.files.find(path);
    if (it != space.files.end()) return it->second.content;
  }
  return std::nullopt;
}

Result<std::vector<v1::Event>> FakeBackend::ListEvents(std::string_view ws, int64_t after, int limit,
                                                       const client::BerthClient::EventSelect& select,
                                                       Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (auto s = EnterLocked("ListEvents", deadline); !s) return Fail(s.error());
  auto space = FindLocked(ws);
  if (!space) return Fail(space.error());
  std::vector<v1::Event> out;
  for (const auto& e : (*space)->events) {
    if (e.id <= after) continue;
    if (!select.types.empty() && ("," + select.types + ",").find("," + e.type + ",") == std::string::npos) continue;
    if (static_cast<int>(out.size()) == limit) break;
    out.push_back(e);
  }
  return out;
}

void FakeBackend::AddEventForTest(const std::string& ws, v1::Event event) {
  std::lock_guard lock(mutex_);
  auto space = FindLocked(ws);
  if (!space) return;
  event.id = static_cast<int64_t>((*space)->events.size()) + 1;
  event.workspace = (*space)->ws.id;
  (*space)->events.push_back(std::move(event));
}

}  // namespace berth::mcp
