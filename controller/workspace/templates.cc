// Templates: a tenant's checkpoints with memory under names (docs/architecture.md, "Forks").
// A workspace made from one is a fork of its checkpoint (forks.cc): it resumes the template's
// memory, its processes (a started database, a dev server) already running, instead of booting.
//
// One built from a setup script gets a workspace of its own ("template-<name>", berthd's, labeled
// berth.template): BuildTemplate waits for it to run, runs the script through its agent, starts
// `start` and waits for `ready`, then checkpoints its memory: that checkpoint is the template,
// and the workspace is stopped (the checkpoint's layers stay in its directory). A build that
// fails, times out or is cut by a restart ends "failed" with why; its workspace is deleted.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "common/random.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// What a build keeps of its output: the end, where a failure says why.
constexpr size_t kBuildLogBytes = 16 * 1024;
// The script ($0: an argument, never spliced into the command) with its whole output in a
// file, stdout and stderr interleaved, cut at $1 seconds by timeout(1) (124 then); the agent
// answers with the file's end (a script that timed out too) and the exit code.
constexpr const char* kRunScript =
    "log=$(mktemp) || exit 125; timeout -k 5 \"$1\" bash -e -c \"$0\" >\"$log\" 2>&1 </dev/null; rc=$?; "
    "tail -c 16384 \"$log\"; rm -f \"$log\"; exit $rc";
constexpr int kTimedOut = 124;

std::string Tail(const std::string& text, size_t n) { return text.size() <= n ? text : text.substr(text.size() - n); }

milliseconds Left(Clock::time_point until) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(until - Clock::now()));
}

}  // namespace

Task<Result<store::Template>> WorkspaceService::CreateTemplate(std::string tenant_id, TemplateRequest request) {
  if (stopping_) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
  if (request.build) co_return co_await StartTemplateBuild(std::move(tenant_id), std::move(request));
  auto found = Lookup(tenant_id, request.workspace);
  if (!found) co_return Fail(found.error());
  ActorPtr source = *found;
  std::string checkpoint = request.checkpoint.value_or("");
  if (checkpoint.empty()) {
    CheckpointRequest take;
    take.name = "template-" + request.name;
    take.memory = true;
    auto taken = co_await TakeCheckpoint(tenant_id, source->id(), take, request.by);
    if (!taken) {
      co_return Fail(taken.error().code, "checkpointing the workspace for the template: " + taken.error().message);
    }
    checkpoint = taken->id;
  }
  auto publish = [this, &tenant_id, &request, &checkpoint, source]() -> Result<store::Template> {
    auto c = store_.GetCheckpoint(source->id(), checkpoint);
    if (!c) return Fail(c.error());
    if (c->state != "ready") {
      return Fail(ErrorCode::kNotFound, fmt::format("checkpoint '{}' is still being taken", checkpoint));
    }
    if (!c->memory) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("checkpoint '{}' has no memory: a template resumes a running machine; take one with "
                              "\"memory\": true of the running workspace (or leave out the checkpoint)",
                              c->name));
    }
    store::Template t;
    t.id = NewId("tpl");
    t.tenant_id = tenant_id;
    t.name = request.name;
    t.workspace_id = source->id();
    t.checkpoint_id = c->id;
    t.created_by = store::KeyActor(request.by);
    t.created_at = Now();
    if (auto s = store_.InsertTemplate(t); !s) return Fail(s.error());
    spdlog::info("template {} ({}): checkpoint {} of workspace {}", t.name, t.id, c->id, source->id());
    return t;
  };
  co_return co_await Blocking(std::move(publish));
}

Task<Result<store::Template>> WorkspaceService::StartTemplateBuild(std::string tenant_id, TemplateRequest request) {
  const TemplateBuild build = *request.build;
  auto unused = [this, &tenant_id, &request]() -> Status {
    auto t = store_.GetTemplate(tenant_id, request.name);
    if (t) {
      return Fail(ErrorCode::kAlreadyExists,
                  fmt::format("a template named '{}' already exists ({}){}", t->name, t->state,
                              t->state == "ready" ? "" : "; delete it to build it again"));
    }
    if (t.error().code != ErrorCode::kNotFound) return Fail(t.error());
    return {};
  };
  if (auto s = co_await Blocking(std::move(unused)); !s) co_return Fail(s.error());
  CreateRequest create;
  create.by = request.by;
  create.name = std::string(kTemplateBuilderPrefix) + request.name;
  create.image = build.image;
  auto size = SizeByName(build.size);
  create.size = std::string(size->name);
  create.vcpus = size->vcpus;
  create.memory_mib = size->memory_mib;
  // Not stopped for idleness in the middle of the build.
  create.idle_timeout_s = std::max<int64_t>(create.idle_timeout_s, build.timeout_s + 600);
  create.labels = nlohmann::json{{"berth.template", request.name}};
  std::string no_idempotency_key;
  auto made = co_await Create(tenant_id, std::move(create), no_idempotency_key);
  if (!made) co_return Fail(made.error().code, "the template's workspace: " + made.error().message);
  store::Template t;
  t.id = NewId("tpl");
  t.tenant_id = tenant_id;
  t.name = request.name;
  t.workspace_id = made->workspace.id;
  t.created_by = store::KeyActor(request.by);
  t.created_at = Now();
  t.state = "building";
  t.build = DumpJson(build.ToJson());
  auto insert = [this, &t] { return store_.InsertTemplate(t); };
  if (auto s = co_await Blocking(std::move(insert)); !s) {
    (void)co_await Delete(tenant_id, t.workspace_id);  // another build of that name won the race
    co_return Fail(s.error());
  }
  spdlog::info("template {} ({}): building in workspace {}", t.name, t.id, t.workspace_id);
  asio::co_spawn(loops_, BuildTemplate(tenant_id, t, build, request.by), asio::detached);
  co_return t;
}

Task<Result<agent_client::AgentLink>> WorkspaceService::WakeBuilder(const std::string& tenant_id,
                                                                   const std::string& workspace,
                                                                   milliseconds deadline) {
  std::string by;
  std::string what = "the template's build";
  const milliseconds wait = std::min(deadline, milliseconds(120000));
  co_return co_await Wake(tenant_id, workspace, wait, by, what);
}

Task<Result<protocol::ExecResult>> WorkspaceService::RunInBuilder(const std::string& tenant_id,
                                                                  const std::string& workspace,
                                                                  protocol::ExecRequest request,
                                                                  milliseconds deadline) {
  auto link = co_await WakeBuilder(tenant_id, workspace, deadline);
  if (!link) co_return Fail(link.error());
  // The agent ends the command at its timeout_ms; this deadline is the exchange's, a little later.
  request.timeout_ms = static_cast<uint64_t>(std::max(deadline, milliseconds(1000)).count());
  request.max_output_bytes = kBuildLogBytes;
  const milliseconds exchange = deadline + milliseconds(30000);
  auto answer = co_await options_.run_in_guest(*link, std::move(request), exchange);
  if (!answer) co_return Fail(answer.error());
  co_return protocol::ExecResult::FromJson(*answer);
}

Task<Result<std::string>> WorkspaceService::RunBuildSteps(const std::string& tenant_id, const std::string& workspace,
                                                          const TemplateBuild& build, std::string& log) {
  const auto until = Clock::now() + std::chrono::seconds(build.timeout_s);
  auto timed_out = [&build] {
    return Error{ErrorCode::kDeadlineExceeded, fmt::format("the build took longer than {} s", build.timeout_s)};
  };
  auto up = co_await WaitForState(tenant_id, workspace, State::kRunning, Left(until));
  if (!up) co_return Fail(up.error().code, "the template's workspace did not start: " + up.error().message);

  protocol::ExecRequest script;
  const auto script_s = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(Left(until)).count());
  script.cmd = std::vector<std::string>{"bash", "-c", kRunScript, build.script, std::to_string(script_s)};
  // The agent's own timeout a little later than timeout(1)'s, which leaves the log readable.
  const milliseconds allowed = Left(until) + milliseconds(15000);
  auto ran = co_await RunInBuilder(tenant_id, workspace, std::move(script), allowed);
  if (!ran) co_return Fail(ran.error().code, "running the script: " + ran.error().message);
  log = ran->stdout_data + ran->stderr_data;
  if (ran->exit.timed_out || ran->exit.exit_code == kTimedOut) co_return Fail(timed_out());
  if (ran->exit.exit_code != 0) {
    co_return Fail(ErrorCode::kFailedPrecondition,
                   fmt::format("the script exited with {}{}", ran->exit.exit_code.value_or(-1),
                               ran->exit.signal ? " (signal " + *ran->exit.signal + ")" : std::string()));
  }
  if (!build.start.empty()) {
    protocol::ExecRequest start;
    start.cmd = std::vector<std::string>{"bash", "-c", build.start};
    start.background = true;
    start.tag = "template-start";
    auto link = co_await WakeBuilder(tenant_id, workspace, Left(until));
    if (!link) co_return Fail(link.error().code, "starting 'start': " + link.error().message);
    const milliseconds exchange(60000);
    auto started = co_await options_.run_in_guest(*link, std::move(start), exchange);
    if (!started) co_return Fail(started.error().code, "starting 'start': " + started.error().message);
    log += "\n$ " + build.start + " (started in the background, tag template-start)\n";
  }
  if (!build.ready.empty()) {
    for (int round = 0;; ++round) {
      if (Left(until).count() == 0) co_return Fail(timed_out());
      protocol::ExecRequest ready;
      ready.cmd = std::vector<std::string>{"bash", "-c", build.ready};
      const milliseconds each = std::min(Left(until), milliseconds(30000));
      auto checked = co_await RunInBuilder(tenant_id, workspace, std::move(ready), each);
      if (!checked) co_return Fail(checked.error().code, "running 'ready': " + checked.error().message);
      if (checked->exit.exit_code == 0) {
        log += fmt::format("$ {} (exited 0 after {} tries)\n", build.ready, round + 1);
        break;
      }
      if (stopping_) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
      co_await Sleep(milliseconds(1000));
    }
  }
  CheckpointRequest take;
  take.name = "template";
  take.memory = true;
  std::string by_berthd;
  auto taken = co_await TakeCheckpoint(tenant_id, workspace, take, by_berthd);
  if (!taken) co_return Fail(taken.error().code, "checkpointing the built workspace: " + taken.error().message);
  co_return taken->id;
}

Task<void> WorkspaceService::BuildTemplate(std::string tenant_id, store::Template t, TemplateBuild build,
                                           std::string by) {
  std::string log;
  auto built = co_await RunBuildSteps(tenant_id, t.workspace_id, build, log);
  if (stopping_) co_return;  // a restarted berthd fails it (FailInterruptedBuilds)
  std::string checkpoint = built ? *built : std::string();
  std::string error = built ? std::string() : built.error().message;
  auto finish = [this, &t, &checkpoint, &error, &log] {
    return store_.FinishTemplate(t.id, error.empty() ? "ready" : "failed", checkpoint, error, Tail(log, kBuildLogBytes));
  };
  auto finished = co_await Blocking(std::move(finish));
  if (finished && error.empty()) {
    spdlog::info("template {} ({}): ready, checkpoint {} of workspace {}", t.name, t.id, checkpoint, t.workspace_id);
    // Its memory is in the checkpoint: the workspace itself need not run on.
    auto stopped = co_await Stop(tenant_id, t.workspace_id, false, by);
    if (!stopped) spdlog::warn("template {}: stopping its workspace: {}", t.name, stopped.error().message);
    co_return;
  }
  spdlog::warn("template {} ({}): the build failed: {}", t.name, t.id, finished ? error : finished.error().message);
  auto gone = co_await Delete(tenant_id, t.workspace_id, by);
  if (!gone && gone.error().code != ErrorCode::kNotFound) {
    spdlog::warn("template {}: deleting its workspace: {}", t.name, gone.error().message);
  }
}

void WorkspaceService::FailInterruptedBuilds() {
  auto all = store_.ListTemplates("");
  if (!all) {
    spdlog::warn("templates: {}", all.error().message);
    return;
  }
  for (const auto& t : *all) {
    if (t.state != "building") continue;
    // Its workspace stays (the tenant's, labeled berth.template) until the template is deleted.
    if (auto s = store_.FinishTemplate(t.id, "failed", "", "berthd restarted during the build", t.build_log); !s) {
      spdlog::warn("template {}: {}", t.id, s.error().message);
    }
  }
}

Result<std::vector<store::Template>> WorkspaceService::ListTemplates(const std::string& tenant_id) {
  return store_.ListTemplates(tenant_id);
}

Result<store::Template> WorkspaceService::GetTemplate(const std::string& tenant_id, const std::string& id_or_name) {
  return store_.GetTemplate(tenant_id, id_or_name);
}

Task<Result<store::Template>> WorkspaceService::DeleteTemplate(std::string tenant_id, std::string id_or_name,
                                                              std::string by) {
  auto remove = [this, &tenant_id, &id_or_name]() -> Result<store::Template> {
    auto t = store_.GetTemplate(tenant_id, id_or_name);
    if (!t) return Fail(t.error());
    if (t->state == "building") {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("template '{}' is being built; delete its workspace '{}{}' to end the build", t->name,
                              kTemplateBuilderPrefix, t->name));
    }
    // Forks made from it stand on the checkpoint, which stays its workspace's: they go on.
    if (auto s = store_.DeleteTemplate(t->id); !s) return Fail(s.error());
    return t;
  };
  auto t = co_await Blocking(std::move(remove));
  if (!t || t->build.empty()) co_return t;
  // The workspace berthd made to build it goes too, unless forks stand on its checkpoint.
  if (auto builder = Lookup(tenant_id, t->workspace_id); builder) {
    auto forks = [this, ws = (*builder)->Snapshot()] { return ForksOf(ws); };
    auto standing = co_await Blocking(std::move(forks));
    if (standing.empty()) {
      auto gone = co_await Delete(tenant_id, t->workspace_id, by);
      if (!gone) spdlog::warn("template {}: deleting its workspace: {}", t->name, gone.error().message);
    } else {
      spdlog::info("template {}: its workspace {} stays for {}", t->name, t->workspace_id, fmt::join(standing, ", "));
    }
  }
  co_return t;
}

}  // namespace berth::workspace
