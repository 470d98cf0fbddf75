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
    o.make_disks = MakeQcow2Disks;
    o.sync_guest = [this](const agent_client::AgentLink&, std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      ++syncs;
      if (sync_fails) co_return Fail(ErrorCode::kUnavailable, "the agent answered 404 to POST /v1/sync");
      co_return nlohmann::json{{"synced", true}};
    };
  }};
  // The image is a qcow2 file too: deleting the first checkpoint rebases onto it.
  CheckpointFixture() {
    f.MakeQcow2Image();
  }

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

// The backing file a qcow2 layer names ("" for none).
std::string BackingOf(const fs::path& layer) { return BackingFile(layer).value_or("<not qcow2>"); }

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
  CHECK(t.f.hv.CallsForTest("Snapshot") == 1);
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
  t.f.hv.FailNextForTest("Snapshot", Error(ErrorCode::kInternal, "libvirt snapshot the disks: no space"));
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

TEST_CASE("checkpoints: with memory while stopped is refused with what to do; of its disks it works",
          "[service][checkpoints]") {
  CheckpointFixture t;
  auto ws = t.f.Create("sleepy");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  auto memory = t.Take(ws.id, "m", true);
  REQUIRE_FALSE(memory.has_value());
  CHECK(memory.error().code == ErrorCode::kFailedPrecondition);
  CHECK(memory.error().message.find("no memory") != std::string::npos);
  CHECK(memory.error().message.find("\"memory\": false") != std::string::npos);
  auto stopped = t.Take(ws.id, "s");
  REQUIRE(stopped.has_value());
  CHECK(stopped->taken_while == "stopped");
  CHECK(t.syncs == 0);  // nothing runs to sync
  CHECK(t.f.hv.CallsForTest("Snapshot") == 0);
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("checkpoints: with memory, a running workspace's memory goes into the checkpoint with its agent token and "
          "the pause is recorded; the guest runs on without a sync",
          "[service][checkpoints][memory]") {
  CheckpointFixture t;
  auto ws = t.f.Create("mem");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  auto taken = t.Take(ws.id, "warm", true);
  INFO((taken ? "" : taken.error().message));
  REQUIRE(taken.has_value());
  CHECK(taken->memory);
  CHECK(taken->pause_ms == hypervisor::FakeHypervisor::kFakePauseMs);
  CHECK(t.syncs == 0);  // the page cache is in the memory
  CHECK(t.f.hv.CallsForTest("Destroy") == 0);
  CHECK(t.RootNow(ws) == layout.root_disk(1).string());
  CHECK(t.Record(ws.id).state == State::kRunning);
  // The memory matches the layer the VM left (the checkpoint's), and the token is this boot's.
  auto memory = ReadAll(layout.memory_file(taken->id));
  CHECK(memory.find(layout.root_disk(0).string()) != std::string::npos);
  CHECK(ReadAll(layout.checkpoint_token(taken->id)) == ReadAll(layout.token()));
  CHECK((fs::status(layout.checkpoint_dir(taken->id)).permissions() & fs::perms::all) == fs::perms::owner_all);
  auto row = t.f.store->GetCheckpoint(ws.id, "warm");
  REQUIRE(row.has_value());
  CHECK(row->state == "ready");
  CHECK(row->memory);
  CHECK(row->pause_ms == hypervisor::FakeHypervisor::kFakePauseMs);
  auto info = t.f.service->GetCheckpoint(t.f.tenant, ws.id, "warm");
  REQUIRE(info.has_value());
  CHECK(info->size_bytes >= static_cast<int64_t>(fs::file_size(layout.memory_file(taken->id))));
}

TEST_CASE("checkpoints: restoring one with memory onto a running workspace takes the running state (memory too) as "
          "the undo, then resumes the checkpoint's memory on new disks with its token; undoing resumes the undo's",
          "[service][checkpoints][memory]") {
  CheckpointFixture t;
  auto ws = t.f.Create("back");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  auto warm = t.Take(ws.id, "warm", true);
  REQUIRE(warm.has_value());
  std::string warm_token = ReadAll(layout.checkpoint_token(warm->id));
  // A new boot: a new token, which the checkpoint's guest never knew.
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  REQUIRE(t.f.Start(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  REQUIRE(ReadAll(layout.token()) != warm_token);
  std::string later_token = ReadAll(layout.token());
  int gen_before = static_cast<int>(t.Record(ws.id).disk_gen);

  auto restored = t.f.runner.Sync(t.f.service->RestoreCheckpoint(t.f.tenant, ws.id, "warm", true));
  INFO((restored ? "" : restored.error().message));
  REQUIRE(restored.has_value());
  REQUIRE(restored->undo.has_value());
  CHECK(restored->undo->memory);
  CHECK(restored->undo->kind == "before_restore");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  auto now = t.Record(ws.id);
  CHECK(now.disk_parent == warm->id);
  CHECK_FALSE(now.resume_memory.has_value());
  // Resumed, not booted: from the checkpoint's memory, which matches its layer, on a new top
  // over that layer; with the checkpoint's token.
  auto resumed = t.f.hv.RestoredForTest(ws.DomainName());
  REQUIRE(resumed.has_value());
  CHECK(resumed->first == layout.memory_file(warm->id).string());
  CHECK(resumed->second == layout.root_disk(warm->gen).string());
  CHECK(t.RootNow(ws) == layout.root_disk(now.disk_gen).string());
  CHECK(now.disk_gen > gen_before);
  CHECK(BackingOf(layout.root_disk(now.disk_gen)) == layout.root_disk(warm->gen).string());
  CHECK(ReadAll(layout.token()) == warm_token);
  CHECK(t.f.HasEvent(ws.id, "restored"));
  // The undo holds the state it left: its memory (with the later boot's token) on its layer.
  CHECK(ReadAll(layout.checkpoint_token(restored->undo->id)) == later_token);

  auto undone = t.f.runner.Sync(t.f.service->RestoreCheckpoint(t.f.tenant, ws.id, restored->undo->id, false));
  REQUIRE(undone.has_value());
  CHECK_FALSE(undone->undo.has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  resumed = t.f.hv.RestoredForTest(ws.DomainName());
  REQUIRE(resumed.has_value());
  CHECK(resumed->first == layout.memory_file(restored->undo->id).string());
  CHECK(ReadAll(layout.token()) == later_token);
}

TEST_CASE("checkpoints: restoring one with memory onto a stopped workspace runs it; a memory the hypervisor refuses "
          "boots the checkpoint's disks instead and says so",
          "[service][checkpoints][memory]") {
  CheckpointFixture t;
  auto ws = t.f.Create("stopped-mem");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  auto warm = t.Take(ws.id, "warm", true);
  REQUIRE(warm.has_value());
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));

  auto restored = t.f.runner.Sync(t.f.service->RestoreCheckpoint(t.f.tenant, ws.id, "warm", true));
  REQUIRE(restored.has_value());
  REQUIRE(restored->undo.has_value());
  CHECK_FALSE(restored->undo->memory);  // a stopped workspace has only its disks
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  CHECK(t.f.hv.CallsForTest("RestoreMemory") == 1);
  CHECK(t.f.hv.CallsForTest("Start") == 1);  // the create's boot only: the restore resumed
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));

  t.f.hv.FailNextForTest("RestoreMemory",
                         Error(ErrorCode::kFailedPrecondition, "Target domain uuid 1 does not match source 2"));
  auto again = t.f.runner.Sync(t.f.service->RestoreCheckpoint(t.f.tenant, ws.id, "warm", false));
  REQUIRE(again.has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  CHECK(t.f.hv.CallsForTest("RestoreMemory") == 2);
  CHECK(t.f.hv.CallsForTest("Start") == 2);  // booted from the disks
  auto now = t.Record(ws.id);
  CHECK_FALSE(now.resume_memory.has_value());
  CHECK(now.disk_parent == warm->id);
  auto events = t.f.store->ListEvents(ws.id, 0, 1000);
  REQUIRE(events.has_value());
  bool said = std::any_of(events->begin(), events->end(), [](const store::Event& e) {
    return e.type == "error" && e.message.find("booting from its disks") != std::string::npos &&
           e.message.find("does not match") != std::string::npos;
  });
  CHECK(said);
  // The checkpoint is unchanged by the failed resume: its memory is still there.
  CHECK(fs::exists(layout.memory_file(warm->id)));
}

TEST_CASE("checkpoints: of a hibernated workspace, its save is copied as the memory and then resumes onto the new "
          "tops; restoring that checkpoint later resumes the copy",
          "[service][checkpoints][memory]") {
  CheckpointFixture t;
  auto ws = t.f.Create("asleep");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  REQUIRE(t.f.Hibernate(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kHibernated));
  auto disk = t.Take(ws.id, "disk-only");
  INFO((disk ? "" : disk.error().message));
  REQUIRE(disk.has_value());
  CHECK(disk->taken_while == "hibernated");
  CHECK_FALSE(disk->memory);
  auto mem = t.Take(ws.id, "asleep-mem", true);
  REQUIRE(mem.has_value());
  CHECK(mem->memory);
  CHECK(mem->pause_ms == 0);
  CHECK(mem->gen == 1);
  CHECK(t.f.hv.CallsForTest("CopySave") == 1);
  CHECK(t.f.hv.CallsForTest("RedefineSave") == 2);
  // The copy is the save as it was, on the layer the checkpoint keeps; the save itself now
  // resumes onto generation 2, and the workspace never woke.
  CHECK(ReadAll(layout.memory_file(mem->id)).find(layout.root_disk(1).string()) != std::string::npos);
  CHECK(t.RootNow(ws) == layout.root_disk(2).string());
  auto now = t.Record(ws.id);
  CHECK(now.state == State::kHibernated);
  CHECK(now.disk_gen == 2);
  CHECK((fs::status(layout.root_disk(1)).permissions() & fs::perms::owner_write) == fs::perms::none);

  REQUIRE(t.f.Start(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  CHECK(t.RootNow(ws) == layout.root_disk(2).string());
  CHECK_FALSE(t.f.hv.RestoredForTest(ws.DomainName()).has_value());  // resumed from its save

  auto restored = t.f.runner.Sync(t.f.service->RestoreCheckpoint(t.f.tenant, ws.id, "asleep-mem", false));
  REQUIRE(restored.has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  auto resumed = t.f.hv.RestoredForTest(ws.DomainName());
  REQUIRE(resumed.has_value());
  CHECK(resumed->first == layout.memory_file(mem->id).string());
  CHECK(resumed->second == layout.root_disk(1).string());
}

TEST_CASE("checkpoints: a hibernated workspace's save that cannot be repointed leaves no checkpoint, and it still "
          "resumes", "[service][checkpoints][memory]") {
  CheckpointFixture t;
  auto ws = t.f.Create("stuck");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  REQUIRE(t.f.Hibernate(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kHibernated));
  t.f.hv.FailNextForTest("RedefineSave", Error(ErrorCode::kInternal, "ABI check failed"));
  auto taken = t.Take(ws.id, "nope", true);
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().message.find("ABI") != std::string::npos);
  CHECK(t.f.store->ListCheckpoints(ws.id)->empty());
  CHECK_FALSE(fs::exists(layout.root_disk(1)));
  CHECK_FALSE((fs::exists(layout.checkpoints_dir()) && !fs::is_empty(layout.checkpoints_dir())));
  CHECK(t.RootNow(ws) == layout.root_disk(0).string());
  REQUIRE(t.f.Start(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
}

TEST_CASE("checkpoints: berthd's start waits for the hypervisor's jobs before deciding a checkpoint cut short: one "
          "that lands meanwhile is finished, its layers kept",
          "[service][checkpoints][crash]") {
  CheckpointFixture t;
  auto ws = t.f.Create("late");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  store::Checkpoint c;
  c.id = "cp_late";
  c.tenant_id = ws.tenant_id;
  c.workspace_id = ws.id;
  c.name = c.id;
  c.memory = true;
  c.taken_while = "running";
  c.created_at = t.f.now;
  REQUIRE(t.f.store->InsertCheckpoint(c).has_value());
  REQUIRE(CreateOverlay(layout.root_disk(0), layout.root_disk(1)).has_value());
  REQUIRE(CreateOverlay(layout.data_disk(0), layout.data_disk(1)).has_value());
  fs::create_directories(layout.checkpoint_dir(c.id));
  // libvirtd is still writing the memory when the new berthd starts; it switches the disks
  // while that berthd waits for it.
  t.f.hv.on_settle = [&] {
    hypervisor::SnapshotSpec snap;
    snap.name = c.id;
    snap.root_disk = layout.root_disk(1).string();
    snap.data_disk = layout.data_disk(1).string();
    snap.memory_file = layout.memory_file(c.id).string();
    REQUIRE(t.f.hv.FakeHypervisor::Snapshot(ws.DomainName(), snap).has_value());
  };
  t.f.RestartService();
  CHECK(t.f.hv.CallsForTest("Snapshot") == 1);
  auto row = t.f.store->GetCheckpoint(ws.id, c.id);
  REQUIRE(row.has_value());
  CHECK(row->state == "ready");
  CHECK(t.Record(ws.id).disk_gen == 1);
  CHECK(fs::exists(layout.root_disk(1)));
  CHECK(fs::exists(layout.memory_file(c.id)));
}

TEST_CASE("checkpoints: a restored memory not yet resumed survives berthd's restart, resumes at the next start, and "
          "keeps its checkpoint from being deleted; strays of checkpoints cut short are removed",
          "[service][checkpoints][memory][crash]") {
  CheckpointFixture t;
  auto ws = t.f.Create("pending");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  Layout layout = t.LayoutOf(ws);
  auto warm = t.Take(ws.id, "warm", true);
  REQUIRE(warm.has_value());
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  // What a restore's commit leaves when berthd dies before the workspace starts: the record on
  // new disks over the checkpoint's layers, with its memory to resume. And a checkpoint cut
  // short while it wrote its memory.
  auto record = t.Record(ws.id);
  int64_t next = record.disk_gen + 1;
  REQUIRE(CreateOverlay(layout.root_disk(warm->gen), layout.root_disk(next)).has_value());
  REQUIRE(CreateOverlay(layout.data_disk(warm->gen), layout.data_disk(next)).has_value());
  record.disk_gen = next;
  record.disk_parent = warm->id;
  record.resume_memory = warm->id;
  store::NewEvent line{t.f.now, "restored", "restored", nlohmann::json::object(), ""};
  REQUIRE(t.f.store->CommitDisks(record, {}, line).has_value());
  fs::create_directories(layout.checkpoint_dir("cp_cutshort"));
  std::ofstream(layout.memory_file("cp_cutshort")) << "half";
  t.f.RestartService();

  CHECK_FALSE(fs::exists(layout.checkpoint_dir("cp_cutshort")));
  CHECK(fs::exists(layout.memory_file(warm->id)));
  auto kept = t.Record(ws.id);
  CHECK(kept.state == State::kStopped);
  CHECK(kept.resume_memory == warm->id);
  auto refused = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, ws.id, "warm"));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
  CHECK(refused.error().message.find("resumes the memory") != std::string::npos);

  REQUIRE(t.f.Start(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  auto resumed = t.f.hv.RestoredForTest(ws.DomainName());
  REQUIRE(resumed.has_value());
  CHECK(resumed->first == layout.memory_file(warm->id).string());
  CHECK(t.RootNow(ws) == layout.root_disk(next).string());
  CHECK_FALSE(t.Record(ws.id).resume_memory.has_value());
  // Now it can go, memory and all (its layers stay under the running disks until a stop).
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  auto deleted = t.f.runner.Sync(t.f.service->DeleteCheckpoint(t.f.tenant, ws.id, "warm"));
  INFO((deleted ? "" : deleted.error().message));
  REQUIRE(deleted.has_value());
  CHECK_FALSE(fs::exists(layout.checkpoint_dir(warm->id)));
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
      hypervisor::SnapshotSpec snap{id, layout.root_disk(1).string(), layout.data_disk(1).string()};
      REQUIRE(t.f.hv.Snapshot(ws.DomainName(), snap).has_value());
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

namespace berth::workspace {
namespace {

TEST_CASE("checkpoints: a delete killed after its first rebase is finished at berthd's start, not left half done",
          "[service][checkpoints][crash]") {
  CheckpointFixture t;
  auto ws = t.f.Create("halfdeleted");
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  Layout layout = t.LayoutOf(ws);
  auto first = t.Take(ws.id, "first");
  auto second = t.Take(ws.id, "second");
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  REQUIRE(second->parent == first->id);
  // What the delete of "first" leaves when berthd is killed between its rebases: the root layer
  // of "second" already stands on the image, its data layer still on first's.
  auto image = t.f.dir.path() / "images/base/v1/disk.qcow2";
  fs::permissions(layout.root_disk(second->gen), fs::perms::owner_write, fs::perm_options::add);
  REQUIRE(RunCommand({"qemu-img", "rebase", "-q", "-f", "qcow2", "-F", "qcow2", "-b", image.string(),
                      layout.root_disk(second->gen).string()},
                     std::chrono::seconds(60))
              .has_value());
  REQUIRE(BackingOf(layout.data_disk(second->gen)) == layout.data_disk(first->gen).string());
  t.f.RestartService();

  // Finished: the row is gone, "second" stands on nothing of it, its layers are gone.
  auto rows = t.f.store->ListCheckpoints(ws.id);
  REQUIRE(rows.has_value());
  REQUIRE(rows->size() == 1);
  CHECK(rows->front().id == second->id);
  CHECK_FALSE(rows->front().parent.has_value());
  CHECK(BackingOf(layout.root_disk(second->gen)) == image.string());
  CHECK(BackingOf(layout.data_disk(second->gen)).empty());
  CHECK_FALSE(fs::exists(layout.root_disk(first->gen)));
  CHECK_FALSE(fs::exists(layout.data_disk(first->gen)));
  auto events = t.f.store->ListEvents(ws.id, 0, 100);
  REQUIRE(events.has_value());
  CHECK(std::any_of(events->begin(), events->end(), [](const auto& e) {
    return e.type == "checkpoint_deleted" && e.message.find("finished at berthd's start") != std::string::npos;
  }));
  // The workspace starts on its disks, and a restart with nothing cut short changes nothing.
  t.f.RestartService();
  CHECK(t.f.store->ListCheckpoints(ws.id)->size() == 1);
  REQUIRE(t.f.Start(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
}

// The rolling checkpoints a workspace has, oldest first.
std::vector<std::string> Rolling(CheckpointFixture& t, const std::string& ws) {
  auto rows = t.f.store->ListCheckpoints(ws);
  REQUIRE(rows.has_value());
  std::vector<store::Checkpoint> rolling;
  for (const auto& c : *rows) {
    if (c.kind == "rolling" && c.state == "ready") rolling.push_back(c);
  }
  std::sort(rolling.begin(), rolling.end(),
            [](const auto& x, const auto& y) { return std::tie(x.created_at, x.id) < std::tie(y.created_at, y.id); });
  std::vector<std::string> out;
  for (const auto& c : rolling) out.push_back(c.name);
  return out;
}

TEST_CASE("checkpoints: rolling ones are taken every `every` seconds of an active running workspace, not while it "
          "is idle, and pruned to the newest `keep` once it stops (a running VM has their layers open)",
          "[service][checkpoints][rolling]") {
  CheckpointFixture t;
  auto ws = t.f.Create("rolling", [](CreateRequest& r) {
    r.checkpoints = CheckpointPolicy{60, 2};
    r.idle_timeout_s = 100000;
  });
  REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  CHECK(t.Record(ws.id).checkpoints == CheckpointPolicy{60, 2});
  auto busy = [&t] {
    std::lock_guard lock(t.f.activity_mutex);
    t.f.activity = {{"running_processes", 1}};
  };
  auto quiet = [&t] {
    std::lock_guard lock(t.f.activity_mutex);
    t.f.activity = nlohmann::json::object();
  };
  auto tick = [&t, &ws](int64_t seconds) {
    t.f.now += seconds;
    t.f.service->IdleTickForTest();
    t.f.service->WaitIdleForTest();
    REQUIRE(t.f.Reaches(ws.id, State::kRunning));
  };

  busy();
  tick(30);
  CHECK(Rolling(t, ws.id).empty());  // not a period yet
  tick(31);
  REQUIRE(testing::WaitFor([&] { return Rolling(t, ws.id).size() == 1; }));
  CHECK(Rolling(t, ws.id)[0] == fmt::format("auto-{}", t.f.now.load()));
  // Idle since: no new layer, however long.
  quiet();
  tick(600);
  tick(600);
  CHECK(Rolling(t, ws.id).size() == 1);
  busy();
  for (int i = 0; i < 3; ++i) {
    tick(61);
    REQUIRE(testing::WaitFor([&] { return Rolling(t, ws.id).size() == static_cast<size_t>(2 + i); }));
  }
  // Four now, all under the running VM's disks: none can go yet.
  auto before = Rolling(t, ws.id);
  REQUIRE(before.size() == 4);
  REQUIRE(t.f.Stop(ws.id).has_value());
  REQUIRE(t.f.Reaches(ws.id, State::kStopped));
  REQUIRE(testing::WaitFor([&] { return Rolling(t, ws.id).size() == 2; }));
  CHECK(Rolling(t, ws.id) == std::vector<std::string>{before[2], before[3]});
  auto events = t.f.Events(ws.id);
  CHECK(std::count(events.begin(), events.end(), "checkpoint_deleted") == 2);

  // PATCH turns it off; the ones there are stay.
  REQUIRE(t.f.Patch(ws.id, {{"checkpoints", nullptr}}).has_value());
  CHECK_FALSE(t.Record(ws.id).checkpoints.has_value());
}

TEST_CASE("checkpoints: a rolling policy is checked: every at least a minute, keep 1 to 100, nothing else",
          "[service][checkpoints][rolling]") {
  auto bad = [](nlohmann::json policy) {
    auto r = ParseCreateRequest({{"name", "x"}, {"checkpoints", policy}});
    REQUIRE_FALSE(r.has_value());
    return r.error().message;
  };
  CHECK(bad({{"every", 59}}) == "'checkpoints.every' must be between 60 and 31536000");
  CHECK(bad({{"every", 3600}, {"keep", 0}}) == "'checkpoints.keep' must be between 1 and 100");
  CHECK(bad({{"keep", 3}}) == "'checkpoints.every' is required (seconds)");
  CHECK(bad({{"every", 3600}, {"memory", true}}) == "unknown field 'checkpoints.memory'");
  CHECK(bad("hourly").find("must be {") != std::string::npos);
  auto ok = ParseCreateRequest({{"name", "x"}, {"checkpoints", {{"every", 3600}}}});
  REQUIRE(ok.has_value());
  CHECK(ok->checkpoints == CheckpointPolicy{3600, 24});
}

}  // namespace
}  // namespace berth::workspace
