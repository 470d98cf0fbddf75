// Forks (controller/workspace/forks.cc) against the fake hypervisor, on real qcow2 files: new
// workspaces on a checkpoint's layers that resume its memory as machines of their own, each given
// a new identity before it runs; one whose guest refuses it is destroyed; the source cannot pull
// the layers from under a fork.
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/workspace/disks.h"
#include "tests/unit/service_fixture.h"

namespace berth::workspace {
namespace {

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct ForkFixture {
  std::mutex mutex;
  std::vector<std::pair<std::string, protocol::IdentityRequest>> identities;  // (token used, request)
  std::atomic<bool> identity_fails{false};
  // A template build's commands (run_in_guest): what was asked, and how they end.
  std::vector<protocol::ExecRequest> ran;
  std::atomic<int> script_exit{0};
  std::atomic<bool> ready_ok{true};
  std::atomic<int> ready_tries{0};
  // The fork whose agent took a token (by its endpoint), and that token: its probes with
  // another are refused, as its agent's 401 would be.
  std::string held_path, held_token;
  std::atomic<bool> identity_hangs{false};
  Fixture f{[this](ServiceOptions& o) {
    o.probe = [this](const agent_client::AgentLink& link, std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      {
        std::lock_guard lock(mutex);
        if (!held_path.empty() && link.endpoint.path == held_path && link.token != held_token) {
          co_return Fail(ErrorCode::kUnavailable, "the agent answered 401 to GET /v1/activity");
        }
      }
      std::lock_guard lock(f.activity_mutex);
      co_return f.activity;
    };
    o.run_in_guest = [this](const agent_client::AgentLink&, protocol::ExecRequest request,
                            std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      bool is_ready = false;
      {
        std::lock_guard lock(mutex);
        // The script is {bash, -c, wrapper, script, seconds}; `ready` is {bash, -c, ready}.
        is_ready = !request.background && protocol::CommandArgv(request.cmd).size() == 3;
        ran.push_back(request);
      }
      if (request.background) co_return nlohmann::json{{"pid", 300}, {"tag", "template-start"}};
      protocol::ExecResult result;
      result.pid = 200;
      if (is_ready) {
        ++ready_tries;
        result.exit.exit_code = ready_ok ? 0 : 7;
      } else {
        result.exit.exit_code = script_exit.load();
        result.stdout_data = std::string(20000, '.') + "\nE: Unable to locate package nope\n";
      }
      co_return result.ToJson();
    };
    o.make_disks = MakeQcow2Disks;
    o.sync_guest = [](const agent_client::AgentLink&, std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      co_return nlohmann::json{{"synced", true}};
    };
    o.give_identity = [this](const agent_client::AgentLink& link, protocol::IdentityRequest request,
                             std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      if (identity_fails) co_return Fail(ErrorCode::kUnavailable, "the agent answered 404 to POST /v1/identity");
      bool hang = false;
      {
        std::lock_guard lock(mutex);
        identities.emplace_back(link.token, request);
        // The guest's agent holds the new token from its answer on.
        held_path = link.endpoint.path;
        held_token = request.token;
        hang = identity_hangs;
      }
      if (hang) {
        // The answer never reaches berthd (killed meanwhile): the guest took the token all the same.
        boost::asio::steady_timer forever(co_await boost::asio::this_coro::executor, std::chrono::hours(24));
        auto [ec] = co_await forever.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
        co_return Fail(ErrorCode::kUnavailable, ec ? "cut" : "never");
      }
      std::lock_guard lock(mutex);
      co_return nlohmann::json{{"applied", {"hostname", "machine_id", "mac", "ssh_host_keys", "entropy"}}};
    };
  }};
  ForkFixture() {
    f.MakeQcow2Image();
  }
  Layout LayoutOf(const std::string& id) const { return Layout(f.dir.path(), id); }
  Result<store::Checkpoint> Take(const std::string& ws, const std::string& name, bool memory) {
    CheckpointRequest request;
    request.name = name;
    request.memory = memory;
    return f.runner.Sync(f.service->TakeCheckpoint(f.tenant, ws, request));
  }
  Result<std::vector<Workspace>> Fork(const std::string& source, std::optional<std::string> checkpoint,
                                      const std::string& name, int count = 1) {
    ForkRequest request;
    request.source = source;
    request.checkpoint = std::move(checkpoint);
    request.name = name;
    request.count = count;
    return f.runner.Sync(f.service->Fork(f.tenant, request));
  }
  Workspace Record(const std::string& id) {
    auto ws = f.store->GetWorkspaceById(id);
    REQUIRE(ws.has_value());
    return *ws;
  }
};

TEST_CASE("forks: two forks of a memory checkpoint resume its memory as machines of their own, each given a new "
          "identity with its parent's token before it runs",
          "[service][forks]") {
  ForkFixture t;
  auto source = t.f.Create("parent");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  auto warm = t.Take(source.id, "warm", true);
  REQUIRE(warm.has_value());
  Layout from = t.LayoutOf(source.id);
  std::string parent_token = Slurp(from.checkpoint_token(warm->id));

  auto forks = t.Fork("parent", "warm", "kid", 2);
  INFO((forks ? "" : forks.error().message));
  REQUIRE(forks.has_value());
  REQUIRE(forks->size() == 2);
  CHECK((*forks)[0].name == "kid-1");
  CHECK((*forks)[1].name == "kid-2");
  std::set<std::string> macs = {t.f.hv.SpecForTest(source.DomainName())->mac};
  std::set<std::string> tokens = {parent_token};
  for (const auto& fork : *forks) {
    REQUIRE(t.f.Reaches(fork.id, State::kRunning));
    auto ws = t.Record(fork.id);
    CHECK(ws.from_checkpoint == warm->id);
    CHECK_FALSE(ws.fresh_identity);
    CHECK_FALSE(ws.resume_memory.has_value());
    CHECK(ws.memory_mib == source.memory_mib);
    // Its disks stand on the checkpoint's layers, in the parent's directory.
    Layout layout = t.LayoutOf(fork.id);
    CHECK(BackingFile(layout.root_disk(0)) == from.root_disk(warm->gen).string());
    CHECK(BackingFile(layout.data_disk(0)) == from.data_disk(warm->gen).string());
    // The parent's memory, resumed as this machine; the rebound copy is gone.
    auto restored = t.f.hv.RestoredForTest(fork.DomainName());
    REQUIRE(restored.has_value());
    CHECK(restored->first == from.memory_file(warm->id).string());
    CHECK(t.f.hv.SpecForTest(fork.DomainName())->name == fork.DomainName());
    CHECK_FALSE(fs::exists(layout.rebound_memory()));
    macs.insert(t.f.hv.SpecForTest(fork.DomainName())->mac);
    // Its token is the one the identity call gave, no longer the parent's.
    std::string token = Slurp(layout.token());
    tokens.insert(token);
    CHECK(t.f.HasEvent(fork.id, "identity"));
  }
  CHECK(macs.size() == 3);
  CHECK(tokens.size() == 3);
  std::lock_guard lock(t.mutex);
  REQUIRE(t.identities.size() == 2);
  std::set<std::string> machine_ids;
  std::set<std::string> entropy;
  for (const auto& [used, request] : t.identities) {
    CHECK(used == parent_token);  // asked with the token the resumed agent holds
    CHECK(request.regenerate_ssh_host_keys);
    CHECK((request.hostname == "kid-1" || request.hostname == "kid-2"));
    machine_ids.insert(request.machine_id);
    entropy.insert(request.entropy);
    CHECK(tokens.contains(request.token));
  }
  CHECK(machine_ids.size() == 2);
  CHECK(entropy.size() == 2);
  CHECK(t.identities[0].second.mac != t.identities[1].second.mac);
  // The parent runs on, untouched.
  CHECK(t.Record(source.id).state == State::kRunning);
}

TEST_CASE("forks: a fork whose guest does not take a new identity is destroyed and ends in error, never running",
          "[service][forks]") {
  ForkFixture t;
  auto source = t.f.Create("parent");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  auto warm = t.Take(source.id, "warm", true);
  REQUIRE(warm.has_value());
  t.identity_fails = true;
  auto forks = t.Fork("parent", "warm", "clone");
  REQUIRE(forks.has_value());
  const auto& fork = forks->front();
  REQUIRE(t.f.Reaches(fork.id, State::kError));
  CHECK(t.Record(fork.id).error.value_or("").find("identity") != std::string::npos);
  CHECK_FALSE(t.f.HasEvent(fork.id, "started"));
  auto state = t.f.hv.State(fork.DomainName());
  REQUIRE(state.has_value());
  CHECK(*state == hypervisor::DomainState::kShutoff);
}

TEST_CASE("forks: of a stopped workspace without a checkpoint named, one of its disks is taken now and the fork "
          "boots cold, then takes its identity",
          "[service][forks]") {
  ForkFixture t;
  auto source = t.f.Create("cold");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  REQUIRE(t.f.Stop(source.id).has_value());
  REQUIRE(t.f.Reaches(source.id, State::kStopped));
  auto forks = t.Fork("cold", std::nullopt, "branch");
  INFO((forks ? "" : forks.error().message));
  REQUIRE(forks.has_value());
  auto rows = t.f.store->ListCheckpoints(source.id);
  REQUIRE(rows.has_value());
  REQUIRE(rows->size() == 1);
  CHECK_FALSE(rows->front().memory);
  const auto& fork = forks->front();
  REQUIRE(t.f.Reaches(fork.id, State::kRunning));
  CHECK_FALSE(t.f.hv.RestoredForTest(fork.DomainName()).has_value());  // booted, not resumed
  std::lock_guard lock(t.mutex);
  REQUIRE(t.identities.size() == 1);
  CHECK(t.identities[0].second.hostname == "branch");
  CHECK(Slurp(t.LayoutOf(fork.id).token()) == t.identities[0].second.token);
}

TEST_CASE("forks: the source can delete neither the checkpoint a fork stands on, nor one under it, nor itself, and "
          "names the fork; once the fork is gone it can",
          "[service][forks]") {
  ForkFixture t;
  auto source = t.f.Create("base");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  auto first = t.Take(source.id, "first", false);
  REQUIRE(first.has_value());
  auto second = t.Take(source.id, "second", false);
  REQUIRE(second.has_value());
  auto forks = t.Fork("base", "second", "leaf");
  REQUIRE(forks.has_value());
  const auto fork = forks->front();
  REQUIRE(t.f.Reaches(fork.id, State::kRunning));

  for (const char* cp : {"first", "second"}) {
    auto refused = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, source.id, cp));
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
    CHECK(refused.error().message.find("leaf") != std::string::npos);
  }
  auto kept = t.f.Delete(source.id);
  REQUIRE_FALSE(kept.has_value());
  CHECK(kept.error().message.find("leaf") != std::string::npos);
  CHECK(t.Record(source.id).state == State::kRunning);

  // The fork's own checkpoint on its first layers, deleted: they are rebased onto the source's
  // checkpoint, never onto the image.
  auto own = t.Take(fork.id, "own", false);
  REQUIRE(own.has_value());
  REQUIRE(t.f.Stop(fork.id).has_value());
  REQUIRE(t.f.Reaches(fork.id, State::kStopped));
  auto dropped = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, fork.id, "own"));
  INFO((dropped ? "" : dropped.error().message));
  REQUIRE(dropped.has_value());
  Layout layout = t.LayoutOf(fork.id);
  CHECK(BackingFile(layout.root_disk(1)) == t.LayoutOf(source.id).root_disk(second->gen).string());
  CHECK(BackingFile(layout.data_disk(1)) == t.LayoutOf(source.id).data_disk(second->gen).string());

  REQUIRE(t.f.Delete(fork.id).has_value());
  REQUIRE(t.f.Gone(fork.id));
  REQUIRE(t.f.Stop(source.id).has_value());  // a running VM's chain cannot change under it
  REQUIRE(t.f.Reaches(source.id, State::kStopped));
  auto now = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, source.id, "second"));
  INFO((now ? "" : now.error().message));
  CHECK(now.has_value());
}

TEST_CASE("forks: a berthd killed after the guest took its new token and before writing it finds the token kept "
          "beside the old one, and the fork runs",
          "[service][forks][crash]") {
  ForkFixture t;
  auto source = t.f.Create("mother");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  auto warm = t.Take(source.id, "warm", true);
  REQUIRE(warm.has_value());
  t.identity_hangs = true;
  auto forks = t.Fork("mother", "warm", "orphan");
  REQUIRE(forks.has_value());
  const auto fork = forks->front();
  Layout layout = t.LayoutOf(fork.id);
  std::string taken;
  for (int i = 0; i < 500 && taken.empty(); ++i) {
    {
      std::lock_guard lock(t.mutex);
      taken = t.held_token;
    }
    if (taken.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE_FALSE(taken.empty());
  // Killed there: the token file still has the parent's, the new one is kept beside it.
  CHECK(Slurp(layout.token()) != taken);
  CHECK(Slurp(layout.next_token()) == taken);
  t.identity_hangs = false;
  t.f.RestartService();

  REQUIRE(t.f.Reaches(fork.id, State::kRunning));
  std::lock_guard lock(t.mutex);
  // The identity is given again (the store never said it was), asked with the token the guest
  // took; the last one given is the file's, and nothing is left beside it.
  REQUIRE(t.identities.size() == 2);
  CHECK(t.identities[1].first == taken);
  CHECK(Slurp(layout.token()) == t.held_token);
  CHECK(t.held_token == t.identities[1].second.token);
  CHECK_FALSE(fs::exists(layout.next_token()));
}

TEST_CASE("forks: a fork is registered behind the source's queued operations, so it and a delete of its checkpoint "
          "never both succeed",
          "[service][forks]") {
  ForkFixture t;
  auto source = t.f.Create("src");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  REQUIRE(t.Take(source.id, "c1", false).has_value());
  REQUIRE(t.Take(source.id, "c2", false).has_value());
  // Back on c1: c2 is off the running disks' chain, so it can be deleted while the VM runs.
  auto back = t.f.runner.Sync(t.f.service->RestoreCheckpoint(t.f.tenant, source.id, "c1", false));
  REQUIRE(back.has_value());
  REQUIRE(t.f.Reaches(source.id, State::kRunning));

  // An operation holds the source's queue; a delete and a fork of c2 come in behind it.
  t.f.hv.HoldNextForTest("Snapshot");
  auto busy = boost::asio::co_spawn(t.f.runner.io(),
                                    t.f.service->TakeCheckpoint(t.f.tenant, source.id, CheckpointRequest{}),
                                    boost::asio::use_future);
  REQUIRE(t.f.hv.WaitHeldForTest("Snapshot", std::chrono::seconds(5)));
  auto deleted = boost::asio::co_spawn(t.f.runner.io(), t.f.service->DeleteCheckpoint(t.f.tenant, source.id, "c2"),
                                       boost::asio::use_future);
  ForkRequest request;
  request.source = source.id;
  request.checkpoint = "c2";
  request.name = "late";
  auto forked = boost::asio::co_spawn(t.f.runner.io(), t.f.service->Fork(t.f.tenant, request), boost::asio::use_future);
  // Neither is done while the queue is held (the fork used to register at once, beside it).
  CHECK(forked.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  CHECK(deleted.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  t.f.hv.ReleaseForTest("Snapshot");
  REQUIRE(busy.get().has_value());
  auto gone = deleted.get();
  auto made = forked.get();
  CHECK(gone.has_value() != made.has_value());
  if (gone) {
    CHECK(made.error().code == ErrorCode::kNotFound);
    CHECK_FALSE(t.f.store->GetWorkspace(t.f.tenant, "late").has_value());
  } else {
    CHECK(gone.error().code == ErrorCode::kFailedPrecondition);
    CHECK(gone.error().message.find("late") != std::string::npos);
  }
}

TEST_CASE("forks: a retry with the same Idempotency-Key gets the fork the first made, and no second checkpoint is taken",
          "[service][forks]") {
  ForkFixture t;
  auto source = t.f.Create("origin");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  REQUIRE(t.f.Stop(source.id).has_value());
  REQUIRE(t.f.Reaches(source.id, State::kStopped));
  ForkRequest request;
  request.source = "origin";
  request.name = "again";
  request.idempotency_key = "retry-me";
  auto first = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, request));
  INFO((first ? "" : first.error().message));
  REQUIRE(first.has_value());
  auto second = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, request));
  REQUIRE(second.has_value());
  REQUIRE(second->size() == 1);
  CHECK(second->front().id == first->front().id);
  auto rows = t.f.store->ListCheckpoints(source.id);
  REQUIRE(rows.has_value());
  CHECK(rows->size() == 1);
  // Another key is another fork (here refused by its name, taken).
  request.idempotency_key = "another";
  auto third = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, request));
  REQUIRE_FALSE(third.has_value());
  CHECK(third.error().code == ErrorCode::kAlreadyExists);
  CHECK(t.f.store->ListCheckpoints(source.id)->size() == 1);  // refused before its checkpoint
  auto long_key = request;
  long_key.idempotency_key = std::string(201, 'k');
  auto refused = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, long_key));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("forks: a fork request that would widen or resize the source is refused; names and counts are checked",
          "[service][forks]") {
  auto wide = ParseForkRequest({{"name", "x"}, {"from", {{"workspace", "a"}}}, {"network", {{"egress", "open"}}}});
  REQUIRE_FALSE(wide.has_value());
  CHECK(wide.error().message.find("'network' cannot be given with 'from'") != std::string::npos);
  auto sized = ParseForkRequest({{"name", "x"}, {"from", {{"workspace", "a"}}}, {"memory_mib", 4096}});
  REQUIRE_FALSE(sized.has_value());
  auto ok = ParseForkRequest({{"name", "x"}, {"from", {{"workspace", "a"}, {"checkpoint", "cp"}}}});
  REQUIRE(ok.has_value());
  CHECK(ok->source == "a");
  CHECK(ok->checkpoint == "cp");
  auto many = ParseForkCheckpointRequest({{"name", "x"}, {"count", kMaxForksAtOnce + 1}}, "a", "cp");
  REQUIRE_FALSE(many.has_value());
  auto long_name = ParseForkCheckpointRequest({{"name", std::string(56, 'a')}, {"count", 10}}, "a", "cp");
  REQUIRE_FALSE(long_name.has_value());  // "<56 a>-10" is longer than a workspace name may be
  auto unknown = ParseForkCheckpointRequest({{"name", "x"}, {"from", "y"}}, "a", "cp");
  REQUIRE_FALSE(unknown.has_value());
}

TEST_CASE("templates: a running workspace published as a template is checkpointed with memory; a workspace made "
          "from it resumes that memory as a fork, and the template keeps its checkpoint and workspace until deleted",
          "[service][forks][templates]") {
  ForkFixture t;
  auto source = t.f.Create("builder");
  REQUIRE(t.f.Reaches(source.id, State::kRunning));
  TemplateRequest publish;
  publish.name = "node-dev";
  publish.workspace = "builder";
  auto made = t.f.runner.Sync(t.f.service->CreateTemplate(t.f.tenant, publish));
  INFO((made ? "" : made.error().message));
  REQUIRE(made.has_value());
  auto cp = t.f.store->GetCheckpoint(source.id, made->checkpoint_id);
  REQUIRE(cp.has_value());
  CHECK(cp->memory);
  CHECK(cp->name == "template-node-dev");
  auto again = t.f.runner.Sync(t.f.service->CreateTemplate(t.f.tenant, publish));
  REQUIRE_FALSE(again.has_value());
  CHECK(again.error().code == ErrorCode::kAlreadyExists);

  // A disk checkpoint is no template: nothing would be running in its workspaces.
  auto disks = t.Take(source.id, "disks", false);
  REQUIRE(disks.has_value());
  TemplateRequest cold = publish;
  cold.name = "cold";
  cold.checkpoint = "disks";
  auto refused = t.f.runner.Sync(t.f.service->CreateTemplate(t.f.tenant, cold));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
  CHECK(refused.error().message.find("no memory") != std::string::npos);

  ForkRequest from;
  from.template_name = "node-dev";
  from.name = "app";
  auto forks = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, from));
  REQUIRE(forks.has_value());
  const auto app = forks->front();
  REQUIRE(t.f.Reaches(app.id, State::kRunning));
  CHECK(t.Record(app.id).from_checkpoint == made->checkpoint_id);
  auto restored = t.f.hv.RestoredForTest(app.DomainName());
  REQUIRE(restored.has_value());
  CHECK(restored->first == t.LayoutOf(source.id).memory_file(made->checkpoint_id).string());
  ForkRequest unknown = from;
  unknown.template_name = "nope";
  unknown.name = "none";
  auto missing = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, unknown));
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().message.find("no template 'nope'") != std::string::npos);

  // The fork goes; the template still holds its checkpoint and workspace.
  REQUIRE(t.f.Delete(app.id).has_value());
  REQUIRE(t.f.Gone(app.id));
  REQUIRE(t.f.Stop(source.id).has_value());
  REQUIRE(t.f.Reaches(source.id, State::kStopped));
  auto held = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, source.id, made->checkpoint_id));
  REQUIRE_FALSE(held.has_value());
  CHECK(held.error().message.find("template 'node-dev'") != std::string::npos);
  auto kept = t.f.Delete(source.id);
  REQUIRE_FALSE(kept.has_value());
  CHECK(kept.error().message.find("template 'node-dev'") != std::string::npos);
  auto listed = t.f.service->ListTemplates(t.f.tenant);
  REQUIRE(listed.has_value());
  REQUIRE(listed->size() == 1);
  REQUIRE(t.f.runner.Sync(t.f.service->DeleteTemplate(t.f.tenant, "node-dev")).has_value());
  CHECK(t.f.service->ListTemplates(t.f.tenant)->empty());
  auto now = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, source.id, made->checkpoint_id));
  INFO((now ? "" : now.error().message));
  CHECK(now.has_value());
}

TemplateRequest Scripted(const std::string& name, const std::string& ready = "") {
  auto parsed = ParseTemplateRequest({{"name", name},
                                      {"script", "sudo apt-get install -y cowsay"},
                                      {"start", "python3 -m http.server 8123"},
                                      {"ready", ready.empty() ? "curl -sf http://127.0.0.1:8123/" : ready},
                                      {"timeout_s", 60}});
  REQUIRE(parsed.has_value());
  return *parsed;
}

TEST_CASE("templates: one built from a script runs it in a workspace of its own, starts `start`, waits for `ready`, "
          "then is that workspace's memory checkpoint; its workspace stops, and goes with the template",
          "[service][forks][templates]") {
  ForkFixture t;
  t.ready_ok = false;
  auto made = t.f.runner.Sync(t.f.service->CreateTemplate(t.f.tenant, Scripted("node-dev")));
  INFO((made ? "" : made.error().message));
  REQUIRE(made.has_value());
  CHECK(made->state == "building");
  CHECK(made->checkpoint_id.empty());
  auto builder = t.Record(made->workspace_id);
  CHECK(builder.name == "template-node-dev");
  CHECK(builder.labels == nlohmann::json{{"berth.template", "node-dev"}});

  // Until `ready` exits 0 it is being built: no workspace can be made from it, nor can it go.
  REQUIRE(testing::WaitFor([&] { return t.ready_tries.load() >= 1; }, std::chrono::seconds(10)));
  ForkRequest from;
  from.template_name = "node-dev";
  from.name = "app";
  auto early = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, from));
  REQUIRE_FALSE(early.has_value());
  CHECK(early.error().code == ErrorCode::kFailedPrecondition);
  CHECK(early.error().message.find("still being built") != std::string::npos);
  auto busy = t.f.runner.Sync(t.f.service->DeleteTemplate(t.f.tenant, "node-dev"));
  REQUIRE_FALSE(busy.has_value());
  CHECK(busy.error().message.find("delete its workspace 'template-node-dev'") != std::string::npos);

  t.ready_ok = true;
  REQUIRE(testing::WaitFor([&] { return t.f.service->GetTemplate(t.f.tenant, "node-dev")->state == "ready"; },
                           std::chrono::seconds(10)));
  auto ready = t.f.service->GetTemplate(t.f.tenant, "node-dev");
  auto cp = t.f.store->GetCheckpoint(builder.id, ready->checkpoint_id);
  REQUIRE(cp.has_value());
  CHECK(cp->memory);
  CHECK(ready->error.empty());
  CHECK(ready->build_log.find("(exited 0 after") != std::string::npos);
  // Its memory is the template's: the workspace itself stops.
  CHECK(t.f.Reaches(builder.id, State::kStopped));
  {
    std::lock_guard lock(t.mutex);
    REQUIRE(t.ran.size() >= 3);
    // The script as an argument of its own (never spliced into a command line), then `start`
    // in the background, then `ready` until it exits 0.
    auto script = protocol::CommandArgv(t.ran[0].cmd);
    REQUIRE(script.size() == 5);
    CHECK(script[0] == "bash");
    CHECK(script[3] == "sudo apt-get install -y cowsay");
    CHECK(std::stoi(script[4]) <= 60);  // timeout(1)'s seconds: what is left of timeout_s
    CHECK(t.ran[0].timeout_ms.has_value());
    CHECK(t.ran[1].background);
    CHECK(t.ran[1].tag == "template-start");
    CHECK(protocol::CommandArgv(t.ran[1].cmd).back() == "python3 -m http.server 8123");
    CHECK(protocol::CommandArgv(t.ran.back().cmd).back() == "curl -sf http://127.0.0.1:8123/");
  }

  auto forks = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, from));
  REQUIRE(forks.has_value());
  const auto app = forks->front();
  REQUIRE(t.f.Reaches(app.id, State::kRunning));
  CHECK(t.Record(app.id).from_checkpoint == ready->checkpoint_id);

  // Deleted while a fork stands on its checkpoint: the template goes, its workspace stays for
  // the fork; deleting the fork then lets the workspace go.
  REQUIRE(t.f.runner.Sync(t.f.service->DeleteTemplate(t.f.tenant, "node-dev")).has_value());
  CHECK_FALSE(t.f.service->GetTemplate(t.f.tenant, "node-dev").has_value());
  CHECK(t.f.service->Get(t.f.tenant, builder.id).has_value());
  REQUIRE(t.f.Delete(app.id).has_value());
  REQUIRE(t.f.Gone(app.id));
  REQUIRE(t.f.Delete(builder.id).has_value());
  CHECK(t.f.Gone(builder.id));
}

TEST_CASE("templates: a build whose script fails ends failed with its exit code and the end of its output, its "
          "workspace deleted; one cut by a restart ends failed too",
          "[service][forks][templates]") {
  ForkFixture t;
  t.script_exit = 100;
  auto made = t.f.runner.Sync(t.f.service->CreateTemplate(t.f.tenant, Scripted("broken")));
  REQUIRE(made.has_value());
  REQUIRE(testing::WaitFor([&] { return t.f.service->GetTemplate(t.f.tenant, "broken")->state == "failed"; },
                           std::chrono::seconds(10)));
  auto failed = t.f.service->GetTemplate(t.f.tenant, "broken");
  CHECK(failed->error.find("the script exited with 100") != std::string::npos);
  CHECK(failed->checkpoint_id.empty());
  // The end of the output, where the reason is, within the bound.
  CHECK(failed->build_log.ends_with("E: Unable to locate package nope\n"));
  CHECK(failed->build_log.size() <= 16 * 1024);
  CHECK(t.f.Gone(made->workspace_id));
  {
    std::lock_guard lock(t.mutex);
    CHECK(t.ran.size() == 1);  // neither `start` nor `ready` after a failed script
  }
  ForkRequest from;
  from.template_name = "broken";
  from.name = "app";
  auto refused = t.f.runner.Sync(t.f.service->Fork(t.f.tenant, from));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().message.find("failed to build: the script exited with 100") != std::string::npos);
  auto again = t.f.runner.Sync(t.f.service->CreateTemplate(t.f.tenant, Scripted("broken")));
  REQUIRE_FALSE(again.has_value());
  CHECK(again.error().message.find("delete it to build it again") != std::string::npos);
  REQUIRE(t.f.runner.Sync(t.f.service->DeleteTemplate(t.f.tenant, "broken")).has_value());

  // berthd restarted in the middle of a build: the build is over, failed, and says why.
  t.script_exit = 0;
  t.ready_ok = false;
  auto cut = t.f.runner.Sync(t.f.service->CreateTemplate(t.f.tenant, Scripted("cut")));
  REQUIRE(cut.has_value());
  REQUIRE(testing::WaitFor([&] { return t.ready_tries.load() >= 1; }, std::chrono::seconds(10)));
  t.f.RestartService();
  auto after = t.f.service->GetTemplate(t.f.tenant, "cut");
  REQUIRE(after.has_value());
  CHECK(after->state == "failed");
  CHECK(after->error == "berthd restarted during the build");
  // Its workspace stays until the template is deleted, then goes with it.
  REQUIRE(t.f.service->Get(t.f.tenant, cut->workspace_id).has_value());
  REQUIRE(t.f.runner.Sync(t.f.service->DeleteTemplate(t.f.tenant, "cut")).has_value());
  CHECK(t.f.Gone(cut->workspace_id));
}

TEST_CASE("templates: a script request is checked: not with 'from', a name short enough for its workspace, a "
          "bounded script and timeout", "[service][templates]") {
  auto bad = [](nlohmann::json body) {
    auto r = ParseTemplateRequest(body);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    return r.error().message;
  };
  CHECK(bad({{"name", "x"}, {"script", "true"}, {"from", {{"workspace", "a"}}}}).find("not both") != std::string::npos);
  CHECK(bad({{"name", std::string(49, 'a')}, {"script", "true"}}).find("at most 48") != std::string::npos);
  CHECK(bad({{"name", "x"}, {"script", std::string(64 * 1024 + 1, 'a')}}).find("'script' must be at most") !=
        std::string::npos);
  CHECK(bad({{"name", "x"}, {"script", ""}}).find("must not be empty") != std::string::npos);
  CHECK(bad({{"name", "x"}, {"script", "true"}, {"timeout_s", 7201}}).find("timeout_s") != std::string::npos);
  CHECK(bad({{"name", "x"}, {"script", "true"}, {"size", "huge"}}).find("'size'") != std::string::npos);
  CHECK(bad({{"name", "x"}, {"script", "true"}, {"image", "../etc"}}).size() > 0);
  CHECK(bad({{"name", "x"}}).find("or give 'script'") != std::string::npos);
  auto ok = ParseTemplateRequest({{"name", std::string(48, 'a')}, {"script", "true"}, {"image", "desktop"}});
  REQUIRE(ok.has_value());
  REQUIRE(ok->build.has_value());
  CHECK(ok->build->image == "desktop");
  CHECK(ok->build->timeout_s == 1800);
}

}  // namespace
}  // namespace berth::workspace
