// What changed between two checkpoints of a workspace, or a checkpoint and the workspace now
// (docs/architecture.md, "Checkpoint diff"). A guest's disk is never read on the host: berthd
// plugs each checkpoint's two layers into the running guest, each under a scratch overlay of its
// own (so the guest's journal replay goes there and the checkpoint is never written), and the
// agent mounts them read-only, compares and answers (guest-agent/diff.h). Then berthd unplugs
// them and removes the overlays. A guest that keeps a disk is stopped: a disk plugged in must
// not end up in a later memory checkpoint or hibernation.
//
// The plugs are live only: a stop, a crash or a berthd restart leaves the stored definition
// without them, and at start-up UnplugDiffDisks takes off what a killed berthd left plugged in.
#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "controller/agent_client/agent_probe.h"
#include "controller/workspace/disks.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace fs = std::filesystem;

namespace {

// Where each side's two disks go: the scratch overlay's name (Layout::diff_disk), the target and
// the PCI slot (hypervisor::DiskAttachment). The serial the guest finds it by is "berth-" and
// the name.
struct Plug {
  std::string_view which;
  std::string_view target;
  int slot;
};
constexpr std::array<Plug, 4> kPlugs = {{{"from-root", "vdw", 0x1c},
                                         {"from-data", "vdx", 0x1d},
                                         {"to-root", "vdy", 0x1e},
                                         {"to-data", "vdz", 0x1f}}};

std::string SerialOf(const Plug& plug) { return fmt::format("berth-{}", plug.which); }

// The ready checkpoint `name` of `rows`, or why not.
Result<store::Checkpoint> ReadyCheckpoint(const std::vector<store::Checkpoint>& rows, const std::string& name,
                                          const Workspace& ws) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& c) { return c.id == name || c.name == name; });
  if (it == rows.end() || it->state != "ready") {
    return Fail(ErrorCode::kNotFound, fmt::format("workspace '{}' has no checkpoint '{}'", ws.name, name));
  }
  return *it;
}

}  // namespace

Task<Result<CheckpointDiff>> WorkspaceService::DiffCheckpoints(std::string tenant_id, std::string id_or_name,
                                                              DiffRequest request, std::chrono::milliseconds wake,
                                                              std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  if (request.from == kDiffToCurrent) {
    co_return Fail(ErrorCode::kInvalidArgument, "a diff starts at a checkpoint: 'current' can only be its 'to'");
  }
  if (request.max_entries < 1 || request.max_entries > protocol::kMaxDiffEntries) {
    co_return Fail(ErrorCode::kInvalidArgument,
                   fmt::format("max_entries must be 1 to {}", protocol::kMaxDiffEntries));
  }
  // Both checkpoints exist before the workspace is woken for them (and again once queued).
  auto read = [this, id = a->id()] { return store_.ListCheckpoints(id); };
  auto rows = co_await Blocking(std::move(read));
  if (!rows) co_return Fail(rows.error());
  Workspace ws = a->Snapshot();
  for (const auto& name : {request.from, request.to}) {
    if (name == kDiffToCurrent) continue;
    if (auto c = ReadyCheckpoint(*rows, name, ws); !c) co_return Fail(c.error());
  }
  auto link = co_await Wake(tenant_id, a->id(), wake, by, "a checkpoint diff");
  if (!link) co_return Fail(link.error());
  auto check = [a]() -> Status {
    const Workspace& now = a->record();
    if (now.state != State::kRunning) return Fail(Conflict(now, "diff the checkpoints of"));
    return {};
  };
  auto op = [this, a, request = std::move(request), by = std::move(by)]() { return DiffOp(a, request, by); };
  co_return co_await Queued<CheckpointDiff>(a, std::move(check), std::move(op));
}

Task<Result<CheckpointDiff>> WorkspaceService::DiffOp(ActorPtr a, DiffRequest request, std::string by) {
  Workspace ws = a->record();
  if (ws.state != State::kRunning) co_return Fail(Conflict(ws, "diff the checkpoints of"));
  auto read = [this, id = ws.id] { return store_.ListCheckpoints(id); };
  auto rows = co_await Blocking(std::move(read));
  if (!rows) co_return Fail(rows.error());
  auto from = ReadyCheckpoint(*rows, request.from, ws);
  if (!from) co_return Fail(from.error());
  std::optional<store::Checkpoint> to;
  if (request.to != kDiffToCurrent) {
    auto found = ReadyCheckpoint(*rows, request.to, ws);
    if (!found) co_return Fail(found.error());
    to = std::move(*found);
  }
  // The running boot's agent, as its boot found it (no file read on the strand).
  auto link = a->link();
  if (!link) co_return Fail(ErrorCode::kUnavailable, fmt::format("workspace '{}' has no agent link yet", ws.name));
  Layout layout = LayoutFor(ws.id);

  // The overlays, each on its checkpoint's layer, given to the VM's QEMU, and plugged in.
  std::vector<std::pair<Plug, fs::path>> plugs;
  auto add = [&](const Plug& plug, const fs::path& layer) { plugs.emplace_back(plug, layer); };
  add(kPlugs[0], layout.root_disk(from->gen));
  add(kPlugs[1], layout.data_disk(from->gen));
  if (to) {
    add(kPlugs[2], layout.root_disk(to->gen));
    add(kPlugs[3], layout.data_disk(to->gen));
  }
  auto plug_in = [this, ws, layout, plugs]() -> Status {
    for (const auto& [plug, layer] : plugs) {
      fs::path scratch = layout.diff_disk(plug.which);
      std::error_code ec;
      fs::remove(scratch, ec);
      if (auto s = CreateOverlay(layer, scratch); !s) return s;
      if (auto s = transport_->AdoptScratch(ws, scratch); !s) return s;
      hypervisor::DiskAttachment disk;
      disk.file = scratch.string();
      disk.target = std::string(plug.target);
      disk.serial = SerialOf(plug);
      disk.pci_slot = plug.slot;
      if (auto s = hypervisor_.AttachDisk(ws.DomainName(), disk); !s) return s;
    }
    return {};
  };
  auto plugged = co_await Blocking(std::move(plug_in));

  Result<nlohmann::json> answer = Fail(ErrorCode::kInternal, "not asked");
  if (plugged) {
    protocol::DiffRequest ask;
    ask.from = {SerialOf(kPlugs[0]), SerialOf(kPlugs[1])};
    if (to) ask.to = protocol::DiffDisks{SerialOf(kPlugs[2]), SerialOf(kPlugs[3])};
    ask.max_entries = request.max_entries;
    ask.budget_ms = options_.diff_budget.count();
    AgentCall call = [this, ask](const agent_client::AgentLink& l, std::chrono::milliseconds deadline) {
      return options_.diff_in_guest(l, ask, deadline);
    };
    answer = co_await AskAgent(call, *link, options_.diff_budget + std::chrono::seconds(60));
  }

  auto unplug = [this, ws, layout] { return UnplugDiffDisks(ws, layout); };
  bool released = co_await Blocking(std::move(unplug));
  if (!released) {
    // The guest keeps a disk plugged in: stopped, which unplugs everything, then the files go.
    spdlog::warn("workspace {}: its guest kept a checkpoint's disk after a diff; stopping it", ws.id);
    a->event_actor = store::KeyActor(by);
    auto stopping = Transition(*a, State::kStopping, "stopping", "its guest kept a checkpoint's disk plugged in");
    a->event_actor = std::string(store::kSystemActor);
    if (stopping) co_await StopOp(a, true, "stopped");
    auto again = [this, ws, layout] { return UnplugDiffDisks(ws, layout); };
    co_await Blocking(std::move(again));
  }
  if (!plugged) co_return Fail(plugged.error().code, "plugging the checkpoint's disks in: " + plugged.error().message);
  if (!answer) co_return Fail(answer.error().code, "the guest's diff: " + answer.error().message);
  auto result = protocol::DiffResultFromJson(*answer);
  if (!result) co_return Fail(ErrorCode::kUnavailable, "the guest's diff answer: " + result.error().message);
  CheckpointDiff diff;
  diff.from = from->id;
  diff.to = to ? to->id : std::string(kDiffToCurrent);
  diff.result = std::move(*result);
  co_return diff;
}

bool WorkspaceService::UnplugDiffDisks(const Workspace& ws, const Layout& layout) {
  bool released = true;
  for (const auto& plug : kPlugs) {
    fs::path scratch = layout.diff_disk(plug.which);
    std::error_code ec;
    if (!fs::exists(scratch, ec)) continue;
    auto s = hypervisor_.DetachDisk(ws.DomainName(), std::string(plug.target), options_.detach_timeout);
    if (!s) {
      spdlog::warn("workspace {}: unplugging {}: {}", ws.id, plug.target, s.error().message);
      released = false;
      continue;
    }
    fs::remove(scratch, ec);
  }
  return released;
}

}  // namespace berth::workspace
