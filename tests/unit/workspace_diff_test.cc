// Checkpoint diffs (controller/workspace/diff.cc) against the fake hypervisor, on real qcow2
// files: each checkpoint's layers are plugged into the running guest under scratch overlays of
// their own, the guest is asked by serial, and everything is unplugged and removed after,
// whatever the guest answered; a guest that keeps a disk is stopped.
#include <filesystem>

#include "controller/workspace/disks.h"
#include "tests/unit/service_fixture.h"

namespace berth::workspace {
namespace {

struct DiffFixture {
  std::mutex mutex;
  std::vector<protocol::DiffRequest> asked;
  // What the fake hypervisor had plugged in, and where each overlay stood, when the guest was
  // asked.
  std::map<std::string, hypervisor::DiskAttachment> plugged_when_asked;
  std::map<std::string, std::string> backing_when_asked;  // target -> the overlay's backing file
  std::function<Result<nlohmann::json>()> answer = [] {
    protocol::DiffResult r;
    r.paths = {"/workspace", "/home/agent"};
    r.files.added.push_back({"/workspace/new.txt", "file", 5, 0});
    r.files.counts.added = 1;
    r.packages.installed.push_back({"cowsay", "", "3.03+dfsg2-8"});
    return protocol::ToJson(r);
  };
  std::string domain;  // the workspace's, for the answer to look at the hypervisor
  Fixture f{[this](ServiceOptions& o) {
    o.make_disks = MakeQcow2Disks;
    o.sync_guest = [](const agent_client::AgentLink&, std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      co_return nlohmann::json{{"synced", true}};
    };
    o.detach_timeout = std::chrono::seconds(1);
    o.diff_in_guest = [this](const agent_client::AgentLink&, protocol::DiffRequest request,
                             std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      std::lock_guard lock(mutex);
      asked.push_back(request);
      plugged_when_asked = f.hv.AttachedForTest(domain);
      for (const auto& [target, disk] : plugged_when_asked) {
        backing_when_asked[target] = BackingFile(disk.file).value_or("<not qcow2>");
      }
      co_return answer();
    };
  }};
  DiffFixture() { f.MakeQcow2Image(); }

  Layout LayoutOf(const Workspace& ws) const { return Layout(f.dir.path(), ws.id); }
  Workspace Running(const std::string& name) {
    auto ws = f.Create(name);
    REQUIRE(f.Reaches(ws.id, State::kRunning));
    domain = ws.DomainName();
    return ws;
  }
  store::Checkpoint Take(const std::string& ws, const std::string& name) {
    CheckpointRequest request;
    request.name = name;
    auto taken = f.runner.Sync(f.service->TakeCheckpoint(f.tenant, ws, request));
    REQUIRE(taken.has_value());
    return *taken;
  }
  Result<CheckpointDiff> Diff(const std::string& ws, const std::string& from, const std::string& to = "current") {
    DiffRequest request;
    request.from = from;
    request.to = to;
    return f.runner.Sync(f.service->DiffCheckpoints(f.tenant, ws, request, std::chrono::seconds(10)));
  }
  bool NoScratchLeft(const Layout& layout) {
    for (auto which : {"from-root", "from-data", "to-root", "to-data"}) {
      if (fs::exists(layout.diff_disk(which))) return false;
    }
    return true;
  }
};

TEST_CASE("diff: a checkpoint's two layers are plugged in under overlays, asked by serial, then unplugged and removed",
          "[service][checkpoints][diff]") {
  DiffFixture t;
  auto ws = t.Running("d1");
  auto first = t.Take(ws.id, "first");
  Layout layout = t.LayoutOf(ws);

  auto diff = t.Diff(ws.id, "first");
  INFO((diff ? "" : diff.error().message));
  REQUIRE(diff.has_value());
  CHECK(diff->from == first.id);
  CHECK(diff->to == "current");
  REQUIRE(diff->result.files.added.size() == 1);
  CHECK(diff->result.files.added[0].path == "/workspace/new.txt");
  REQUIRE(diff->result.packages.installed.size() == 1);
  CHECK(diff->result.packages.installed[0].name == "cowsay");

  REQUIRE(t.asked.size() == 1);
  CHECK(t.asked[0].from.root == "berth-from-root");
  CHECK(t.asked[0].from.data == "berth-from-data");
  CHECK_FALSE(t.asked[0].to.has_value());
  // Two disks, never the checkpoint's layers themselves: overlays on them.
  REQUIRE(t.plugged_when_asked.size() == 2);
  CHECK(t.plugged_when_asked.at("vdw").file == layout.diff_disk("from-root").string());
  CHECK(t.plugged_when_asked.at("vdw").serial == "berth-from-root");
  CHECK(t.plugged_when_asked.at("vdx").file == layout.diff_disk("from-data").string());
  CHECK(t.backing_when_asked.at("vdw") == layout.root_disk(first.gen).string());
  CHECK(t.backing_when_asked.at("vdx") == layout.data_disk(first.gen).string());
  // After: nothing plugged in, no overlay, the workspace runs on as it did.
  CHECK(t.f.hv.AttachedForTest(ws.DomainName()).empty());
  CHECK(t.NoScratchLeft(layout));
  CHECK(t.f.StateOf(ws.id) == State::kRunning);
  CHECK(t.f.hv.DiskSources(ws.DomainName())->size() == 2);
}

TEST_CASE("diff: between two checkpoints, both are plugged in, each on its own layers", "[service][checkpoints][diff]") {
  DiffFixture t;
  auto ws = t.Running("d2");
  auto first = t.Take(ws.id, "first");
  auto second = t.Take(ws.id, "second");
  Layout layout = t.LayoutOf(ws);

  auto diff = t.Diff(ws.id, "first", "second");
  INFO((diff ? "" : diff.error().message));
  REQUIRE(diff.has_value());
  CHECK(diff->from == first.id);
  CHECK(diff->to == second.id);
  REQUIRE(t.asked.size() == 1);
  REQUIRE(t.asked[0].to.has_value());
  CHECK(t.asked[0].to->root == "berth-to-root");
  CHECK(t.asked[0].to->data == "berth-to-data");
  REQUIRE(t.plugged_when_asked.size() == 4);
  CHECK(t.backing_when_asked.at("vdw") == layout.root_disk(first.gen).string());
  CHECK(t.backing_when_asked.at("vdy") == layout.root_disk(second.gen).string());
  CHECK(t.backing_when_asked.at("vdz") == layout.data_disk(second.gen).string());
  CHECK(t.f.hv.AttachedForTest(ws.DomainName()).empty());
  CHECK(t.NoScratchLeft(layout));
}

TEST_CASE("diff: an unknown checkpoint is 404 and a stopped workspace is not woken for it; 'current' is no start",
          "[service][checkpoints][diff]") {
  DiffFixture t;
  auto ws = t.Running("d3");
  t.Take(ws.id, "first");
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  int boots = t.f.hv.CallsForTest("Start");

  auto missing = t.Diff(ws.id, "nope");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::kNotFound);
  auto missing_to = t.Diff(ws.id, "first", "nope");
  REQUIRE_FALSE(missing_to.has_value());
  CHECK(missing_to.error().code == ErrorCode::kNotFound);
  auto backwards = t.Diff(ws.id, "current", "first");
  REQUIRE_FALSE(backwards.has_value());
  CHECK(backwards.error().code == ErrorCode::kInvalidArgument);
  CHECK(t.f.hv.CallsForTest("Start") == boots);
  CHECK(t.f.StateOf(ws.id) == State::kStopped);

  // A real one wakes it: the guest compares.
  auto diff = t.Diff(ws.id, "first");
  INFO((diff ? "" : diff.error().message));
  REQUIRE(diff.has_value());
  CHECK(t.f.StateOf(ws.id) == State::kRunning);
}

TEST_CASE("diff: a guest's answer that breaks the bounds is refused, and its disks are unplugged all the same",
          "[service][checkpoints][diff]") {
  DiffFixture t;
  t.answer = [] {
    nlohmann::json bad = {{"files", {{"added", {{{"path", "relative/path"}, {"type", "file"}}}}}}};
    return Result<nlohmann::json>(bad);
  };
  auto ws = t.Running("d4");
  t.Take(ws.id, "first");
  auto diff = t.Diff(ws.id, "first");
  REQUIRE_FALSE(diff.has_value());
  CHECK(diff.error().code == ErrorCode::kUnavailable);
  CHECK(diff.error().message.find("absolute") != std::string::npos);
  CHECK(t.f.hv.AttachedForTest(ws.DomainName()).empty());
  CHECK(t.NoScratchLeft(t.LayoutOf(ws)));

  // A guest that fails the call: the same.
  t.answer = [] { return Result<nlohmann::json>(Fail(ErrorCode::kUnavailable, "the agent answered 500")); };
  auto failed = t.Diff(ws.id, "first");
  REQUIRE_FALSE(failed.has_value());
  CHECK(t.f.hv.AttachedForTest(ws.DomainName()).empty());
  CHECK(t.NoScratchLeft(t.LayoutOf(ws)));
  CHECK(t.f.StateOf(ws.id) == State::kRunning);
}

TEST_CASE("diff: a guest that keeps a plugged disk is stopped, which unplugs it, and the overlays go",
          "[service][checkpoints][diff]") {
  DiffFixture t;
  auto ws = t.Running("d5");
  t.Take(ws.id, "first");
  t.f.hv.SetDetachWorksForTest(false);
  auto diff = t.Diff(ws.id, "first");
  // The answer stands (the guest did compare); the workspace does not run on with the disk.
  INFO((diff ? "" : diff.error().message));
  CHECK(diff.has_value());
  CHECK(t.f.StateOf(ws.id) == State::kStopped);
  CHECK(t.f.hv.AttachedForTest(ws.DomainName()).empty());
  CHECK(t.NoScratchLeft(t.LayoutOf(ws)));
}

TEST_CASE("diff: at start-up, disks a killed berthd left plugged in are unplugged and their overlays removed",
          "[service][checkpoints][diff]") {
  DiffFixture t;
  auto ws = t.Running("d6");
  auto first = t.Take(ws.id, "first");
  Layout layout = t.LayoutOf(ws);
  // What a berthd killed during the guest's call leaves: an overlay plugged into the running VM.
  REQUIRE(CreateOverlay(layout.root_disk(first.gen), layout.diff_disk("from-root")).has_value());
  hypervisor::DiskAttachment disk{.file = layout.diff_disk("from-root").string(), .target = "vdw",
                                  .serial = "berth-from-root", .pci_slot = 0x1c};
  REQUIRE(t.f.hv.AttachDisk(ws.DomainName(), disk).has_value());

  t.f.RestartService();
  CHECK(t.f.hv.AttachedForTest(ws.DomainName()).empty());
  CHECK(t.NoScratchLeft(layout));
  CHECK(t.f.Reaches(ws.id, State::kRunning));
  // The checkpoint is whole and diffs again.
  auto diff = t.Diff(ws.id, "first");
  INFO((diff ? "" : diff.error().message));
  CHECK(diff.has_value());
}

}  // namespace
}  // namespace berth::workspace
