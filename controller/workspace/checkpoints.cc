// Checkpoints of a workspace's disks: take, list, restore (with undo) and delete, on the qcow2
// chains the workspace already runs on (docs/architecture.md, "Checkpoints").
//
// A workspace's two disks are chains of layers, one per generation (layout.h). Its record names
// the top (`disk_gen`) and the checkpoint under it (`disk_parent`); a checkpoint owns the frozen
// layers of its own generation, on its parent's. Generations only grow: the next one is always
// `disk_gen + 1`, so no two layers ever share a name and no file is renamed under a QEMU.
//
// Crash safety, one rule: the files are made first and the store's transaction (CommitDisks)
// is the commit point; at start-up ReconcileDisks makes the files agree with the store. So a
// berthd killed at any step leaves every checkpoint whole or gone and the workspace on either
// its old or its new disks, never a mix.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "controller/workspace/disks.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

// qemu-img rebase copies what the layer being dropped holds into each layer above it: bounded
// by the disk's size, so minutes at worst.
constexpr std::chrono::seconds kRebaseTimeout{3600};

// The two top layers of generation `gen`, overlays on `root_backing` and `data_backing` (the
// data disk of generation 0 has none: it is made blank at create). Made under temporary names
// and renamed, so a layer with its final name is whole; anything already there is not yet any
// record's (generations above disk_gen are never committed) and is replaced.
Status MakeLayers(const Layout& layout, int64_t gen, const fs::path& root_backing, const fs::path& data_backing) {
  for (const auto& [backing, path] : {std::pair{root_backing, layout.root_disk(gen)},
                                      std::pair{data_backing, layout.data_disk(gen)}}) {
    fs::path tmp = path;
    tmp += ".tmp";
    std::error_code ec;
    fs::remove(tmp, ec);
    fs::remove(path, ec);
    if (auto s = CreateOverlay(backing, tmp); !s) return s;
    fs::rename(tmp, path, ec);
    if (ec) return Fail(ErrnoError(ec.value(), "rename " + tmp.string()));
  }
  return {};
}

void RemoveLayers(const Layout& layout, int64_t gen) {
  std::error_code ec;
  for (const auto& path : {layout.root_disk(gen), layout.data_disk(gen)}) {
    fs::path tmp = path;
    tmp += ".tmp";
    fs::remove(path, ec);
    fs::remove(tmp, ec);
  }
}

// A checkpoint's layers are never written again: read-only for everyone (the transport gives a
// VM's QEMU read access to them through the group, transport.cc).
void FreezeLayers(const Layout& layout, int64_t gen) {
  for (const auto& path : {layout.root_disk(gen), layout.data_disk(gen)}) {
    if (::chmod(path.c_str(), 0440) != 0 && errno != ENOENT) {
      spdlog::warn("checkpoint layer {}: chmod: {}", path.string(), std::strerror(errno));
    }
  }
}

int64_t AllocatedBytes(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_blocks) * 512;
}

// What a checkpoint takes on the host: its two frozen layers, and its memory.
int64_t SizeOf(const Layout& layout, const store::Checkpoint& c) {
  int64_t size = AllocatedBytes(layout.root_disk(c.gen)) + AllocatedBytes(layout.data_disk(c.gen));
  if (c.memory) size += AllocatedBytes(layout.memory_file(c.id));
  return size;
}

// A checkpoint with memory keeps the agent token of the boot it is taken in (the guest's agent
// holds it): copied before the memory is taken, into the checkpoint's directory (root's, 0700),
// which the memory file joins.
Status MakeMemoryDir(const Layout& layout, const std::string& id) {
  std::error_code ec;
  fs::create_directories(layout.checkpoint_dir(id), ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + layout.checkpoint_dir(id).string()));
  fs::permissions(layout.checkpoints_dir(), fs::perms::owner_all, ec);
  fs::permissions(layout.checkpoint_dir(id), fs::perms::owner_all, ec);
  fs::remove(layout.memory_file(id), ec);
  fs::copy_file(layout.token(), layout.checkpoint_token(id), fs::copy_options::overwrite_existing, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "copy the agent token into checkpoint " + id));
  fs::permissions(layout.checkpoint_token(id), fs::perms::owner_read | fs::perms::owner_write, ec);
  return {};
}

void RemoveMemoryDir(const Layout& layout, const std::string& id) {
  std::error_code ec;
  fs::remove_all(layout.checkpoint_dir(id), ec);
}

// Points `layer` at `backing` (none: the layer becomes whole) and copies into it what the
// layer it leaves held, so what it reads is unchanged (qemu-img rebase's safe mode; cut short,
// the layer still reads the same through either backing file). A frozen layer is made
// writable for the rebase and frozen again.
Status Rebase(const fs::path& layer, const std::optional<fs::path>& backing, bool frozen) {
  if (frozen && ::chmod(layer.c_str(), 0640) != 0) return Fail(ErrnoError(errno, "chmod " + layer.string()));
  std::vector<std::string> argv = {"qemu-img", "rebase", "-q", "-f", "qcow2"};
  if (backing) {
    argv.insert(argv.end(), {"-F", "qcow2", "-b", backing->string()});
  } else {
    argv.insert(argv.end(), {"-b", ""});
  }
  argv.push_back(layer.string());
  auto status = RunCommand(argv, kRebaseTimeout);
  if (frozen) ::chmod(layer.c_str(), 0440);
  return status;
}

// What deleting checkpoint `gone` does to the layers: the ones above it (its children's,
// frozen, and the top's when it stands on it) are rebased onto what it stood on (its parent's
// layers, or the image and nothing), and the rows change with them.
struct Unlink {
  std::vector<std::pair<int64_t, bool>> above;  // (generation, frozen)
  std::optional<fs::path> root_backing;
  std::optional<fs::path> data_backing;
  store::DiskChange change;
};

Unlink PlanUnlink(const Workspace& ws, const store::Checkpoint& gone, const std::vector<store::Checkpoint>& rows,
                  const Layout& layout, const DiskBase& image_disk) {
  Unlink plan;
  auto parent = std::find_if(rows.begin(), rows.end(), [&](const store::Checkpoint& c) { return gone.parent == c.id; });
  if (gone.parent && parent != rows.end()) {
    plan.root_backing = layout.root_disk(parent->gen);
    plan.data_backing = layout.data_disk(parent->gen);
  } else if (!image_disk.data.empty()) {
    plan.root_backing = image_disk.root;  // a fork's first layers: its source's checkpoint
    plan.data_backing = image_disk.data;
  } else {
    plan.root_backing = image_disk.root;  // the data disk's first layer stands on nothing
  }
  for (const auto& c : rows) {
    if (c.parent == gone.id && c.state == "ready") {
      plan.above.emplace_back(c.gen, true);
      plan.change.reparent.emplace_back(c.id, gone.parent);
    }
  }
  if (ws.disk_parent == gone.id) plan.above.emplace_back(ws.disk_gen, false);
  plan.change.removed.push_back(gone.id);
  return plan;
}

Status RebaseAbove(const Layout& layout, const Unlink& plan) {
  for (const auto& [gen, frozen] : plan.above) {
    if (auto s = Rebase(layout.root_disk(gen), plan.root_backing, frozen); !s) return s;
    if (auto s = Rebase(layout.data_disk(gen), plan.data_backing, frozen); !s) return s;
  }
  return {};
}

// Whether a delete of the checkpoint `plan` is for was cut short after it rebased a layer: one
// of the layers above already stands on what the plan puts them on. (Before the rebase each
// stands on the checkpoint's own layer; a rebase cut short leaves the layer on its old backing.)
bool UnlinkStarted(const Layout& layout, const Unlink& plan) {
  for (const auto& [gen, frozen] : plan.above) {
    for (const auto& [layer, backing] : {std::pair{layout.root_disk(gen), plan.root_backing},
                                         std::pair{layout.data_disk(gen), plan.data_backing}}) {
      auto now = BackingFile(layer);
      if (now && *now == (backing ? backing->string() : std::string())) return true;
    }
  }
  return false;
}

// A row that never became a checkpoint; a failure leaves it to the next start-up's
// ReconcileDisks, which drops every row still "taking".
void DropRow(store::Store& store, const std::string& id) {
  if (auto s = store.DeleteCheckpoint(id); !s) {
    spdlog::warn("checkpoint {}: dropping its row: {}", id, s.error().message);
  }
}

std::string Describe(const store::Checkpoint& c) {
  return c.name == c.id ? c.id : fmt::format("'{}' ({})", c.name, c.id);
}

nlohmann::json EventData(const store::Checkpoint& c) {
  nlohmann::json data = {{"checkpoint", c.id}, {"name", c.name}, {"kind", c.kind}, {"memory", c.memory}};
  if (c.pause_ms) data["pause_ms"] = *c.pause_ms;
  return data;
}

// What taking checkpoint `c` of `ws` commits: the record on the generation above it, the row
// ready, and the event's data.
struct Taken {
  Workspace ws;
  store::DiskChange change;
  nlohmann::json data;
};
Taken TakenOf(Workspace ws, const store::Checkpoint& c, int64_t now) {
  ws.disk_gen = c.gen + 1;
  ws.disk_parent = c.id;
  ws.updated_at = now;
  Taken t{std::move(ws), {}, EventData(c)};
  t.change.ready.push_back(c.id);
  if (c.pause_ms) t.change.paused_ms.emplace_back(c.id, *c.pause_ms);
  t.data["taken_while"] = c.taken_while;
  return t;
}

}  // namespace

// --- the API's calls --------------------------------------------------------------------------

Task<Result<store::Checkpoint>> WorkspaceService::TakeCheckpoint(std::string tenant_id, std::string id_or_name,
                                                                 CheckpointRequest request, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  if (!request.name.empty()) {
    if (auto s = ValidateName(request.name); !s) co_return Fail(s.error());
  }
  auto check = [a, memory = request.memory]() -> Status { return CheckpointableNow(a->record(), memory); };
  auto op = [this, a, request = std::move(request), by = std::move(by)]() { return CheckpointOp(a, request, by); };
  co_return co_await Queued<store::Checkpoint>(a, std::move(check), std::move(op));
}

Result<std::vector<CheckpointInfo>> WorkspaceService::ListCheckpoints(const std::string& tenant_id,
                                                                      const std::string& id_or_name) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) return Fail(found.error());
  auto rows = store_.ListCheckpoints((*found)->id());
  if (!rows) return Fail(rows.error());
  Layout layout = LayoutFor((*found)->id());
  std::vector<CheckpointInfo> out;
  for (auto& c : *rows) {
    if (c.state != "ready") continue;
    int64_t size = SizeOf(layout, c);
    out.push_back(CheckpointInfo{std::move(c), size});
  }
  return out;
}

Result<CheckpointInfo> WorkspaceService::GetCheckpoint(const std::string& tenant_id, const std::string& id_or_name,
                                                       const std::string& checkpoint) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) return Fail(found.error());
  auto row = store_.GetCheckpoint((*found)->id(), checkpoint);
  if (!row) return Fail(row.error());
  if (row->state != "ready") {
    return Fail(ErrorCode::kNotFound, fmt::format("checkpoint '{}' is still being taken", checkpoint));
  }
  Layout layout = LayoutFor((*found)->id());
  int64_t size = SizeOf(layout, *row);
  return CheckpointInfo{std::move(*row), size};
}

Task<Result<RestoreResult>> WorkspaceService::RestoreCheckpoint(std::string tenant_id, std::string id_or_name,
                                                                 std::string checkpoint, bool undo, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  // Which kind it is decides how a running workspace gets there (the op reads the row again).
  auto read = [this, id = a->id(), checkpoint] { return store_.GetCheckpoint(id, checkpoint); };
  auto target = co_await Blocking(std::move(read));
  if (!target) co_return Fail(target.error());
  const bool memory = target->memory;
  // A running workspace restored to disks only is stopped, restored and started again (a disk
  // checkpoint has no processes to resume): the stop is decided now, as a restart's is, its
  // size admitted again for the start that follows. Restored to a checkpoint with memory, it is
  // checkpointed with its own memory first (the undo), while it runs, and then pulled.
  auto mode = std::make_shared<RestoreFrom>(RestoreFrom::kStopped);
  auto check = [this, a, mode, by, memory]() -> Status {
    const Workspace& ws = a->record();
    if (ws.state == State::kStopped) return {};
    if (ws.state != State::kRunning) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("cannot restore workspace '{}' while it is {}: start or stop it first", ws.name,
                              StateName(ws.state)));
    }
    if (memory) {
      *mode = RestoreFrom::kRunningMemory;
      return {};
    }
    a->event_actor = store::KeyActor(by);
    auto transition = [&] { return Transition(*a, State::kStopping, "stopping", "to restore a checkpoint"); };
    auto admitted = AdmitStart(*a, transition);
    a->event_actor = std::string(store::kSystemActor);
    if (!admitted) return admitted;
    *mode = RestoreFrom::kRunning;
    return {};
  };
  auto op = [this, a, checkpoint = std::move(checkpoint), undo, by = std::move(by), mode]() {
    return RestoreOp(a, checkpoint, undo, by, *mode);
  };
  co_return co_await Queued<RestoreResult>(a, std::move(check), std::move(op));
}

Task<Result<store::Checkpoint>> WorkspaceService::DeleteCheckpoint(std::string tenant_id, std::string id_or_name,
                                                                   std::string checkpoint, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto check = []() -> Status { return {}; };
  auto op = [this, a, checkpoint = std::move(checkpoint), by = std::move(by)]() {
    return DeleteCheckpointOp(a, checkpoint, by);
  };
  co_return co_await Queued<store::Checkpoint>(a, std::move(check), std::move(op));
}

// --- the operations (on the actor's strand, one at a time with its others) ----------------------

Status WorkspaceService::CheckpointableNow(const Workspace& ws, bool memory) {
  if (memory && ws.state == State::kStopped) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("workspace '{}' is stopped: it has no memory to checkpoint; take a checkpoint of its "
                            "disks (\"memory\": false), or start it first",
                            ws.name));
  }
  if (ws.state == State::kStopped || ws.state == State::kRunning || ws.state == State::kHibernated) return {};
  return Fail(ErrorCode::kFailedPrecondition,
              fmt::format("cannot checkpoint workspace '{}' while it is {}: wait until it is running, stopped or hibernated",
                          ws.name, StateName(ws.state)));
}

Task<Result<hypervisor::SnapshotTaken>> WorkspaceService::MoveRunningDisks(ActorPtr a, std::string checkpoint,
                                                                           Layout layout, int64_t next,
                                                                           std::string memory_file) {
  Workspace ws = a->record();
  // What the guest's programs wrote and did not fsync is in its page cache: without its memory,
  // the agent writes it out first. A guest that cannot (an agent older than the call, a hung
  // disk) is checkpointed as it is: what a power cut would leave, which its journal recovers.
  // With its memory, the page cache is in the checkpoint and the disks match it as they are.
  if (auto link = ReadLink(ws); link && memory_file.empty()) {
    auto synced = co_await AskAgent(options_.sync_guest, *link, options_.sync_deadline);
    if (!synced) {
      spdlog::warn("workspace {}: the guest did not sync before checkpoint {}: {}", ws.id, checkpoint,
                   synced.error().message);
    }
  }
  // (Member by member: g++ 12 destroys the temporaries of an aggregate's braces twice in a
  // coroutine.)
  hypervisor::SnapshotSpec snapshot;
  snapshot.name = checkpoint;
  snapshot.root_disk = layout.root_disk(next).string();
  snapshot.data_disk = layout.data_disk(next).string();
  snapshot.memory_file = std::move(memory_file);
  auto move = [this, name = ws.DomainName(), snapshot] { return hypervisor_.Snapshot(name, snapshot); };
  co_return co_await Blocking(std::move(move));
}

Task<Result<store::Checkpoint>> WorkspaceService::CheckpointOp(ActorPtr a, CheckpointRequest request, std::string by) {
  Workspace ws = a->record();
  // Queued behind other operations: the state is asked again now that it runs.
  if (auto s = CheckpointableNow(ws, request.memory); !s) co_return Fail(s.error());
  const bool running = ws.state == State::kRunning;
  // A hibernated one's memory is its managed save, copied; the save then resumes onto the new
  // tops.
  const bool hibernated = ws.state == State::kHibernated;
  const bool memory = request.memory;
  store::Checkpoint c;
  c.id = NewId("cp");
  c.tenant_id = ws.tenant_id;
  c.workspace_id = ws.id;
  c.name = request.name.empty() ? c.id : request.name;
  c.kind = request.kind;
  c.memory = memory;
  c.gen = ws.disk_gen;
  c.parent = ws.disk_parent;
  c.taken_while = std::string(StateName(ws.state));
  c.created_by = store::KeyActor(by);
  c.created_at = Now();
  Layout layout = LayoutFor(ws.id);
  int64_t next = ws.disk_gen + 1;
  Workspace moved = ws;
  moved.disk_gen = next;
  // Undoes what was made, on the blocking pool: the new layers, the row, and (running) the
  // current top given back to the QEMU that still writes it.
  auto unmake = [&, before = ws] {
    RemoveLayers(layout, next);
    if (memory) RemoveMemoryDir(layout, c.id);
    if (running) {
      if (auto s = transport_->AdoptLayers(before, layout); !s) {
        spdlog::warn("workspace {}: giving its disks back: {}", ws.id, s.error().message);
      }
    }
    DropRow(store_, c.id);
  };
  auto make = [&]() -> Status {
    if (auto s = store_.InsertCheckpoint(c); !s) return s;
    auto made = MakeLayers(layout, next, layout.root_disk(c.gen), layout.data_disk(c.gen));
    if (made && memory) made = MakeMemoryDir(layout, c.id);
    if (made && memory && hibernated) made = hypervisor_.CopySave(ws.DomainName(), layout.memory_file(c.id).string());
    // A running VM's QEMU opens the new layers as its uid, and reopens the current top (which
    // becomes the checkpoint's) read-only when it moves.
    if (made && running) made = transport_->AdoptLayers(moved, layout);
    if (!made) unmake();
    return made;
  };
  if (auto s = co_await Blocking(std::move(make)); !s) co_return Fail(s.error());

  if (running || hibernated) {
    Status moved_disks;
    if (running) {
      std::string memory_file = memory ? layout.memory_file(c.id).string() : std::string();
      auto snapshot = co_await MoveRunningDisks(a, c.id, layout, next, std::move(memory_file));
      if (snapshot) c.pause_ms = snapshot->paused_ms;
      if (!snapshot) moved_disks = Fail(snapshot.error());
    } else {
      if (memory) c.pause_ms = 0;  // it sleeps: nothing to pause
      auto retarget = [this, name = ws.DomainName(), root = layout.root_disk(next).string(),
                       data = layout.data_disk(next).string()] { return hypervisor_.RedefineSave(name, root, data); };
      moved_disks = co_await Blocking(std::move(retarget));
    }
    if (!moved_disks) {
      // The layers are removed only when the domain is known to be on the old ones: libvirt
      // may have moved it and failed after (a dropped connection).
      auto ask = [this, name = ws.DomainName()] { return hypervisor_.DiskSources(name); };
      auto on = co_await Blocking(std::move(ask));
      std::string root_now = on && on->contains("vda") ? on->at("vda") : "";
      if (root_now == layout.root_disk(ws.disk_gen).string()) {
        co_await Blocking(std::move(unmake));
        co_return Fail(moved_disks.error());
      }
      if (root_now != layout.root_disk(next).string()) {
        spdlog::error("workspace {}: checkpoint {} failed ({}) and where its disks are is unknown; the next start "
                      "of berthd settles it",
                      ws.id, c.id, moved_disks.error().message);
        co_return Fail(moved_disks.error());
      }
      spdlog::warn("workspace {}: the hypervisor moved the disks for checkpoint {} and then failed ({})", ws.id, c.id,
                   moved_disks.error().message);
    }
  }

  auto taken = TakenOf(a->record(), c, Now());
  std::string what = !memory ? "disk" : c.pause_ms ? fmt::format("memory; the guest paused {} ms", *c.pause_ms)
                                                   : std::string("memory");
  if (auto s = CommitDisks(*a, taken.ws, taken.change, "checkpoint",
                           fmt::format("checkpoint {} taken ({})", Describe(c), what), taken.data, by);
      !s) {
    if (running || hibernated) {
      // The VM already writes the new layers: the row stays "taking", and the next start-up's
      // ReconcileDisks, seeing the domain on them, finishes the commit.
      spdlog::error("workspace {}: checkpoint {} is on its disks but not in the store ({}); the next start "
                    "of berthd finishes it",
                    ws.id, c.id, s.error().message);
      co_return Fail(s.error());
    }
    co_await Blocking(std::move(unmake));
    co_return Fail(s.error());
  }
  c.state = "ready";
  // (A running VM's were frozen when they were given to it read-only.)
  if (!running) {
    auto freeze = [&] { FreezeLayers(layout, c.gen); };
    co_await Blocking(std::move(freeze));
  }
  co_return c;
}

Task<Result<RestoreResult>> WorkspaceService::RestoreOp(ActorPtr a, std::string checkpoint, bool undo, std::string by,
                                                         RestoreFrom from) {
  const bool restart = from == RestoreFrom::kRunning;
  // A running workspace restored to a checkpoint with memory: its own state, memory and all, is
  // the undo (taken while it runs), and then it is pulled: nothing of it is lost that the undo
  // does not hold.
  std::optional<store::Checkpoint> live_undo;
  if (from == RestoreFrom::kRunningMemory) {
    if (a->record().state != State::kRunning) co_return Fail(Conflict(a->record(), "restore"));
    if (undo) {
      CheckpointRequest request;
      request.memory = true;
      request.kind = "before_restore";
      auto taken = co_await CheckpointOp(a, request, by);
      if (!taken) {
        co_return Fail(taken.error().code, "checkpointing the state before the restore: " + taken.error().message);
      }
      live_undo = std::move(*taken);
      undo = false;
    }
    a->event_actor = store::KeyActor(by);
    auto stopping = Transition(*a, State::kStopping, "stopping", "to restore a checkpoint");
    a->event_actor = std::string(store::kSystemActor);
    if (!stopping) co_return Fail(stopping.error());
    co_await StopOp(a, true, "stopped");
  } else if (restart) {
    co_await StopOp(a, false, "stopped");
  }
  if (from != RestoreFrom::kStopped) {
    if (a->record().state != State::kStopped) {
      co_return Fail(ErrorCode::kFailedPrecondition,
                     fmt::format("the stop before the restore ended with workspace '{}' {}", a->record().name,
                                 StateName(a->record().state)));
    }
  }
  // Started again whatever the restore's outcome: it was running when asked.
  struct StartAgain {
    WorkspaceService* self;
    ActorPtr a;
    bool on;
    ~StartAgain() {
      if (!on || self->stopping_ || a->record().state != State::kStopped) return;
      if (auto s = self->Transition(*a, State::kStarting, "starting", "after the restore"); !s) return;
      a->Enqueue([self = self, a = a] { return self->Boot(a, false); });
    }
  } start_again{this, a, from != RestoreFrom::kStopped};
  Workspace ws = a->record();
  if (ws.state != State::kStopped) co_return Fail(Conflict(ws, "restore"));
  Layout layout = LayoutFor(ws.id);
  auto read = [&] { return store_.GetCheckpoint(ws.id, checkpoint); };
  auto target = co_await Blocking(std::move(read));
  if (!target) co_return Fail(target.error());
  if (target->state != "ready") {
    co_return Fail(ErrorCode::kNotFound, fmt::format("checkpoint '{}' is still being taken", checkpoint));
  }
  std::optional<store::Checkpoint> before;
  if (undo) {
    store::Checkpoint b;
    b.id = NewId("cp");
    b.tenant_id = ws.tenant_id;
    b.workspace_id = ws.id;
    b.name = b.id;
    b.kind = "before_restore";
    b.gen = ws.disk_gen;
    b.parent = ws.disk_parent;
    b.taken_while = std::string(StateName(ws.state));
    b.created_by = store::KeyActor(by);
    b.created_at = Now();
    before = std::move(b);
  }
  int64_t next = ws.disk_gen + 1;
  auto make = [&]() -> Status {
    if (before) {
      if (auto s = store_.InsertCheckpoint(*before); !s) return s;
    }
    if (auto s = MakeLayers(layout, next, layout.root_disk(target->gen), layout.data_disk(target->gen)); !s) {
      RemoveLayers(layout, next);
      if (before) DropRow(store_, before->id);
      return s;
    }
    return {};
  };
  if (auto s = co_await Blocking(std::move(make)); !s) co_return Fail(s.error());

  int64_t left = ws.disk_gen;
  ws = a->record();
  ws.disk_gen = next;
  ws.disk_parent = target->id;
  // Its memory resumes at the start that follows, on these disks (until then, and after a
  // crash, the record says so); a checkpoint of disks only boots them.
  if (target->memory) {
    ws.resume_memory = target->id;
  } else {
    ws.resume_memory.reset();
  }
  ws.updated_at = Now();
  store::DiskChange change;
  if (before) change.ready.push_back(before->id);
  if (live_undo) before = live_undo;
  auto data = EventData(*target);
  if (before) data["undo"] = before->id;
  std::string message = fmt::format("restored checkpoint {}", Describe(*target));
  if (before) message += fmt::format("; the state it left is checkpoint {}", before->id);
  if (auto s = CommitDisks(*a, ws, change, "restored", message, data, by); !s) {
    auto drop = [&] {
      RemoveLayers(layout, next);
      if (before) DropRow(store_, before->id);
    };
    co_await Blocking(std::move(drop));
    co_return Fail(s.error());
  }
  // The layers left behind: the undo checkpoint's now, or nobody's.
  auto settle = [&] {
    if (before && !live_undo) {
      FreezeLayers(layout, left);
    } else {
      RemoveLayers(layout, left);
    }
  };
  co_await Blocking(std::move(settle));
  RestoreResult out{a->record(), std::nullopt};
  if (target->memory) {
    // Running again from the checkpoint's memory: the boot that follows resumes it.
    start_again.on = false;
    auto transition = [&] { return Transition(*a, State::kStarting, "starting", "from the checkpoint's memory"); };
    if (auto s = AdmitStart(*a, transition); !s) {
      Record(*a, "error", "the restored checkpoint's memory resumes at the next start: " + s.error().message);
    } else {
      a->Enqueue([this, a] { return Boot(a, false); });
    }
    out.workspace = a->record();
  } else if (restart) {
    out.workspace.state = State::kStarting;  // StartAgain, as this returns
  }
  if (before) {
    before->state = "ready";
    out.undo = std::move(before);
  }
  co_return out;
}

Task<Result<store::Checkpoint>> WorkspaceService::DeleteCheckpointOp(ActorPtr a, std::string checkpoint, std::string by) {
  Workspace ws = a->record();
  Layout layout = LayoutFor(ws.id);
  auto list = [&] { return store_.ListCheckpoints(ws.id); };
  auto rows = co_await Blocking(std::move(list));
  if (!rows) co_return Fail(rows.error());
  auto it = std::find_if(rows->begin(), rows->end(),
                         [&](const store::Checkpoint& c) { return c.id == checkpoint || c.name == checkpoint; });
  if (it == rows->end() || it->state != "ready") {
    co_return Fail(ErrorCode::kNotFound, fmt::format("no checkpoint '{}' in this workspace", checkpoint));
  }
  store::Checkpoint gone = *it;
  if (ws.resume_memory == gone.id) {
    co_return Fail(ErrorCode::kFailedPrecondition,
                   fmt::format("workspace '{}' resumes the memory of checkpoint {} at its next start: start it (or "
                               "restore another checkpoint) to delete this one",
                               ws.name, Describe(gone)));
  }
  // A fork's disks stand on it, or on one above it: their QEMUs read its layers. (ForksOn
  // reads the store's templates.)
  auto on = [&] { return ForksOn(ws, gone, *rows); };
  auto forks = co_await Blocking(std::move(on));
  if (!forks.empty()) {
    co_return Fail(ErrorCode::kFailedPrecondition,
                   fmt::format("checkpoint {} of workspace '{}' has forks or templates standing on it ({}): delete them first",
                               Describe(gone), ws.name, fmt::join(forks, ", ")));
  }
  // A running VM has its whole chain open: a layer under its top can be neither rebased nor
  // removed until it stops.
  bool live_chain = false;
  for (auto under = ws.disk_parent; under && !live_chain;) {
    if (*under == gone.id) live_chain = true;
    auto next = std::find_if(rows->begin(), rows->end(), [&](const store::Checkpoint& c) { return c.id == *under; });
    under = next == rows->end() ? std::nullopt : next->parent;
  }
  if (live_chain && ws.state != State::kStopped && ws.state != State::kError) {
    co_return Fail(ErrorCode::kFailedPrecondition,
                   fmt::format("checkpoint {} is under the disks of workspace '{}', which is {}: stop it to "
                               "delete the checkpoint",
                               Describe(gone), ws.name, StateName(ws.state)));
  }
  // The layers above it stand on what it stood on from then on. Killed between the rebase and
  // the commit, the next start-up finishes the delete (ReconcileDisks: UnlinkStarted).
  auto image_disk = ImageDiskUnder(ws, gone, *rows);
  if (!image_disk) co_return Fail(image_disk.error());
  Unlink plan = PlanUnlink(ws, gone, *rows, layout, *image_disk);
  auto rebase = [&] { return RebaseAbove(layout, plan); };
  if (auto s = co_await Blocking(std::move(rebase)); !s) co_return Fail(s.error());

  ws = a->record();
  if (ws.disk_parent == gone.id) ws.disk_parent = gone.parent;
  if (auto s = CommitDisks(*a, ws, plan.change, "checkpoint_deleted", fmt::format("checkpoint {} deleted", Describe(gone)),
                           EventData(gone), by);
      !s) {
    co_return Fail(s.error());
  }
  auto remove = [&] {
    RemoveLayers(layout, gone.gen);
    RemoveMemoryDir(layout, gone.id);
  };
  co_await Blocking(std::move(remove));
  co_return gone;
}

Result<DiskBase> WorkspaceService::ImageDiskUnder(const Workspace& ws, const store::Checkpoint& c,
                                                               const std::vector<store::Checkpoint>& rows) {
  bool on_parent = c.parent && std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.id == *c.parent; });
  if (on_parent) return DiskBase{};
  if (ws.from_checkpoint) {
    auto source = store_.FindCheckpoint(*ws.from_checkpoint);
    if (!source) return Fail(source.error());
    Layout under = LayoutFor(source->workspace_id);
    return DiskBase{under.root_disk(source->gen), under.data_disk(source->gen)};
  }
  auto image = images_.Get(ws.image, ws.image_version);
  if (!image) return Fail(image.error());
  return DiskBase{fs::path(image->disk), {}};
}

Status WorkspaceService::CommitDisks(Actor& actor, Workspace ws, const store::DiskChange& change,
                                     const std::string& event, const std::string& message, const nlohmann::json& data,
                                     const std::string& by) {
  store::NewEvent line{Now(), event, message, data, by.empty() ? std::string(store::kSystemActor) : by};
  line.data["state"] = std::string(StateName(ws.state));
  auto added = store_.CommitDisks(ws, change, line);
  if (!added) {
    spdlog::error("workspace {}: writing ({}): {}", ws.id, event, added.error().message);
    return Fail(added.error());
  }
  spdlog::info("workspace {} ({}): {}: {}", ws.id, ws.name, event, message);
  Change published;
  published.tenant_id = ws.tenant_id;
  published.workspace_id = ws.id;
  published.workspace = ws;
  published.event = std::move(*added);
  actor.SetRecord(std::move(ws));
  feed_.Publish(published);
  return {};
}

// --- start-up ----------------------------------------------------------------------------------

void WorkspaceService::FinishCutShortDeletes(Workspace& ws, const Layout& layout, std::vector<store::Checkpoint>& rows) {
  // A checkpoint whose delete was killed after it rebased a layer above it: the layers above
  // already stand (some of them) on what it stood on, and the store still has it. Finished as
  // the delete would have: the rest rebased (a rebase done is done again as a no-op), then the
  // commit; its layers go with the other strays.
  for (size_t i = 0; i < rows.size(); ++i) {
    const store::Checkpoint c = rows[i];
    if (c.state != "ready") continue;
    auto image_disk = ImageDiskUnder(ws, c, rows);
    if (!image_disk) continue;
    Unlink plan = PlanUnlink(ws, c, rows, layout, *image_disk);
    if (plan.above.empty() || !UnlinkStarted(layout, plan)) continue;
    // The killed berthd's qemu-img dies with it (RunCommand), but its lock goes only once it
    // has exited: a start right after the kill may find the layer still locked for a moment.
    Status rebased = RebaseAbove(layout, plan);
    for (int retry = 0; !rebased && rebased.error().message.find("lock") != std::string::npos && retry < 20; ++retry) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      rebased = RebaseAbove(layout, plan);
    }
    if (!rebased) {
      spdlog::error("workspace {}: finishing the delete of checkpoint {}: {}", ws.id, c.id, rebased.error().message);
      continue;
    }
    Workspace next = ws;
    if (next.disk_parent == c.id) next.disk_parent = c.parent;
    store::NewEvent line{Now(), "checkpoint_deleted",
                         fmt::format("checkpoint {} deleted (finished at berthd's start)", Describe(c)), EventData(c),
                         std::string(store::kSystemActor)};
    line.data["state"] = std::string(StateName(ws.state));
    auto added = store_.CommitDisks(next, plan.change, line);
    if (!added) {
      spdlog::error("workspace {}: finishing the delete of checkpoint {}: {}", ws.id, c.id, added.error().message);
      continue;
    }
    spdlog::info("workspace {}: the delete of checkpoint {} was cut short; finished", ws.id, c.id);
    ws = next;
    auto again = store_.ListCheckpoints(ws.id);
    if (!again) return;
    rows = std::move(*again);
    i = static_cast<size_t>(-1);  // from the start: its children have new parents
  }
}

void WorkspaceService::ReconcileDisks(std::vector<Workspace>& records) {
  for (auto& ws : records) {
    if (ws.state == State::kDeleting) continue;
    auto rows = store_.ListCheckpoints(ws.id);
    if (!rows) {
      spdlog::warn("workspace {}: checkpoints: {}", ws.id, rows.error().message);
      continue;
    }
    Layout layout = LayoutFor(ws.id);
    // A fork's rebound memory that a killed berthd left (libvirtd, if it still restores from it,
    // holds it open).
    std::error_code removed;
    fs::remove(layout.rebound_memory(), removed);
    // A diff's disks a killed berthd left plugged in (diff.cc); a guest that keeps one keeps
    // its overlay too, for the next start to try again.
    if (!UnplugDiffDisks(ws, layout)) {
      spdlog::warn("workspace {}: a diff's disk is still plugged in; stop the workspace to unplug it", ws.id);
    }
    FinishCutShortDeletes(ws, layout, *rows);
    // Where the domain's disks are, asked only when a row was cut short: a running VM's
    // checkpoint cut short after the hypervisor moved them is finished, not dropped. Unknown
    // (no domain, libvirt unreachable): as recorded.
    std::string root_now;
    bool cut_short = std::any_of(rows->begin(), rows->end(), [](const auto& c) { return c.state != "ready"; });
    if (cut_short) {
      // A snapshot the killed berthd asked for may still be running in libvirtd (measured: a
      // memory checkpoint's save, seconds after the kill): its end decides where the disks are.
      if (auto s = hypervisor_.Settle(ws.DomainName(), std::chrono::seconds(120)); !s) {
        spdlog::warn("workspace {}: {}", ws.id, s.error().message);
      }
      if (auto on = hypervisor_.DiskSources(ws.DomainName()); on && on->contains("vda")) root_now = on->at("vda");
    }
    std::set<int64_t> owned = {ws.disk_gen};
    std::set<std::string> kept;  // the checkpoints whose directories stay (memory)
    for (const auto& c : *rows) {
      if (c.state == "ready") {
        owned.insert(c.gen);
        kept.insert(c.id);
        continue;
      }
      if (c.gen == ws.disk_gen && root_now == layout.root_disk(c.gen + 1).string()) {
        auto taken = TakenOf(ws, c, Now());
        taken.data["state"] = std::string(StateName(ws.state));
        store::NewEvent line{Now(), "checkpoint",
                             fmt::format("checkpoint {} taken ({}; finished at berthd's start)", Describe(c),
                                         c.memory ? "memory" : "disk"),
                             taken.data, std::string(store::kSystemActor)};
        auto added = store_.CommitDisks(taken.ws, taken.change, line);
        if (added) {
          spdlog::info("workspace {}: checkpoint {} was on its disks; finished", ws.id, c.id);
          if (ws.state == State::kHibernated) {
            // Its managed save was repointed, the stored definition perhaps not yet (the
            // killed berthd was between the two): both onto the new tops now.
            auto s = hypervisor_.RedefineSave(ws.DomainName(), layout.root_disk(c.gen + 1).string(),
                                              layout.data_disk(c.gen + 1).string());
            if (!s) spdlog::warn("workspace {}: repointing its definition: {}", ws.id, s.error().message);
          }
          ws = taken.ws;
          owned.insert(c.gen);
          kept.insert(c.id);
        } else {
          spdlog::error("workspace {}: finishing checkpoint {}: {}", ws.id, c.id, added.error().message);
        }
        owned.insert(c.gen + 1);  // the VM writes them: kept whatever the store says
        continue;
      }
      // The disks never moved to its generation: its layers go (below) with the row.
      spdlog::info("workspace {}: checkpoint {} was cut short; dropped", ws.id, c.id);
      DropRow(store_, c.id);
    }
    std::error_code ec;
    std::vector<fs::path> stray;
    for (const auto& entry : fs::directory_iterator(layout.dir, ec)) {
      std::string name = entry.path().filename().string();
      std::string layer = name.ends_with(".tmp") ? name.substr(0, name.size() - 4) : name;
      auto gen = Layout::LayerGen(layer);
      if (!gen) continue;
      if (name != layer || !owned.contains(*gen)) stray.push_back(entry.path());
    }
    for (const auto& path : stray) {
      spdlog::info("workspace {}: removing {}, a layer no checkpoint or disk owns", ws.id, path.filename().string());
      fs::remove(path, ec);
    }
    // A checkpoint's directory (its memory) whose row is gone or was cut short.
    std::vector<fs::path> gone;
    for (const auto& entry : fs::directory_iterator(layout.checkpoints_dir(), ec)) {
      if (!kept.contains(entry.path().filename().string())) gone.push_back(entry.path());
    }
    for (const auto& path : gone) {
      spdlog::info("workspace {}: removing checkpoints/{}, which no checkpoint owns", ws.id, path.filename().string());
      fs::remove_all(path, ec);
    }
    for (int64_t gen : owned) {
      if (gen != ws.disk_gen) FreezeLayers(layout, gen);
    }
  }
}

}  // namespace berth::workspace
