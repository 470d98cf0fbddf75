// Checkpoints of a running workspace's disks against the fake hypervisor, on real qcow2 files
// (qemu-img): the VM moves onto new layers without stopping, the guest syncs first, a refused
// or ambiguous move leaves either no trace or a row the next start settles, and a berthd
// killed between the move and the commit finishes the checkpoint at its next start.
#include <filesystem>
#include <fstream>

#include "controller/workspace/disks.h"
#include "tests/unit/service_fixture.h"

namespace berth::workspace {
namespace {

// The fixture with real (small) qcow2 disks, so that checkpoints can make overlays on them, and
// a counting guest sync.
struct CheckpointFixture {
  std::atomic<int> syncs{0};
  std::atomic<bool> sync_fails{false};
  Fixture f{[this](ServiceOptions& o) {
    o.make_disks = [](const ImageVersion&, const Layout& layout, int) -> Status {
      for (const auto& path : {layout.root_disk(0), layout.data_disk(0)}) {
        if (auto s = RunCommand({"qemu-img", "create", "-q", "-f", "qcow2", path.string(), "16M"},
                                std::chrono::seconds(30));
            !s) {
          return s;
        }
      }
      return {};
    };
    o.sync_guest = [this](const agent_client::AgentLink&, std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      ++syncs;
      if (sync_fails) co_return Fail(ErrorCode::kUnavailable, "the agent answered 404 to POST /v1/sync");
      co_return nlohmann::json{{"synced", true}};
    };
  }};

  Layout LayoutOf(const Workspace& ws) const { return Layout(f.dir.path(), ws.id); }
  Result<store::Checkpoint> Take(const std::string& ws, const std::string& name, bool memory = false) {
    CheckpointRequest request;
    request.name = name;
    request.memory = memory;
    return f.runner.Sync(f.service->TakeCheckpoint(f.tenant, ws, request));
  }
  std::string RootNow(const Workspace& ws) {
    auto on = f.hv.DiskSources(ws.DomainName());
    REQUIRE(on.has_value());
    return on->at("vda");
  }
  Workspace Record(const std::string& id) {
    auto ws = f.store->GetWorkspaceById(id);
    REQUIRE(ws.has_value());
    return *ws;
  }
};

// The backing file a qcow2 layer names in its header (offset 8: its offset, 16: its length,
// big-endian).
std::string BackingOf(const fs::path& layer) {
  std::ifstream in(layer, std::ios::binary);
  unsigned char header[20] = {};
  in.read(reinterpret_cast<char*>(header), sizeof(header));
  uint64_t offset = 0;
  for (int i = 8; i < 16; ++i) offset = (offset << 8) | header[i];
  uint32_t size = 0;
  for (int i = 16; i < 20; ++i) size = (size << 8) | header[i];
  std::string name(size, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(name.data(), size);
  return name;
}

TEST_CASE("checkpoints: a running workspace's disks move onto new layers while it runs, after the guest synced",
          "[service][checkpoints]") {
  CheckpointFixture t;
  auto ws = t.f.Create("live");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  REQUIRE(t.RootNow(ws) == layout.root_disk(0).string());

  auto taken = t.Take(ws.id, "first");
  INFO((taken ? "" : taken.error().message));
  REQUIRE(taken.has_value());
  CHECK(taken->state == "ready");
  CHECK(taken->gen == 0);
  CHECK(taken->taken_while == "running");
  CHECK(t.syncs == 1);
  CHECK(t.f.hv.CallsForTest("SnapshotDisks") == 1);
  CHECK(t.f.hv.CallsForTest("Destroy") == 0);
  // The VM writes generation 1 now, on generation 0; the store says so and it never stopped.
  CHECK(t.RootNow(ws) == layout.root_disk(1).string());
  CHECK(t.f.hv.DiskSources(ws.DomainName())->at("vdb") == layout.data_disk(1).string());
  auto now = t.Record(ws.id);
  CHECK(now.state == State::kRunning);
  CHECK(now.disk_gen == 1);
  CHECK(now.disk_parent == taken->id);
  CHECK(BackingOf(layout.root_disk(1)) == layout.root_disk(0).string());
  CHECK(BackingOf(layout.data_disk(1)) == layout.data_disk(0).string());
  CHECK(t.f.HasEvent(ws.id, "checkpoint"));

  // A second one stacks on the first.
  auto second = t.Take(ws.id, "second");
  REQUIRE(second.has_value());
  CHECK(second->gen == 1);
  CHECK(second->parent == taken->id);
  CHECK(t.RootNow(ws) == layout.root_disk(2).string());
  auto listed = t.f.service->ListCheckpoints(t.f.tenant, ws.id);
  REQUIRE(listed.has_value());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].checkpoint.name == "second");
}

TEST_CASE("checkpoints: a guest that cannot sync is checkpointed as it is", "[service][checkpoints]") {
  CheckpointFixture t;
  t.sync_fails = true;
  auto ws = t.f.Create("old-agent");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  auto taken = t.Take(ws.id, "anyway");
  REQUIRE(taken.has_value());
  CHECK(t.syncs == 1);
  CHECK(t.RootNow(ws) == t.LayoutOf(ws).root_disk(1).string());
}

TEST_CASE("checkpoints: a move the hypervisor refuses leaves no checkpoint and no layer, and the VM runs on",
          "[service][checkpoints]") {
  CheckpointFixture t;
  auto ws = t.f.Create("refused");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  t.f.hv.FailNextForTest("SnapshotDisks", Error(ErrorCode::kInternal, "libvirt snapshot the disks: no space"));
  auto taken = t.Take(ws.id, "nope");
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().message.find("no space") != std::string::npos);
  CHECK(t.RootNow(ws) == layout.root_disk(0).string());
  CHECK_FALSE(fs::exists(layout.root_disk(1)));
  CHECK_FALSE(fs::exists(layout.data_disk(1)));
  CHECK(t.f.store->ListCheckpoints(ws.id)->empty());
  auto now = t.Record(ws.id);
  CHECK(now.state == State::kRunning);
  CHECK(now.disk_gen == 0);
  // And the next one works.
  REQUIRE(t.Take(ws.id, "nope").has_value());
}

TEST_CASE("checkpoints: a move that landed though the hypervisor answered an error is committed, not undone",
          "[service][checkpoints]") {
  CheckpointFixture t;
  auto ws = t.f.Create("ambiguous");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  t.f.hv.snapshot_lands_then_fails = true;
  auto taken = t.Take(ws.id, "landed");
  REQUIRE(taken.has_value());
  CHECK(t.RootNow(ws) == t.LayoutOf(ws).root_disk(1).string());
  CHECK(fs::exists(t.LayoutOf(ws).root_disk(1)));
  CHECK(t.Record(ws.id).disk_gen == 1);
}

TEST_CASE("checkpoints: hibernated or with memory is refused with what to do; stopped still works",
          "[service][checkpoints]") {
  CheckpointFixture t;
  auto ws = t.f.Create("sleepy");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  auto memory = t.Take(ws.id, "m", true);
  REQUIRE_FALSE(memory.has_value());
  CHECK(memory.error().code == ErrorCode::kFailedPrecondition);
  CHECK(memory.error().message.find("\"memory\": false") != std::string::npos);
  REQUIRE(t.f.Hibernate(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kHibernated));
  auto asleep = t.Take(ws.id, "h");
  REQUIRE_FALSE(asleep.has_value());
  CHECK(asleep.error().code == ErrorCode::kFailedPrecondition);
  CHECK(asleep.error().message.find("wake it") != std::string::npos);
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  auto stopped = t.Take(ws.id, "s");
  REQUIRE(stopped.has_value());
  CHECK(stopped->taken_while == "stopped");
  CHECK(t.syncs == 0);  // nothing runs to sync
  CHECK(t.f.hv.CallsForTest("SnapshotDisks") == 0);
}

TEST_CASE("checkpoints: berthd killed after the VM moved and before the commit finishes the checkpoint at its "
          "next start; killed before the move, drops it",
          "[service][checkpoints][crash]") {
  CheckpointFixture t;
  auto moved = t.f.Create("moved");
  auto kept = t.f.Create("kept");
  REQUIRE(t.f.Reaches(moved.id, State::kRunning));
  REQUIRE(t.f.Reaches(kept.id, State::kRunning));
  // What a checkpoint leaves at each point: the row "taking" and the new layers, and for
  // `moved` the hypervisor already on them.
  auto cut_short = [&](const Workspace& ws, const std::string& id, bool move) {
    store::Checkpoint c;
    c.id = id;
    c.tenant_id = ws.tenant_id;
    c.workspace_id = ws.id;
    c.name = id;
    c.gen = 0;
    c.taken_while = "running";
    c.created_at = t.f.now;
    REQUIRE(t.f.store->InsertCheckpoint(c).has_value());
    Layout layout = t.LayoutOf(ws);
    REQUIRE(CreateOverlay(layout.root_disk(0), layout.root_disk(1)).has_value());
    REQUIRE(CreateOverlay(layout.data_disk(0), layout.data_disk(1)).has_value());
    if (move) {
      hypervisor::DiskSnapshot snap{id, layout.root_disk(1).string(), layout.data_disk(1).string()};
      REQUIRE(t.f.hv.SnapshotDisks(ws.DomainName(), snap).has_value());
    }
  };
  cut_short(moved, "cp_moved", true);
  cut_short(kept, "cp_kept", false);
  t.f.RestartService();

  auto m = t.Record(moved.id);
  CHECK(m.disk_gen == 1);
  CHECK(m.disk_parent == "cp_moved");
  auto row = t.f.store->GetCheckpoint(moved.id, "cp_moved");
  REQUIRE(row.has_value());
  CHECK(row->state == "ready");
  CHECK(fs::exists(t.LayoutOf(moved).root_disk(1)));
  CHECK(fs::exists(t.LayoutOf(moved).root_disk(0)));
  CHECK(t.f.HasEvent(moved.id, "checkpoint"));

  auto k = t.Record(kept.id);
  CHECK(k.disk_gen == 0);
  CHECK_FALSE(t.f.store->GetCheckpoint(kept.id, "cp_kept").has_value());
  CHECK_FALSE(fs::exists(t.LayoutOf(kept).root_disk(1)));
  CHECK_FALSE(fs::exists(t.LayoutOf(kept).data_disk(1)));
  CHECK(fs::exists(t.LayoutOf(kept).root_disk(0)));
}

}  // namespace
}  // namespace berth::workspace
