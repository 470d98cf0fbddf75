#include "controller/api/local_backend.h"

#include <future>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "controller/api/api_server.h"
#include "controller/api/json.h"
#include "controller/desktop/agent_hands.h"
#include "controller/desktop/clipboard.h"
#include "controller/network/network_api.h"
#include "controller/network/policy.h"
#include "controller/workspace/request.h"

namespace berth::api {

namespace asio = boost::asio;

namespace {

std::optional<workspace::State> ServiceState(v1::State state) {
  return workspace::StateFromName(v1::StateName(state));
}

}  // namespace

LocalBackend::LocalBackend(workspace::WorkspaceService& service, preview::PreviewService& previews,
                           asio::io_context& io, Principal principal, std::shared_ptr<McpCalls> calls,
                           desktop::DesktopService* desktop, asio::thread_pool* pool, std::string web_origin)
    : service_(service),
      previews_(previews),
      io_(io),
      principal_(std::move(principal)),
      calls_(std::move(calls)),
      desktop_(desktop),
      pool_(pool),
      web_origin_(std::move(web_origin)) {}

bool McpCalls::Enter() {
  std::lock_guard lock(mutex_);
  if (closing_) return false;
  ++running_;
  return true;
}

void McpCalls::Leave() {
  {
    std::lock_guard lock(mutex_);
    --running_;
  }
  cv_.notify_all();
}

void McpCalls::Close() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  cv_.notify_all();
}

bool McpCalls::closing() const {
  std::lock_guard lock(mutex_);
  return closing_;
}

int McpCalls::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

bool McpCalls::WaitIdle(std::chrono::milliseconds within) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, within, [&] { return running_ == 0; });
}

bool McpCalls::WaitUntil(const std::function<bool()>& ready) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return closing_ || ready(); });
  return ready();
}

void McpCalls::Notify() {
  { std::lock_guard lock(mutex_); }  // a waiter between its check and its wait sees the change
  cv_.notify_all();
}

template <class T>
T LocalBackend::Sync(workspace::Task<T> task) {
  // The result lands here; shared, because a call abandoned at shutdown finishes (or is
  // destroyed with the I/O context) after Sync has returned.
  struct Outcome {
    std::mutex mutex;
    std::optional<T> value;
  };
  auto outcome = std::make_shared<Outcome>();
  auto calls = calls_;
  // A strand of its own: the service's waits (WaitForState, Wake) subscribe to its change feed,
  // which wants its subscriber on a strand.
  asio::co_spawn(asio::make_strand(io_), std::move(task), [outcome, calls](std::exception_ptr error, T value) {
    {
      std::lock_guard lock(outcome->mutex);
      outcome->value.emplace(error ? T(Fail(ErrorCode::kInternal, "the call failed")) : std::move(value));
    }
    calls->Notify();
  });
  // berthd shutting down stops the service and the I/O threads, and the call would never end:
  // it ends at Close() instead.
  auto ready = [&] {
    std::lock_guard lock(outcome->mutex);
    return outcome->value.has_value();
  };
  if (!calls_->WaitUntil(ready)) return T(Fail(ErrorCode::kUnavailable, "berthd is shutting down"));
  std::lock_guard lock(outcome->mutex);
  return std::move(*outcome->value);
}

Status LocalBackend::Require(Scope needed) const {
  if (principal_.Allows(needed)) return {};
  return Fail(ErrorCode::kPermissionDenied, fmt::format("this needs a key with {} scope", ScopeName(needed)));
}

v1::Workspace LocalBackend::Wire(const workspace::Workspace& ws) const {
  return WorkspaceWire(ws, service_.Awake(ws.id));
}

Result<v1::Me> LocalBackend::WhoAmI(Deadline) {
  v1::Me me;
  me.tenant_id = principal_.tenant_id;
  me.tenant_name = principal_.tenant_name;
  me.key_id = principal_.key_id;
  me.key_prefix = principal_.key_prefix;
  me.scope = principal_.scope;
  return me;
}

Result<v1::Workspace> LocalBackend::CreateWorkspace(const v1::CreateWorkspace& request, Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  // The API's own validation, from the same body the API would get.
  auto parsed = workspace::ParseCreateRequest(v1::ToJson(request));
  if (!parsed) return Fail(parsed.error());
  parsed->by = store::KeyActor(principal_.key_id);
  auto created = Sync(service_.Create(principal_.tenant_id, std::move(*parsed), ""));
  if (!created) return Fail(created.error());
  return Wire(created->workspace);
}

Result<v1::Workspace> LocalBackend::GetWorkspace(std::string_view ws, Deadline) {
  auto found = service_.Get(principal_.tenant_id, std::string(ws));
  if (!found) return Fail(found.error());
  return Wire(*found);
}

Result<mcp::WorkspaceList> LocalBackend::ListWorkspaces(const v1::WorkspaceFilter& filter, size_t max,
                                                        Deadline) {
  store::WorkspaceFilter f;
  if (filter.state) f.state = ServiceState(*filter.state);
  f.labels = filter.labels;
  f.limit = static_cast<int>(std::min<size_t>(max, 100000) + 1);
  auto list = service_.List(principal_.tenant_id, f);
  mcp::WorkspaceList out;
  out.more = list.size() > max;
  if (out.more) list.resize(max);
  for (const auto& ws : list) out.workspaces.push_back(Wire(ws));
  return out;
}

Result<v1::Workspace> LocalBackend::StartWorkspace(std::string_view ws, Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  auto done = Sync(service_.Start(principal_.tenant_id, std::string(ws), {}, store::KeyActor(principal_.key_id)));
  if (!done) return Fail(done.error());
  return Wire(*done);
}

Result<v1::Workspace> LocalBackend::StopWorkspace(std::string_view ws, bool force, Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  auto done = Sync(service_.Stop(principal_.tenant_id, std::string(ws), force, store::KeyActor(principal_.key_id)));
  if (!done) return Fail(done.error());
  return Wire(*done);
}

Result<v1::Workspace> LocalBackend::HibernateWorkspace(std::string_view ws, Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  auto done = Sync(service_.Hibernate(principal_.tenant_id, std::string(ws), store::KeyActor(principal_.key_id)));
  if (!done) return Fail(done.error());
  return Wire(*done);
}

Result<v1::Workspace> LocalBackend::DeleteWorkspace(std::string_view ws, Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  auto done = Sync(service_.Delete(principal_.tenant_id, std::string(ws), store::KeyActor(principal_.key_id)));
  if (!done) return Fail(done.error());
  return Wire(*done);
}

Result<v1::Workspace> LocalBackend::WaitForState(std::string_view ws, v1::State state, Deadline deadline) {
  auto want = ServiceState(state);
  if (!want) return Fail(ErrorCode::kInvalidArgument, "unknown state");
  auto done = Sync(service_.WaitForState(principal_.tenant_id, std::string(ws), *want, Remaining(deadline)));
  if (!done) return Fail(done.error());
  return Wire(*done);
}

Result<v1::Preview> LocalBackend::CreatePreview(std::string_view ws, const v1::CreatePreview& request,
                                                Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  auto found = service_.Get(principal_.tenant_id, std::string(ws));
  if (!found) return Fail(found.error());
  // The API's own validation, from the same body the API would get.
  auto parsed = v1::CreatePreviewFromJson(v1::ToJson(request));
  if (!parsed) return Fail(parsed.error());
  return previews_.Create(*found, *parsed, principal_.key_id);
}

Result<v1::Checkpoint> LocalBackend::CreateCheckpoint(std::string_view ws, const v1::CreateCheckpoint& request,
                                                      Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  // The API's own validation, from the same body the API would get.
  auto parsed = v1::CreateCheckpointFromJson(v1::ToJson(request));
  if (!parsed) return Fail(parsed.error());
  workspace::CheckpointRequest take{parsed->name.value_or(""), parsed->memory};
  auto taken = Sync(service_.TakeCheckpoint(principal_.tenant_id, std::string(ws), std::move(take),
                                            store::KeyActor(principal_.key_id)));
  if (!taken) return Fail(taken.error());
  auto info = service_.GetCheckpoint(principal_.tenant_id, std::string(ws), taken->id);
  return CheckpointWire(*taken, info ? info->size_bytes : 0);
}

Result<std::vector<v1::Checkpoint>> LocalBackend::ListCheckpoints(std::string_view ws, Deadline) {
  auto listed = service_.ListCheckpoints(principal_.tenant_id, std::string(ws));
  if (!listed) return Fail(listed.error());
  std::vector<v1::Checkpoint> out;
  for (const auto& info : *listed) out.push_back(CheckpointWire(info.checkpoint, info.size_bytes));
  return out;
}

Result<std::vector<v1::Template>> LocalBackend::ListTemplates(Deadline) {
  auto listed = service_.ListTemplates(principal_.tenant_id);
  if (!listed) return Fail(listed.error());
  std::vector<v1::Template> out;
  for (const auto& t : *listed) out.push_back(TemplateWire(service_, t));
  return out;
}

Result<v1::Workspace> LocalBackend::CreateFromTemplate(std::string_view name, std::string_view template_name,
                                                       Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  // The API's own validation, from the same body the API would get.
  nlohmann::json body = {{"name", std::string(name)}, {"template", std::string(template_name)}};
  auto parsed = workspace::ParseForkRequest(body);
  if (!parsed) return Fail(parsed.error());
  parsed->by = store::KeyActor(principal_.key_id);
  auto forked = Sync(service_.Fork(principal_.tenant_id, std::move(*parsed)));
  if (!forked) return Fail(forked.error());
  return Wire(forked->front());
}

Result<client::CheckpointRestore> LocalBackend::RestoreCheckpoint(std::string_view ws, std::string_view cp,
                                                                  const v1::RestoreCheckpoint& request, Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  auto restored = Sync(service_.RestoreCheckpoint(principal_.tenant_id, std::string(ws), std::string(cp),
                                                  request.undo, store::KeyActor(principal_.key_id)));
  if (!restored) return Fail(restored.error());
  client::CheckpointRestore out;
  out.workspace = WorkspaceWire(restored->workspace);
  if (restored->undo) {
    auto info = service_.GetCheckpoint(principal_.tenant_id, std::string(ws), restored->undo->id);
    out.undo = CheckpointWire(*restored->undo, info ? info->size_bytes : 0);
  }
  return out;
}

Result<v1::CheckpointDiff> LocalBackend::DiffCheckpoint(std::string_view ws, std::string_view cp, std::string_view to,
                                                        int max_entries, Deadline deadline) {
  workspace::DiffRequest request;
  request.from = std::string(cp);
  if (!to.empty()) request.to = std::string(to.substr(0, 256));
  request.max_entries = max_entries;
  auto diff = Sync(service_.DiffCheckpoints(principal_.tenant_id, std::string(ws), std::move(request),
                                            Remaining(deadline), store::KeyActor(principal_.key_id)));
  if (!diff) return Fail(diff.error());
  v1::CheckpointDiff out;
  out.from = std::move(diff->from);
  out.to = std::move(diff->to);
  out.result = std::move(diff->result);
  return out;
}

Result<workspace::Workspace> LocalBackend::AwakeForDesktop(std::string_view ws, Scope needed, Deadline deadline) {
  if (desktop_ == nullptr || pool_ == nullptr) {
    return Fail(ErrorCode::kFailedPrecondition, "this berthd serves no desktop");
  }
  if (auto s = Require(needed); !s) return Fail(s.error());
  auto found = service_.Get(principal_.tenant_id, std::string(ws));
  if (!found) return Fail(found.error());
  service_.NoteActivity(found->id);
  auto link = Sync(service_.Wake(principal_.tenant_id, found->id, Remaining(deadline),
                                        store::KeyActor(principal_.key_id), "an MCP tool call"));
  if (!link) return Fail(link.error());
  return found;
}

Result<client::DesktopShot> LocalBackend::DesktopScreenshot(std::string_view ws, std::string_view format,
                                                            double scale, Deadline deadline) {
  auto parsed = desktop::ParseImageFormat(format);
  if (!parsed) return Fail(parsed.error());
  auto found = AwakeForDesktop(ws, Scope::kRead, deadline);
  if (!found) return Fail(found.error());
  desktop::ScreenshotRequest request{*parsed, scale, 80};
  auto shot = desktop::TakeScreenshot(*desktop_, found->id, request,
                                      std::min(deadline, DeadlineIn(desktop::kScreenshotDeadline)));
  if (!shot) return Fail(shot.error());
  client::DesktopShot out;
  out.bytes = std::move(shot->bytes);
  out.mime = std::string(desktop::ImageMime(shot->format));
  out.screen_width = shot->screen.width;
  out.screen_height = shot->screen.height;
  out.image_width = shot->image.width;
  out.image_height = shot->image.height;
  return out;
}

Result<nlohmann::json> LocalBackend::DesktopActions(std::string_view ws, const nlohmann::json& request,
                                                    Deadline deadline) {
  auto found = AwakeForDesktop(ws, Scope::kWrite, deadline);
  if (!found) return Fail(found.error());
  auto guard = service_.OpenStream(found->id, "desktop actions");
  auto done = Sync(desktop::RunActions(*desktop_, *pool_, found->id, request, principal_.key_id));
  if (!done) return Fail(done.error());
  return nlohmann::json{{"done", done->actions},
                        {"screen", {{"width", done->screen.width}, {"height", done->screen.height}}}};
}

Result<nlohmann::json> LocalBackend::DesktopControl(std::string_view ws,
                                                    std::optional<std::chrono::seconds> wait_release,
                                                    Deadline deadline) {
  if (desktop_ == nullptr) return Fail(ErrorCode::kFailedPrecondition, "this berthd serves no desktop");
  auto found = service_.Get(principal_.tenant_id, std::string(ws));
  if (!found) return Fail(found.error());
  auto& control = desktop_->control();
  if (wait_release && control.Get(found->id).holder == desktop::Holder::kHuman) {
    auto timeout = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(*wait_release), Remaining(deadline));
    auto state = Sync(WaitForDesktopRelease(service_, control, found->tenant_id, found->id, timeout));
    if (!state) return Fail(state.error());
    return state->ToJson();
  }
  return control.Get(found->id).ToJson();
}

Result<nlohmann::json> LocalBackend::DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                                      Deadline deadline) {
  if (desktop_ == nullptr) return Fail(ErrorCode::kFailedPrecondition, "this berthd serves no desktop");
  if (auto s = Require(text ? Scope::kWrite : Scope::kRead); !s) return Fail(s.error());
  auto found = service_.Get(principal_.tenant_id, std::string(ws));
  if (!found) return Fail(found.error());
  // Refused before anything wakes.
  auto allowed = text ? desktop::MayWriteClipboard(desktop_->control(), found->id, principal_.key_id)
                      : desktop::MayReadClipboard(desktop_->control(), found->id, principal_.key_id);
  if (!allowed) return Fail(allowed.error());
  service_.NoteActivity(found->id);
  auto link = Sync(service_.Wake(principal_.tenant_id, found->id, Remaining(deadline),
                                        store::KeyActor(principal_.key_id), "an MCP tool call"));
  if (!link) return Fail(link.error());
  if (!text) {
    auto got = desktop::GetGuestClipboard(*desktop_, *link, found->id, principal_.key_id, deadline);
    if (!got) return Fail(got.error());
    return nlohmann::json{{"text", std::move(*got)}};
  }
  auto bytes = desktop::SetGuestClipboard(*desktop_, *link, found->id, principal_.key_id, *text, deadline);
  if (!bytes) return Fail(bytes.error());
  return nlohmann::json{{"bytes", *bytes}};
}

Result<nlohmann::json> LocalBackend::DesktopRequestHuman(std::string_view ws, std::string_view reason,
                                                         std::chrono::seconds timeout, Deadline deadline) {
  if (desktop_ == nullptr) return Fail(ErrorCode::kFailedPrecondition, "this berthd serves no desktop");
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  if (reason.empty() || reason.size() > 500) {
    return Fail(ErrorCode::kInvalidArgument, "'reason' must be a string of 1 to 500 bytes");
  }
  auto found = service_.Get(principal_.tenant_id, std::string(ws));
  if (!found) return Fail(found.error());
  // The answer must be sent before the call's own deadline.
  auto wait = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(timeout),
                       Remaining(deadline) - std::chrono::milliseconds(std::min<int64_t>(5000, Remaining(deadline).count() / 2)));
  std::string url = fmt::format("{}/w/{}/desktop", web_origin_, found->id);
  return Sync(RequestHuman(service_, *desktop_, *found, principal_.key_id, std::string(reason),
                           std::max(wait, std::chrono::milliseconds(0)), std::move(url)));
}

Result<nlohmann::json> LocalBackend::GetNetwork(std::string_view ws, Deadline) {
  auto status = service_.GetNetwork(principal_.tenant_id, std::string(ws));
  if (!status) return Fail(status.error());
  return network::NetworkStatusJson(*status);
}

Result<nlohmann::json> LocalBackend::SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy, Deadline) {
  if (auto s = Require(Scope::kWrite); !s) return Fail(s.error());
  auto parsed = network::ParsePolicy(v1::ToJson(policy));
  if (!parsed) return Fail(parsed.error());
  auto status = service_.SetNetwork(principal_.tenant_id, std::string(ws), *parsed);
  if (!status) return Fail(status.error());
  return network::NetworkStatusJson(*status);
}

Result<mcp::AgentBackend::AgentSession> LocalBackend::OpenAgent(std::string_view ws, Access access,
                                                                 Deadline deadline) {
  if (auto s = Require(access == Access::kRead ? Scope::kRead : Scope::kWrite); !s) return Fail(s.error());
  auto found = service_.Get(principal_.tenant_id, std::string(ws));
  if (!found) return Fail(found.error());
  service_.NoteActivity(found->id);
  auto link = Sync(service_.Wake(principal_.tenant_id, found->id, Remaining(deadline),
                                        store::KeyActor(principal_.key_id), "an MCP tool call"));
  if (!link) return Fail(link.error());
  // Held for as long as the call lasts, like a proxied request's, and counted for shutdown.
  struct Hold {
    Hold(workspace::WorkspaceService::StreamGuard g, std::shared_ptr<McpCalls> c)
        : guard(std::move(g)), calls(std::move(c)) {}
    ~Hold() { calls->Leave(); }
    workspace::WorkspaceService::StreamGuard guard;
    std::shared_ptr<McpCalls> calls;
  };
  if (!calls_->Enter()) return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
  auto hold = std::make_shared<Hold>(service_.OpenStream(found->id, "mcp"), calls_);
  client::ClientOptions options;
  options.deadline = deadline;
  options.io_timeout = std::chrono::minutes(5);
  options.max_response_bytes = 64u << 20;
  return AgentSession{client::WorkspaceAgent{client::ApiClient(link->endpoint, link->token, options), "/v1"},
                      std::move(hold), found->env, found->id};
}

Result<std::vector<v1::Event>> LocalBackend::ListEvents(std::string_view ws, int64_t after, int limit,
                                                       const client::BerthClient::EventSelect& select,
                                                       Deadline) {
  if (auto s = Require(Scope::kRead); !s) return Fail(s.error());
  store::EventFilter filter;
  filter.after_id = std::max<int64_t>(after, 0);
  filter.limit = std::clamp(limit, 1, v1::kMaxEventPage);
  if (auto parsed = store::ParseEventFilter(select.types, select.actors, select.since, filter); !parsed) {
    return Fail(parsed.error());
  }
  auto events = service_.ListEvents(principal_.tenant_id, std::string(ws), filter);
  if (!events) return Fail(events.error());
  std::vector<v1::Event> out;
  for (const auto& e : *events) out.push_back(EventWire(e));
  return out;
}

void LocalBackend::Record(const std::string& workspace_id, const EventDraft& event) {
  auto recorded = service_.RecordEvent(workspace_id, event.type, event.message, event.data,
                                       store::KeyActor(principal_.key_id));
  if (!recorded && recorded.error().code != ErrorCode::kNotFound) {
    spdlog::warn("workspace {}: {} event: {}", workspace_id, event.type, recorded.error().message);
  }
}

void LocalBackend::NoteRan(const AgentSession& session, const Ran& ran) {
  if (session.workspace_id.empty() || !ran.request) return;
  ExecSeen seen;
  seen.request = ran.request->ToJson();
  seen.duration_ms = ran.took.count();
  const Error* failed = ran.refused;
  if (ran.exit && !*ran.exit) failed = &ran.exit->error();
  if (failed) {
    seen.status = HttpStatus(failed->code);
    seen.refusal = failed->message;
  } else if (ran.exit) {
    seen.status = 200;
    seen.exit = **ran.exit;
  } else {
    seen.status = 202;
    seen.pid = ran.pid;
  }
  Record(session.workspace_id, ExecEventOf(seen));
}

void LocalBackend::NoteFileChange(const AgentSession& session, std::string_view type, const std::string& path,
                                  const nlohmann::json& details) {
  if (session.workspace_id.empty()) return;
  Record(session.workspace_id, FileEventOf(std::string(type), path, details));
}

}  // namespace berth::api
