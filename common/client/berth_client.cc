#include "common/client/berth_client.h"

#include <charconv>

#include <thread>

#include <fmt/format.h>

#include "common/http/url.h"
#include "common/json.h"
#include "common/v1/reader.h"

namespace berth::client {
namespace {

using http::bhttp::verb;
using nlohmann::json;

std::string_view MethodName(verb method) {
  return std::string_view(http::bhttp::to_string(method));
}

// Parses an answer with `parse`; a malformed one becomes `internal`, naming the call.
template <class Parse>
auto Parsed(const Result<json>& answer, Parse parse, verb method, const std::string& target)
    -> decltype(parse(*answer)) {
  if (!answer) return Fail(answer.error());
  auto parsed = parse(*answer);
  if (!parsed) return Fail(MalformedAnswer(MethodName(method), target, parsed.error()));
  return parsed;
}

// berthd's own limit for one POST …/wait, below what is left of ours so that its answer (which
// says where the workspace is) comes before our deadline cuts the call.
int64_t WaitSecondsFor(Deadline deadline) {
  auto left = Remaining(deadline);
  int64_t seconds = 0;
  if (left >= std::chrono::seconds(2)) {
    seconds = std::chrono::duration_cast<std::chrono::seconds>(left).count() - 1;
  } else if (left >= std::chrono::seconds(1)) {
    seconds = 1;
  }
  return std::min(seconds, v1::kMaxWaitSeconds);
}

std::string StateAndError(const v1::Workspace& ws) {
  std::string out(v1::StateName(ws.state));
  if (ws.error) out += ": " + *ws.error;
  return out;
}

}  // namespace

Error MalformedAnswer(std::string_view method, std::string_view target, const Error& error) {
  return Error{ErrorCode::kInternal,
               fmt::format("berthd's answer to {} {} is not what its API says: {}", method,
                           target, error.message)};
}

BerthClient::BerthClient(Endpoint endpoint, std::string api_key, std::string base_path,
                         ClientOptions options)
    : endpoint_(std::move(endpoint)),
      api_key_(std::move(api_key)),
      base_path_(std::move(base_path)),
      options_(options) {
  while (!base_path_.empty() && base_path_.back() == '/') base_path_.pop_back();
}

std::string BerthClient::Route(std::string_view path) const {
  return base_path_ + std::string(path);
}

std::string BerthClient::WorkspaceRoute(std::string_view ws, std::string_view rest) const {
  return Route(fmt::format("/v1/workspaces/{}{}", http::PercentEncode(ws, false), rest));
}

ApiClient BerthClient::ClientFor(Deadline deadline) const {
  ClientOptions options = options_;
  options.deadline = deadline;
  // berthd answers 503 with Retry-After only where a retry is meant (a workspace waking).
  options.retry_unavailable = true;
  return ApiClient(endpoint_, api_key_, options);
}

ApiClient BerthClient::Http(Deadline deadline) const { return ClientFor(deadline); }

Result<json> BerthClient::Call(verb method, const std::string& target,
                               const std::optional<json>& body, Deadline deadline,
                               const Headers& headers) const {
  auto api = ClientFor(deadline);
  return api.Json(method, target, body, headers);
}

// --- identity ----------------------------------------------------------------------------------

Result<v1::Health> BerthClient::Health(Deadline deadline) const {
  std::string target = Route("/v1/health");
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::HealthFromJson, verb::get,
                target);
}

Result<v1::Me> BerthClient::Me(Deadline deadline) const {
  std::string target = Route("/v1/me");
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::MeFromJson, verb::get,
                target);
}

// --- workspaces --------------------------------------------------------------------------------

Result<v1::Workspace> BerthClient::CreateWorkspace(const v1::CreateWorkspace& request,
                                                   Deadline deadline,
                                                   std::string_view idempotency_key,
                                                   bool* existed) const {
  std::string target = Route("/v1/workspaces");
  Headers headers;
  if (!idempotency_key.empty()) headers.emplace_back("Idempotency-Key", std::string(idempotency_key));
  auto api = ClientFor(deadline);
  // Request(), not Json(): an idempotent retry differs only by its status (200, not 201).
  auto response =
      api.Request(verb::post, target, DumpJson(v1::ToJson(request)), "application/json", headers);
  if (!response) return Fail(response.error());
  if (response->status < 200 || response->status >= 300) {
    return Fail(ApiClient::ErrorFrom(*response));
  }
  if (existed) *existed = response->status == 200;
  auto body = ParseJson(response->body);
  if (!body) return Fail(MalformedAnswer("POST", target, body.error()));
  return Parsed(Result<json>(std::move(*body)), v1::WorkspaceFromJson, verb::post, target);
}

Result<v1::Workspace> BerthClient::GetWorkspace(std::string_view ws, Deadline deadline) const {
  std::string target = WorkspaceRoute(ws);
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::WorkspaceFromJson, verb::get,
                target);
}

namespace {
Result<nlohmann::json> AnObject(Result<nlohmann::json> answer, std::string_view target) {
  if (!answer) return answer;
  if (!answer->is_object()) {
    return Fail(ErrorCode::kInternal, fmt::format("berthd's answer to {} is not a JSON object", target));
  }
  return answer;
}
}  // namespace

Result<DesktopShot> BerthClient::DesktopScreenshot(std::string_view ws, std::string_view format, double scale,
                                                   Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/desktop/screenshot") +
                       fmt::format("?format={}&scale={}", http::PercentEncode(format), scale);
  auto res = ClientFor(deadline).Request(verb::get, target);
  if (!res) return Fail(res.error());
  if (res->status != 200) return Fail(ApiClient::ErrorFrom(*res));
  auto size = [&](std::string_view name) {
    std::string_view v = res->Header(name);
    int n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && end == v.data() + v.size() ? n : 0;
  };
  DesktopShot shot;
  shot.mime = std::string(res->Header("Content-Type"));
  shot.screen_width = size("X-Screen-Width");
  shot.screen_height = size("X-Screen-Height");
  shot.image_width = size("X-Image-Width");
  shot.image_height = size("X-Image-Height");
  if (shot.screen_width <= 0 || shot.image_width <= 0 || res->body.empty()) {
    return Fail(ErrorCode::kInternal, fmt::format("GET {}: an image without its sizes", target));
  }
  shot.bytes = std::move(res->body);
  return shot;
}

Result<nlohmann::json> BerthClient::DesktopActions(std::string_view ws, const nlohmann::json& request,
                                                   Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/desktop/actions");
  return AnObject(Call(verb::post, target, request, deadline), target);
}

Result<nlohmann::json> BerthClient::DesktopControl(std::string_view ws,
                                                   std::optional<std::chrono::seconds> wait_release,
                                                   Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/desktop/control");
  if (wait_release) target += fmt::format("?wait=release&timeout={}s", wait_release->count());
  return AnObject(Call(verb::get, target, std::nullopt, deadline), target);
}

Result<nlohmann::json> BerthClient::DesktopClipboard(std::string_view ws, const std::optional<std::string>& text,
                                                     Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/desktop/clipboard");
  if (!text) return AnObject(Call(verb::get, target, std::nullopt, deadline), target);
  nlohmann::json body = {{"text", *text}};
  return AnObject(Call(verb::put, target, body, deadline), target);
}

Result<nlohmann::json> BerthClient::DesktopRequestHuman(std::string_view ws, std::string_view reason,
                                                        std::chrono::seconds timeout, Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/desktop/control/request");
  nlohmann::json body = {{"reason", reason}, {"timeout_s", timeout.count()}};
  return AnObject(Call(verb::post, target, body, deadline), target);
}

Result<nlohmann::json> BerthClient::GetNetwork(std::string_view ws, Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/network");
  return AnObject(Call(verb::get, target, std::nullopt, deadline), target);
}

Result<nlohmann::json> BerthClient::SetNetwork(std::string_view ws, const v1::NetworkPolicy& policy,
                                               Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/network");
  return AnObject(Call(verb::patch, target, v1::ToJson(policy), deadline), target);
}

Result<v1::WorkspacePage> BerthClient::ListWorkspacePage(const v1::WorkspaceFilter& filter,
                                                         int limit, std::string_view after,
                                                         Deadline deadline) const {
  limit = std::clamp(limit, 1, v1::kMaxPageSize);
  std::string target = Route("/v1/workspaces") + v1::ListQuery(filter, limit, after);
  auto page = Parsed(Call(verb::get, target, std::nullopt, deadline), v1::WorkspacePageFromJson,
                     verb::get, target);
  if (page && page->workspaces.size() > static_cast<size_t>(limit)) {
    return Fail(MalformedAnswer("GET", target,
                                Error{ErrorCode::kInternal,
                                      fmt::format("{} workspaces on a page of {}",
                                                  page->workspaces.size(), limit)}));
  }
  return page;
}

Result<bool> BerthClient::ForEachWorkspace(
    const v1::WorkspaceFilter& filter,
    const std::function<bool(const v1::Workspace&)>& on_workspace, Deadline deadline,
    int page_size) const {
  std::string after;
  for (;;) {
    auto page = ListWorkspacePage(filter, page_size, after, deadline);
    if (!page) return Fail(page.error());
    for (size_t i = 0; i < page->workspaces.size(); ++i) {
      if (!on_workspace(page->workspaces[i])) {
        return i + 1 < page->workspaces.size() || page->next.has_value();
      }
    }
    if (!page->next) return false;
    // Pages follow the ids in order: a cursor that does not move on would repeat pages until
    // the deadline.
    if (*page->next <= after) {
      return Fail(MalformedAnswer("GET", Route("/v1/workspaces"),
                                  Error{ErrorCode::kInternal,
                                        fmt::format("'next' ({}) does not come after '{}'",
                                                    *page->next, after)}));
    }
    after = *page->next;
  }
}

Result<WorkspaceListing> BerthClient::ListWorkspaces(const v1::WorkspaceFilter& filter,
                                                     Deadline deadline, size_t max) const {
  WorkspaceListing listing;
  if (max == 0) {
    auto page = ListWorkspacePage(filter, 1, {}, deadline);
    if (!page) return Fail(page.error());
    listing.more = !page->workspaces.empty();
    return listing;
  }
  int page_size = static_cast<int>(std::min<size_t>(kPageSize, max));
  auto more = ForEachWorkspace(
      filter,
      [&](const v1::Workspace& ws) {
        listing.workspaces.push_back(ws);
        return listing.workspaces.size() < max;
      },
      deadline, page_size);
  if (!more) return Fail(more.error());
  listing.more = *more;
  return listing;
}

Result<v1::Workspace> BerthClient::PatchWorkspace(std::string_view ws,
                                                  const v1::PatchWorkspace& patch,
                                                  Deadline deadline) const {
  std::string target = WorkspaceRoute(ws);
  return Parsed(Call(verb::patch, target, v1::ToJson(patch), deadline), v1::WorkspaceFromJson,
                verb::patch, target);
}

Result<v1::Workspace> BerthClient::Action(std::string_view ws, std::string_view action,
                                          const std::optional<json>& body,
                                          Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, fmt::format("/{}", action));
  return Parsed(Call(verb::post, target, body, deadline), v1::WorkspaceFromJson, verb::post,
                target);
}

Result<v1::Workspace> BerthClient::DeleteWorkspace(std::string_view ws, Deadline deadline) const {
  std::string target = WorkspaceRoute(ws);
  return Parsed(Call(verb::delete_, target, std::nullopt, deadline), v1::WorkspaceFromJson,
                verb::delete_, target);
}

Result<v1::Workspace> BerthClient::StartWorkspace(std::string_view ws, Deadline deadline) const {
  return Action(ws, "start", std::nullopt, deadline);
}

Result<v1::Workspace> BerthClient::StopWorkspace(std::string_view ws, bool force,
                                                 Deadline deadline) const {
  std::optional<json> body;
  if (force) {
    body = json::object();
    (*body)["force"] = true;
  }
  return Action(ws, "stop", body, deadline);
}

Result<v1::Workspace> BerthClient::HibernateWorkspace(std::string_view ws,
                                                      Deadline deadline) const {
  return Action(ws, "hibernate", std::nullopt, deadline);
}

Result<v1::Workspace> BerthClient::RestartWorkspace(std::string_view ws, Deadline deadline) const {
  return Action(ws, "restart", std::nullopt, deadline);
}

Result<v1::Workspace> BerthClient::KeepAlive(std::string_view ws, Deadline deadline) const {
  return Action(ws, "keepalive", std::nullopt, deadline);
}

Result<v1::Workspace> BerthClient::Wait(std::string_view ws, v1::State state,
                                        Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/wait");
  for (;;) {
    int64_t seconds = WaitSecondsFor(deadline);
    auto answer = Call(verb::post, target, v1::ToJson(v1::WaitRequest(state, seconds)), deadline);
    if (answer) {
      return Parsed(answer, v1::WorkspaceFromJson, verb::post, target);
    }
    const Error& error = answer.error();
    if (error.code != ErrorCode::kDeadlineExceeded) return Fail(error);
    // berthd's own limit (at most an hour per call) ran out before ours: ask again.
    if (seconds > 0 && !Expired(deadline) && Remaining(deadline) > std::chrono::milliseconds(0)) {
      continue;
    }
    // Our deadline cut the call: say so in the words berthd would have used.
    if (error.message.find("timed out") != std::string::npos) {
      return Fail(ErrorCode::kDeadlineExceeded,
                  fmt::format("workspace '{}' did not become {} in time", ws,
                              v1::StateName(state)));
    }
    return Fail(error);
  }
}

Status BerthClient::WaitDeleted(std::string_view ws, Deadline deadline) const {
  auto pause = std::chrono::milliseconds(250);
  for (;;) {
    auto got = GetWorkspace(ws, deadline);
    if (!got && got.error().code == ErrorCode::kNotFound) return {};
    if (!got) return Fail(got.error());
    // Anything but "deleting" means the deletion will not happen: no point waiting for it.
    if (got->state != v1::State::kDeleting) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{} is {} again instead of being deleted", ws,
                              StateAndError(*got)));
    }
    if (Remaining(deadline) <= pause) {
      return Fail(ErrorCode::kDeadlineExceeded, fmt::format("{} is still being deleted", ws));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

Result<v1::Workspace> BerthClient::EnsureRunning(
    std::string_view ws, Deadline deadline,
    const std::function<void(std::string_view)>& note) const {
  auto tell = [&](const std::string& text) {
    if (note) note(text);
  };
  auto got = GetWorkspace(ws, deadline);
  if (!got) return Fail(got.error());
  using v1::State;
  State state = got->state;
  if (state == State::kRunning) return got;
  const std::string& name = got->name;
  // Let a transition finish before starting again.
  if (state == State::kStopping || state == State::kHibernating) {
    tell(fmt::format("waiting for {} to finish {}…", name, v1::StateName(state)));
    auto settled =
        Wait(got->id, state == State::kStopping ? State::kStopped : State::kHibernated, deadline);
    if (!settled) return Fail(settled.error());
    state = settled->state;
  }
  if (state == State::kStopped || state == State::kHibernated) {
    if (!got->auto_start) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{} is {} and its auto_start is off: start it first", name,
                              v1::StateName(state)));
    }
    tell(fmt::format("starting {} ({})…", name, v1::StateName(state)));
    auto started = StartWorkspace(got->id, deadline);
    if (!started) return Fail(started.error());
    state = started->state;
  } else if (state == State::kCreating || state == State::kStarting) {
    tell(fmt::format("waiting for {} to finish {}…", name, v1::StateName(state)));
  } else if (state != State::kRunning) {
    got->state = state;
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("{} is {}", name, StateAndError(*got)));
  }
  if (state == State::kRunning) return got;
  return Wait(got->id, State::kRunning, deadline);
}

// --- events and usage --------------------------------------------------------------------------

namespace {

std::string SelectQuery(const BerthClient::EventSelect& select) {
  std::string out;
  for (auto [key, value] : {std::pair<const char*, const std::string*>{"type", &select.types},
                            {"actor", &select.actors}, {"since", &select.since}}) {
    if (!value->empty()) out += fmt::format("&{}={}", key, http::PercentEncode(*value, false));
  }
  return out;
}

}  // namespace

Result<std::vector<v1::Event>> BerthClient::ListEvents(std::string_view ws, int64_t after,
                                                       int limit, Deadline deadline,
                                                       const EventSelect& select) const {
  limit = std::clamp(limit, 1, v1::kMaxEventPage);
  std::string target = WorkspaceRoute(
      ws, fmt::format("/events?after={}&limit={}{}", after, limit, SelectQuery(select)));
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::EventListFromJson, verb::get,
                target);
}

Status BerthClient::FollowEvents(std::string_view ws, int64_t after,
                                 const std::function<Status(const v1::Event&)>& on_event,
                                 Deadline deadline, const EventSelect& select) const {
  std::string target =
      WorkspaceRoute(ws, fmt::format("/events?follow=1&after={}{}", after, SelectQuery(select)));
  // Set by the line handler when a line is not an event, to tell it from the handler's own
  // errors.
  std::optional<Error> malformed;
  NdjsonSplitter splitter([&](const json& line) -> Status {
    auto parsed = v1::FollowLineFromJson(line);
    if (!parsed) {
      malformed = MalformedAnswer("GET", target, parsed.error());
      return Fail(*malformed);
    }
    if (!*parsed) return {};  // keepalive
    return on_event(**parsed);
  });
  auto api = ClientFor(deadline);
  auto status = api.Stream(verb::get, target, {{"Accept", "application/x-ndjson"}}, nullptr, 0,
                           [&](std::string_view data) { return splitter.Feed(data); });
  if (!status) return status;
  return splitter.Finish();
}

Result<v1::Usage> BerthClient::GetUsage(std::optional<int64_t> from, std::optional<int64_t> to,
                                        Deadline deadline) const {
  return GetUsage(from ? std::to_string(*from) : std::string(),
                  to ? std::to_string(*to) : std::string(), deadline);
}

Result<v1::Usage> BerthClient::GetUsage(std::string_view from, std::string_view to,
                                        Deadline deadline) const {
  std::string query;
  if (!from.empty()) query += "from=" + http::PercentEncode(from, false);
  if (!to.empty()) query += (query.empty() ? "" : "&") + ("to=" + http::PercentEncode(to, false));
  std::string target = Route("/v1/usage") + (query.empty() ? "" : "?" + query);
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::UsageFromJson, verb::get,
                target);
}

// --- previews ----------------------------------------------------------------------------------

Result<v1::Preview> BerthClient::CreatePreview(std::string_view ws,
                                               const v1::CreatePreview& request,
                                               Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/previews");
  return Parsed(Call(verb::post, target, v1::ToJson(request), deadline), v1::PreviewFromJson,
                verb::post, target);
}

Result<std::vector<v1::Preview>> BerthClient::ListPreviews(std::string_view ws,
                                                           Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/previews");
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::PreviewListFromJson,
                verb::get, target);
}

Result<v1::Preview> BerthClient::RevokePreview(std::string_view ws, std::string_view id,
                                               Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/previews/" + http::PercentEncode(id, false));
  return Parsed(Call(verb::delete_, target, std::nullopt, deadline), v1::PreviewFromJson,
                verb::delete_, target);
}

// --- checkpoints -------------------------------------------------------------------------------

namespace {

// {"workspace": Workspace, "undo": Checkpoint|null}, both parsed strictly (an absent "undo" is
// null, as the v1 readers take optional fields).
Result<CheckpointRestore> CheckpointRestoreFromJson(const json& j) {
  CheckpointRestore out;
  v1::Reader r(j, "restore");
  json workspace;
  r.Object("workspace", workspace);
  if (auto done = r.Done(); !done) return Fail(done.error());
  auto ws = v1::WorkspaceFromJson(workspace);
  if (!ws) return Fail(ws.error());
  out.workspace = std::move(*ws);
  if (const json* undo = r.Find("undo")) {
    auto cp = v1::CheckpointFromJson(*undo);
    if (!cp) return Fail(cp.error());
    out.undo = std::move(*cp);
  }
  return out;
}

}  // namespace

Result<v1::Checkpoint> BerthClient::CreateCheckpoint(std::string_view ws,
                                                     const v1::CreateCheckpoint& request,
                                                     Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/checkpoints");
  return Parsed(Call(verb::post, target, v1::ToJson(request), deadline), v1::CheckpointFromJson,
                verb::post, target);
}

Result<std::vector<v1::Checkpoint>> BerthClient::ListCheckpoints(std::string_view ws,
                                                                 Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/checkpoints");
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::CheckpointListFromJson,
                verb::get, target);
}

Result<v1::CheckpointDiff> BerthClient::DiffCheckpoint(std::string_view ws, std::string_view cp, std::string_view to,
                                                       int max_entries, Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, fmt::format("/checkpoints/{}/diff?to={}&max_entries={}",
                                                      http::PercentEncode(cp, false), http::PercentEncode(to, false),
                                                      max_entries));
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::CheckpointDiffFromJson, verb::get, target);
}

Result<v1::Checkpoint> BerthClient::GetCheckpoint(std::string_view ws, std::string_view cp,
                                                  Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/checkpoints/" + http::PercentEncode(cp, false));
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::CheckpointFromJson,
                verb::get, target);
}

Result<v1::Checkpoint> BerthClient::DeleteCheckpoint(std::string_view ws, std::string_view cp,
                                                     Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/checkpoints/" + http::PercentEncode(cp, false));
  return Parsed(Call(verb::delete_, target, std::nullopt, deadline), v1::CheckpointFromJson,
                verb::delete_, target);
}

// --- forks and templates ------------------------------------------------------------------------

Result<std::vector<v1::Workspace>> BerthClient::ForkCheckpoint(std::string_view ws, std::string_view cp,
                                                               std::string_view name, int count,
                                                               Deadline deadline) const {
  std::string target = WorkspaceRoute(ws, "/checkpoints/" + http::PercentEncode(cp, false) + "/fork");
  json body = {{"name", std::string(name)}, {"count", count}};
  auto parse = [](const json& j) -> Result<std::vector<v1::Workspace>> {
    std::vector<v1::Workspace> out;
    if (auto read = v1::ReadList(j, "workspaces", "fork answer", 16, v1::WorkspaceFromJson, out); !read) {
      return Fail(read.error());
    }
    return out;
  };
  return Parsed(Call(verb::post, target, body, deadline), parse, verb::post, target);
}

Result<v1::Workspace> BerthClient::ForkWorkspace(std::string_view name, std::string_view ws,
                                                 Deadline deadline) const {
  std::string target = Route("/v1/workspaces");
  json body = {{"name", std::string(name)}, {"from", {{"workspace", std::string(ws)}}}};
  return Parsed(Call(verb::post, target, body, deadline), v1::WorkspaceFromJson, verb::post, target);
}

Result<v1::Workspace> BerthClient::CreateFromTemplate(std::string_view name, std::string_view template_name,
                                                      Deadline deadline) const {
  std::string target = Route("/v1/workspaces");
  json body = {{"name", std::string(name)}, {"template", std::string(template_name)}};
  return Parsed(Call(verb::post, target, body, deadline), v1::WorkspaceFromJson, verb::post, target);
}

Result<v1::Template> BerthClient::CreateTemplate(const v1::CreateTemplate& request, Deadline deadline) const {
  std::string target = Route("/v1/templates");
  return Parsed(Call(verb::post, target, v1::ToJson(request), deadline), v1::TemplateFromJson, verb::post, target);
}

Result<std::vector<v1::Template>> BerthClient::ListTemplates(Deadline deadline) const {
  std::string target = Route("/v1/templates");
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::TemplateListFromJson, verb::get, target);
}

Result<v1::Template> BerthClient::GetTemplate(std::string_view name, Deadline deadline) const {
  std::string target = Route("/v1/templates/" + http::PercentEncode(name, false));
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::TemplateFromJson, verb::get, target);
}

Result<v1::Template> BerthClient::DeleteTemplate(std::string_view name, Deadline deadline) const {
  std::string target = Route("/v1/templates/" + http::PercentEncode(name, false));
  return Parsed(Call(verb::delete_, target, std::nullopt, deadline), v1::TemplateFromJson, verb::delete_, target);
}

Result<CheckpointRestore> BerthClient::RestoreCheckpoint(std::string_view ws, std::string_view cp,
                                                         const v1::RestoreCheckpoint& request,
                                                         Deadline deadline) const {
  std::string target =
      WorkspaceRoute(ws, "/checkpoints/" + http::PercentEncode(cp, false) + "/restore");
  return Parsed(Call(verb::post, target, v1::ToJson(request), deadline), CheckpointRestoreFromJson,
                verb::post, target);
}

// --- tenants and keys --------------------------------------------------------------------------

Result<v1::Tenant> BerthClient::CreateTenant(std::string_view name, Deadline deadline) const {
  std::string target = Route("/v1/tenants");
  json body = json::object();
  body["name"] = std::string(name);
  return Parsed(Call(verb::post, target, body, deadline), v1::TenantFromJson, verb::post, target);
}

Result<std::vector<v1::Tenant>> BerthClient::ListTenants(Deadline deadline) const {
  std::string target = Route("/v1/tenants");
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::TenantListFromJson,
                verb::get, target);
}

Result<v1::TenantDetail> BerthClient::GetTenant(std::string_view tenant, Deadline deadline) const {
  std::string target = Route(fmt::format("/v1/tenants/{}", http::PercentEncode(tenant, false)));
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::TenantDetailFromJson,
                verb::get, target);
}

Result<v1::TenantDetail> BerthClient::SetTenantLimits(std::string_view tenant,
                                                      const v1::TenantLimitsPatch& patch,
                                                      Deadline deadline) const {
  std::string target = Route(fmt::format("/v1/tenants/{}", http::PercentEncode(tenant, false)));
  return Parsed(Call(verb::patch, target, v1::ToJson(patch), deadline), v1::TenantDetailFromJson,
                verb::patch, target);
}

Result<v1::NewKey> BerthClient::CreateKey(const v1::CreateKey& request, Deadline deadline) const {
  std::string target = Route("/v1/keys");
  return Parsed(Call(verb::post, target, v1::ToJson(request), deadline), v1::NewKeyFromJson,
                verb::post, target);
}

Result<std::vector<v1::ApiKey>> BerthClient::ListKeys(std::string_view tenant,
                                                      Deadline deadline) const {
  std::string target =
      Route("/v1/keys") + (tenant.empty() ? "" : "?tenant=" + http::PercentEncode(tenant, false));
  return Parsed(Call(verb::get, target, std::nullopt, deadline), v1::KeyListFromJson, verb::get,
                target);
}

Status BerthClient::RevokeKey(std::string_view id, Deadline deadline) const {
  auto done = Call(verb::delete_, Route("/v1/keys/" + http::PercentEncode(id, false)),
                   std::nullopt, deadline);
  if (!done) return Fail(done.error());
  return {};
}

// --- through to the agent ----------------------------------------------------------------------

WorkspaceAgent BerthClient::Agent(std::string_view ws, Deadline deadline) const {
  return WorkspaceAgent{ClientFor(deadline), WorkspaceRoute(ws)};
}

}  // namespace berth::client
