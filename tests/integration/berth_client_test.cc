// The typed client of berthd's API (common/client/berth_client.h): against an in-process
// berthd (libvirt's test driver, real agents as host processes) for pagination, waiting,
// waking and the typed routes; against a stand-in server for what a real berthd does not do on
// demand: a wait that outlasts berthd's own timeout, 503 with Retry-After, and answers that
// are not what the API says.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/client/berth_client.h"
#include "common/client/exec.h"
#include "common/client/ports.h"
#include "common/http/server.h"
#include "tests/support/test_berthd.h"

namespace berth {
namespace {

using client::BerthClient;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

testing::TestBerthd& Berthd() {
  static testing::TestBerthd berthd;
  return berthd;
}

BerthClient Berth() { return BerthClient(Berthd().daemon().endpoint(), Berthd().admin_key()); }

Deadline Soon() { return DeadlineIn(std::chrono::seconds(60)); }

v1::Workspace CreateRunning(const BerthClient& berth, v1::CreateWorkspace request) {
  auto made = berth.CreateWorkspace(request, Soon());
  INFO((made ? "" : made.error().message));
  REQUIRE(made);
  auto running = berth.Wait(made->id, v1::State::kRunning, Soon());
  INFO((running ? "" : running.error().message));
  REQUIRE(running);
  return *running;
}

}  // namespace

TEST_CASE("typed client: a list is walked page by page, in order, with its filter",
          "[client][berthd]") {
  auto berth = Berth();
  std::vector<std::string> made;
  for (int i = 0; i < 7; ++i) {
    v1::CreateWorkspace request;
    request.name = fmt::format("page-{}", i);
    request.labels = v1::StringMap{{"group", "pages"}};
    auto ws = berth.CreateWorkspace(request, Soon());
    REQUIRE(ws);
    made.push_back(ws->id);
  }
  v1::WorkspaceFilter filter;
  filter.labels = {{"group", "pages"}};

  // One page really is smaller than the list.
  auto first = berth.ListWorkspacePage(filter, 2, {}, Soon());
  REQUIRE(first);
  CHECK(first->workspaces.size() == 2);
  REQUIRE(first->next);

  std::vector<std::string> seen;
  auto more = berth.ForEachWorkspace(
      filter,
      [&](const v1::Workspace& ws) {
        seen.push_back(ws.id);
        return true;
      },
      Soon(), /*page_size=*/2);
  REQUIRE(more);
  CHECK_FALSE(*more);
  // Every one once, in id order (the order of the list), over four pages.
  std::vector<std::string> sorted = made;
  std::sort(sorted.begin(), sorted.end());
  CHECK(seen == sorted);

  auto three = berth.ListWorkspaces(filter, Soon(), 3);
  REQUIRE(three);
  CHECK(three->workspaces.size() == 3);
  CHECK(three->more);
  auto all = berth.ListWorkspaces(filter, Soon());
  REQUIRE(all);
  CHECK(all->workspaces.size() == 7);
  CHECK_FALSE(all->more);
  auto exactly = berth.ListWorkspaces(filter, Soon(), 7);
  REQUIRE(exactly);
  CHECK_FALSE(exactly->more);

  filter.labels.emplace_back("group", "other");  // both must hold: nothing does
  auto none = berth.ListWorkspaces(filter, Soon());
  REQUIRE(none);
  CHECK(none->workspaces.empty());

  for (const auto& id : made) {
    // A workspace still booting cannot be deleted (409): let it settle first.
    REQUIRE(berth.Wait(id, v1::State::kRunning, Soon()));
    auto deleted = berth.DeleteWorkspace(id, Soon());
    INFO((deleted ? "" : deleted.error().message));
    REQUIRE(deleted);
    CHECK(deleted->state == v1::State::kDeleting);
    REQUIRE(berth.WaitDeleted(id, Soon()));
  }
  auto gone = berth.GetWorkspace(made[0], Soon());
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == ErrorCode::kNotFound);
}

TEST_CASE("typed client: Wait answers a state that will not come as a conflict, at once",
          "[client][berthd]") {
  auto berth = Berth();
  v1::CreateWorkspace request;
  request.name = "waits";
  auto ws = CreateRunning(berth, request);
  auto start = Clock::now();
  auto stopped = berth.Wait(ws.id, v1::State::kStopped, DeadlineIn(std::chrono::seconds(30)));
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error().code == ErrorCode::kFailedPrecondition);
  CHECK(stopped.error().message.find("running") != std::string::npos);
  CHECK(Clock::now() - start < std::chrono::seconds(5));

  // Stop, then the wait for stopped succeeds; a wait for running now is a conflict.
  auto stopping = berth.StopWorkspace(ws.id, /*force=*/true, Soon());
  REQUIRE(stopping);
  auto down = berth.Wait(ws.id, v1::State::kStopped, Soon());
  REQUIRE(down);
  CHECK(down->state == v1::State::kStopped);
  auto up = berth.Wait(ws.id, v1::State::kRunning, Soon());
  REQUIRE_FALSE(up);
  CHECK(up.error().code == ErrorCode::kFailedPrecondition);

  // EnsureRunning starts it and says so.
  std::vector<std::string> notes;
  auto running = berth.EnsureRunning(ws.id, Soon(), [&](std::string_view note) {
    notes.emplace_back(note);
  });
  INFO((running ? "" : running.error().message));
  REQUIRE(running);
  CHECK(running->state == v1::State::kRunning);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("starting waits (stopped)") != std::string::npos);

  // Through to the agent on the same deadline-bound client.
  auto agent = berth.Agent(ws.name, Soon());
  protocol::ExecRequest exec;
  exec.cmd = std::vector<std::string>{"echo", "typed"};
  auto result = client::Exec(agent.client, agent.scope, exec);
  REQUIRE(result);
  CHECK(result->stdout_data == "typed\n");

  // auto_start off: EnsureRunning will not start it.
  v1::PatchWorkspace patch;
  patch.auto_start = false;
  patch.max_runtime = 3600;
  auto patched = berth.PatchWorkspace(ws.id, patch, Soon());
  REQUIRE(patched);
  CHECK(patched->max_runtime == 3600);
  CHECK_FALSE(patched->auto_start);
  REQUIRE(berth.StopWorkspace(ws.id, true, Soon()));
  REQUIRE(berth.Wait(ws.id, v1::State::kStopped, Soon()));
  auto refused = berth.EnsureRunning(ws.id, Soon());
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
  CHECK(refused.error().message.find("auto_start is off") != std::string::npos);

  // The events of all that, listed and followed.
  auto events = berth.ListEvents(ws.id, 0, 1000, Soon());
  REQUIRE(events);
  REQUIRE(events->size() >= 4);
  CHECK(events->front().type == "created");
  // From before the last two: those two come, then the stream would wait for more.
  int64_t before_last = (*events)[events->size() - 3].id;
  std::vector<std::string> followed;
  auto follow = berth.FollowEvents(
      ws.id, before_last,
      [&](const v1::Event& e) -> Status {
        followed.push_back(e.type);
        if (followed.size() == 2) return Fail(ErrorCode::kResourceExhausted, "seen enough");
        return {};
      },
      Soon());
  REQUIRE_FALSE(follow);
  CHECK(follow.error().message == "seen enough");
  CHECK(followed.size() == 2);
  CHECK(followed.back() == events->back().type);

  REQUIRE(berth.DeleteWorkspace(ws.id, Soon()));
  REQUIRE(berth.WaitDeleted(ws.id, Soon()));
}

TEST_CASE("typed client: create is idempotent by key; identity, usage, tenants and keys",
          "[client][berthd]") {
  auto berth = Berth();
  v1::CreateWorkspace request;
  request.name = "idem-typed";
  bool existed = true;
  auto first = berth.CreateWorkspace(request, Soon(), "typed-key-1", &existed);
  REQUIRE(first);
  CHECK_FALSE(existed);
  auto again = berth.CreateWorkspace(request, Soon(), "typed-key-1", &existed);
  REQUIRE(again);
  CHECK(existed);
  CHECK(again->id == first->id);
  auto dup = berth.CreateWorkspace(request, Soon());
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == ErrorCode::kAlreadyExists);
  REQUIRE(berth.Wait(first->id, v1::State::kRunning, Soon()));
  REQUIRE(berth.DeleteWorkspace(first->id, Soon()));

  auto me = berth.Me(Soon());
  REQUIRE(me);
  CHECK(me->scope == v1::Scope::kOperator);
  CHECK(me->tenant_name == "default");
  auto health = berth.Health(Soon());
  REQUIRE(health);
  CHECK(health->status == "ok");

  auto usage = berth.GetUsage(std::nullopt, std::nullopt, Soon());
  REQUIRE(usage);
  CHECK(usage->to - usage->from == 30 * 24 * 3600);
  auto bad_usage = berth.GetUsage("yesterday", "", Soon());
  REQUIRE_FALSE(bad_usage);
  CHECK(bad_usage.error().code == ErrorCode::kInvalidArgument);

  auto tenant = berth.CreateTenant("typed-tenant", Soon());
  REQUIRE(tenant);
  v1::CreateKey key_request;
  key_request.tenant = "typed-tenant";
  key_request.scope = v1::Scope::kRead;
  key_request.name = "reader";
  auto key = berth.CreateKey(key_request, Soon());
  REQUIRE(key);
  CHECK(key->tenant_name == "typed-tenant");
  CHECK(key->secret.starts_with("bk_"));
  auto keys = berth.ListKeys("typed-tenant", Soon());
  REQUIRE(keys);
  REQUIRE(keys->size() == 1);
  CHECK(keys->at(0).id == key->record.id);
  auto tenants = berth.ListTenants(Soon());
  REQUIRE(tenants);
  CHECK(std::any_of(tenants->begin(), tenants->end(),
                    [](const v1::Tenant& t) { return t.name == "typed-tenant"; }));

  BerthClient reader(Berthd().daemon().endpoint(), key->secret);
  auto read_me = reader.Me(Soon());
  REQUIRE(read_me);
  CHECK(read_me->scope == v1::Scope::kRead);
  auto not_allowed = reader.CreateWorkspace(request, Soon());
  REQUIRE_FALSE(not_allowed);
  CHECK(not_allowed.error().code == ErrorCode::kPermissionDenied);
  REQUIRE(berth.RevokeKey(key->record.id, Soon()));
  auto revoked = reader.Me(Soon());
  REQUIRE_FALSE(revoked);
  CHECK(revoked.error().code == ErrorCode::kUnauthenticated);
}

// ---------------------------------------------------------------------------------------------

namespace {

// A stand-in for berthd with routes that misbehave on purpose. Counts the calls to each path.
class StandIn {
 public:
  StandIn() {
    http::Handler handler = [this](http::Exchange& ex) { return Serve(ex); };
    server_ = std::make_unique<http::Server>(io_, http::ServerOptions{}, handler);
    auto bound = server_->Listen(*Endpoint::Parse("tcp:127.0.0.1:0"));
    REQUIRE(bound);
    endpoint_ = *bound;
    thread_ = std::thread([this] { io_.run(); });
  }
  ~StandIn() {
    server_->Stop();
    io_.stop();
    thread_.join();
  }
  BerthClient Berth() const { return BerthClient(endpoint_, "key"); }
  int Calls(const std::string& path) {
    std::lock_guard lock(mutex_);
    return calls_[path];
  }
  std::vector<int64_t> WaitTimeouts() {
    std::lock_guard lock(mutex_);
    return wait_timeouts_;
  }

 private:
  static json Workspace(const std::string& id) {
    v1::Workspace ws;
    ws.id = id;
    ws.name = id;
    ws.tenant = "tn_1";
    ws.image = "base";
    ws.image_version = "v1";
    ws.state = v1::State::kStarting;
    ws.transport = "unix";
    return v1::ToJson(ws);
  }

  // `retry_after` is a plain pointer (nullptr: none): a std::string temporary built inside the
  // co_await expression of a call would meet g++ 12's double destruction.
  http::Task<void> Unavailable(http::Exchange& ex, const char* retry_after) {
    http::bhttp::response<http::bhttp::string_body> res{http::bhttp::status::service_unavailable,
                                                        11};
    res.set(http::bhttp::field::content_type, "application/json");
    if (retry_after) res.set(http::bhttp::field::retry_after, retry_after);
    res.body() = R"({"error":{"code":"unavailable","message":"the workspace is waking up"}})";
    res.prepare_payload();
    co_await ex.Send(std::move(res));
  }

  http::Task<void> Serve(http::Exchange& ex) {
    std::string path(ex.path());
    int call = 0;
    {
      std::lock_guard lock(mutex_);
      call = ++calls_[path];
    }
    if (path == "/v1/workspaces/slow/wait") {
      // As berthd: holds the request for timeout_s, then 504.
      auto body = co_await ex.ReadJson();
      int64_t seconds = body && body->is_object() ? body->value("timeout_s", int64_t{0}) : 0;
      {
        std::lock_guard lock(mutex_);
        wait_timeouts_.push_back(seconds);
      }
      boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
      timer.expires_after(std::chrono::seconds(seconds));
      // A stopped server cancels the timer: then it answers at once, which is as good.
      auto waited = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
      (void)waited;
      Error error(ErrorCode::kDeadlineExceeded,
                  fmt::format("workspace 'slow' is still starting after {} s", seconds));
      co_await ex.SendError(error);
    } else if (path == "/v1/workspaces/waking/ports") {
      if (call <= 2) {
        co_await Unavailable(ex, "1");
      } else {
        json ports = {{"ports", json::array()}};
        co_await ex.SendJson(http::bhttp::status::ok, ports);
      }
    } else if (path == "/v1/workspaces/waking/exec") {
      if (call == 1) {
        co_await Unavailable(ex, "0");
      } else {
        // The body came again with the retry.
        auto body = co_await ex.ReadJson();
        bool whole = body && body->is_object() && body->contains("cmd");
        protocol::ExecEvent end(protocol::ExecEvent::Type::kEnd);
        end.exit.exit_code = whole ? 0 : 99;
        std::string lines = end.ToLine() + "\n";
        const std::vector<std::pair<std::string, std::string>> no_headers;
        auto begun = co_await ex.BeginChunked(http::bhttp::status::ok, "application/x-ndjson",
                                              no_headers);
        if (begun) {
          auto wrote = co_await ex.WriteChunk(lines);
          if (wrote) (void)co_await ex.EndChunked();  // the client's error tells if not
        }
      }
    } else if (path == "/v1/workspaces/down/ports") {
      co_await Unavailable(ex, nullptr);
    } else if (path == "/v1/workspaces/broken/checkpoints/cp_1/restore") {
      // The workspace is whole; the undo checkpoint is not.
      json restored = {{"workspace", Workspace("ws_0000000000000001")}, {"undo", {{"id", "cp_2"}}}};
      co_await ex.SendJson(http::bhttp::status::ok, restored);
    } else if (path == "/v1/workspaces/broken/checkpoints/cp_2/restore") {
      json restored = {{"undo", nullptr}};
      co_await ex.SendJson(http::bhttp::status::ok, restored);
    } else if (path == "/v1/workspaces/broken") {
      json broken = {{"id", 5}};
      co_await ex.SendJson(http::bhttp::status::ok, broken);
    } else if (path == "/v1/workspaces") {
      // A cursor that never moves on.
      json page = {{"workspaces", json::array({Workspace("ws_0000000000000001")})},
                   {"next", "ws_0000000000000001"}};
      co_await ex.SendJson(http::bhttp::status::ok, page);
    } else {
      Error error(ErrorCode::kNotFound, "no such route here");
      co_await ex.SendError(error);
    }
  }

  boost::asio::io_context io_;
  std::unique_ptr<http::Server> server_;
  Endpoint endpoint_;
  std::thread thread_;
  std::mutex mutex_;
  std::map<std::string, int> calls_;
  std::vector<int64_t> wait_timeouts_;
};

}  // namespace

TEST_CASE("typed client: previews are made, listed newest first without tokens, and revoked",
          "[client][berthd]") {
  auto berth = Berth();
  v1::CreateWorkspace request;
  request.name = "typed-pv";
  auto ws = berth.CreateWorkspace(request, Soon());
  REQUIRE(ws);

  v1::CreatePreview private_request;
  private_request.port = 5173;
  auto made = berth.CreatePreview("typed-pv", private_request, Soon());
  INFO((made ? "" : made.error().message));
  REQUIRE(made);
  CHECK(made->workspace_id == ws->id);
  CHECK(made->port == 5173);
  CHECK_FALSE(made->is_public);
  CHECK(made->status == "active");
  REQUIRE(made->token);
  REQUIRE(made->link);
  CHECK(made->link->starts_with(made->url));
  CHECK(made->link->find(*made->token) != std::string::npos);
  CHECK(made->expires_at - made->created_at == 24 * 3600);  // berthd's default

  v1::CreatePreview public_request;
  public_request.port = 3000;
  public_request.is_public = true;
  public_request.expires_in_s = 3600;
  auto pub = berth.CreatePreview(ws->id, public_request, Soon());
  REQUIRE(pub);
  CHECK(pub->is_public);
  CHECK_FALSE(pub->token);
  CHECK(pub->expires_at - pub->created_at == 3600);

  auto listed = berth.ListPreviews("typed-pv", Soon());
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].id == pub->id);
  CHECK((*listed)[1].id == made->id);
  CHECK_FALSE((*listed)[1].token);
  CHECK_FALSE((*listed)[1].link);

  auto revoked = berth.RevokePreview("typed-pv", made->id, Soon());
  REQUIRE(revoked);
  CHECK(revoked->id == made->id);
  CHECK(revoked->status == "revoked");
  CHECK(revoked->revoked_at);
  listed = berth.ListPreviews("typed-pv", Soon());
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[1].status == "revoked");

  // berthd's refusals come back with their codes.
  auto unknown = berth.RevokePreview("typed-pv", "pv_nope", Soon());
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == ErrorCode::kNotFound);
  auto no_ws = berth.CreatePreview("no-such-ws", private_request, Soon());
  REQUIRE_FALSE(no_ws);
  CHECK(no_ws.error().code == ErrorCode::kNotFound);
  v1::CreatePreview too_short = private_request;
  too_short.expires_in_s = 1;
  auto short_lived = berth.CreatePreview("typed-pv", too_short, Soon());
  REQUIRE_FALSE(short_lived);
  CHECK(short_lived.error().code == ErrorCode::kInvalidArgument);

  REQUIRE(berth.DeleteWorkspace(ws->id, Soon()));
}

TEST_CASE("typed client: checkpoints of a stopped workspace are taken, listed newest first, got by name, "
          "restored with an undo checkpoint and deleted; one with memory of it is refused: it has none",
          "[client][berthd][checkpoints]") {
  auto berth = Berth();
  v1::CreateWorkspace request;
  request.name = "typed-cp";
  auto ws = CreateRunning(berth, request);

  v1::CreateCheckpoint first_request;
  first_request.name = "first";
  REQUIRE(berth.StopWorkspace(ws.id, true, Soon()));
  REQUIRE(berth.Wait(ws.id, v1::State::kStopped, Soon()));
  // With memory, of a stopped workspace: berthd's 409 says it has none (the memory reached it).
  first_request.memory = true;
  auto with_memory = berth.CreateCheckpoint("typed-cp", first_request, Soon());
  REQUIRE_FALSE(with_memory);
  CHECK(with_memory.error().code == ErrorCode::kFailedPrecondition);
  CHECK(with_memory.error().message.find("no memory to checkpoint") != std::string::npos);
  first_request.memory = false;

  auto first = berth.CreateCheckpoint("typed-cp", first_request, Soon());
  INFO((first ? "" : first.error().message));
  REQUIRE(first);
  CHECK(first->name == "first");
  CHECK(first->workspace_id == ws.id);
  CHECK(first->kind == "manual");
  CHECK(first->taken_while == "stopped");
  auto second = berth.CreateCheckpoint(ws.id, {}, Soon());
  REQUIRE(second);
  CHECK(second->name == second->id);
  CHECK(second->parent == first->id);

  auto listed = berth.ListCheckpoints("typed-cp", Soon());
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].id == second->id);
  CHECK((*listed)[1].id == first->id);
  auto got = berth.GetCheckpoint("typed-cp", "first", Soon());
  REQUIRE(got);
  CHECK(got->id == first->id);

  auto restored = berth.RestoreCheckpoint("typed-cp", "first", {}, Soon());
  INFO((restored ? "" : restored.error().message));
  REQUIRE(restored);
  CHECK(restored->workspace.id == ws.id);
  CHECK(restored->workspace.state == v1::State::kStopped);
  REQUIRE(restored->undo);
  CHECK(restored->undo->kind == "before_restore");
  v1::RestoreCheckpoint no_undo;
  no_undo.undo = false;
  auto back = berth.RestoreCheckpoint("typed-cp", restored->undo->id, no_undo, Soon());
  REQUIRE(back);
  CHECK_FALSE(back->undo);

  auto gone = berth.DeleteCheckpoint("typed-cp", first->id, Soon());
  REQUIRE(gone);
  CHECK(gone->id == first->id);
  auto missing = berth.GetCheckpoint("typed-cp", first->id, Soon());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
  listed = berth.ListCheckpoints("typed-cp", Soon());
  REQUIRE(listed);
  CHECK(listed->size() == 2);

  REQUIRE(berth.DeleteWorkspace(ws.id, Soon()));
}

TEST_CASE("typed client: Wait asks again when berthd's timeout runs out before the deadline",
          "[client]") {
  StandIn s;
  auto start = Clock::now();
  auto waited = s.Berth().Wait("slow", v1::State::kRunning, DeadlineIn(std::chrono::milliseconds(3500)));
  auto took = Clock::now() - start;
  REQUIRE_FALSE(waited);
  CHECK(waited.error().code == ErrorCode::kDeadlineExceeded);
  auto timeouts = s.WaitTimeouts();
  INFO(fmt::format("{}", fmt::join(timeouts, ",")));
  REQUIRE(timeouts.size() >= 2);
  CHECK(timeouts[0] == 2);  // what is left, less a second for berthd's answer to arrive
  CHECK(timeouts[1] >= 0);
  CHECK(timeouts[1] <= 1);
  // It used the deadline, and no more than a little past it.
  CHECK(took >= std::chrono::seconds(3));
  CHECK(took < std::chrono::seconds(6));  // loose: a loaded host is slow to schedule
}

TEST_CASE("typed client: a 503 with Retry-After is waited out within the deadline", "[client]") {
  StandIn s;
  auto start = Clock::now();
  auto agent = s.Berth().Agent("waking", DeadlineIn(std::chrono::seconds(10)));
  auto ports = client::ListPorts(agent.client, agent.scope);
  INFO((ports ? "" : ports.error().message));
  REQUIRE(ports);
  CHECK(s.Calls("/v1/workspaces/waking/ports") == 3);
  CHECK(Clock::now() - start >= std::chrono::seconds(2));  // Retry-After: 1, twice

  // A streamed exec whose body is in memory is sent again, body and all.
  protocol::ExecRequest exec;
  exec.cmd = std::string("true");
  auto end = client::ExecStream(agent.client, agent.scope, exec, {});
  INFO((end ? "" : end.error().message));
  REQUIRE(end);
  CHECK(end->exit_code == 0);
  CHECK(s.Calls("/v1/workspaces/waking/exec") == 2);

  // No time left for the wait it asks: the 503 is the answer.
  StandIn t;
  auto hurried = t.Berth().Agent("waking", DeadlineIn(std::chrono::milliseconds(500)));
  auto refused = client::ListPorts(hurried.client, hurried.scope);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kUnavailable);
  CHECK(t.Calls("/v1/workspaces/waking/ports") == 1);

  // Without Retry-After a 503 is not retried.
  auto down = t.Berth().Agent("down", DeadlineIn(std::chrono::seconds(10)));
  auto failed = client::ListPorts(down.client, down.scope);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code == ErrorCode::kUnavailable);
  CHECK(t.Calls("/v1/workspaces/down/ports") == 1);
}

TEST_CASE("typed client: an answer that is not what the API says is an internal error",
          "[client]") {
  StandIn s;
  auto berth = s.Berth();
  auto broken = berth.GetWorkspace("broken", Soon());
  REQUIRE_FALSE(broken);
  CHECK(broken.error().code == ErrorCode::kInternal);
  CHECK(broken.error().message.find("GET /v1/workspaces/broken") != std::string::npos);
  CHECK(broken.error().message.find("'id'") != std::string::npos);

  // A cursor that does not move forward ends the walk with an error, not a loop.
  auto start = Clock::now();
  auto walked = berth.ListWorkspaces({}, Soon());
  REQUIRE_FALSE(walked);
  CHECK(walked.error().code == ErrorCode::kInternal);
  CHECK(walked.error().message.find("does not come after") != std::string::npos);
  CHECK(s.Calls("/v1/workspaces") == 2);
  CHECK(Clock::now() - start < std::chrono::seconds(5));

  // A restore's answer is read strictly, both its parts.
  auto bad_undo = berth.RestoreCheckpoint("broken", "cp_1", {}, Soon());
  REQUIRE_FALSE(bad_undo);
  CHECK(bad_undo.error().code == ErrorCode::kInternal);
  CHECK(bad_undo.error().message.find("POST /v1/workspaces/broken/checkpoints/cp_1/restore") != std::string::npos);
  CHECK(bad_undo.error().message.find("checkpoint") != std::string::npos);
  auto no_workspace = berth.RestoreCheckpoint("broken", "cp_2", {}, Soon());
  REQUIRE_FALSE(no_workspace);
  CHECK(no_workspace.error().code == ErrorCode::kInternal);
  CHECK(no_workspace.error().message.find("'workspace'") != std::string::npos);

  auto missing = berth.GetWorkspace("nothing-here", Soon());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
}

}  // namespace berth
