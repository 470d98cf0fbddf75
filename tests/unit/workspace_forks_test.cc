// Forks (controller/workspace/forks.cc) against the fake hypervisor, on real qcow2 files: new
// workspaces on a checkpoint's layers that resume its memory as machines of their own, each given
// a new identity before it runs; one whose guest refuses it is destroyed; the source cannot pull
// the layers from under a fork.
#include <filesystem>
#include <fstream>
#include <set>

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
  Fixture f{[this](ServiceOptions& o) {
    o.make_disks = MakeQcow2Disks;
    o.sync_guest = [](const agent_client::AgentLink&, std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      co_return nlohmann::json{{"synced", true}};
    };
    o.give_identity = [this](const agent_client::AgentLink& link, protocol::IdentityRequest request,
                             std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      if (identity_fails) co_return Fail(ErrorCode::kUnavailable, "the agent answered 404 to POST /v1/identity");
      std::lock_guard lock(mutex);
      identities.emplace_back(link.token, request);
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
  REQUIRE(t.f.service->DeleteTemplate(t.f.tenant, "node-dev").has_value());
  CHECK(t.f.service->ListTemplates(t.f.tenant)->empty());
  auto now = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, source.id, made->checkpoint_id));
  INFO((now ? "" : now.error().message));
  CHECK(now.has_value());
}

}  // namespace
}  // namespace berth::workspace
