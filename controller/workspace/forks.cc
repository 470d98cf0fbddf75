// Forks: new workspaces from another workspace's checkpoint (docs/architecture.md, "Forks").
//
// A fork's generation-0 layers are overlays on the checkpoint's frozen layers, which stay in the
// source's directory; its QEMU reads them (and the rest of the chain down to the image) through
// an ACL entry for its uid that the transport adds at each boot (transport.cc). From a
// checkpoint with memory its first boot resumes that memory rebound as its own machine
// (Hypervisor::RestoreMemoryAs: its name, uuid, disks, MAC, uid and a new generation ID); from
// a disk checkpoint it boots cold. Either way its guest still holds the source's identity
// (hostname, machine-id, SSH host keys, the NIC's MAC, the agent token) until GiveIdentity;
// `fresh_identity` stays set until the boot that gave it one commits "running", so a berthd
// killed in between gives it again, and the boot that cannot give it one fails: the VM is
// destroyed and the workspace ends in error, never running.
//
// While a fork stands on a checkpoint, the source can delete neither it nor a checkpoint under
// it (their layers would be rebased under the fork's QEMU), nor itself (ForksOn, ForksOf).
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "controller/workspace/disks.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace fs = std::filesystem;

Task<Result<std::vector<Workspace>>> WorkspaceService::Fork(std::string tenant_id, ForkRequest request) {
  if (stopping_) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
  if (!request.template_name.empty()) {
    // A template names its workspace and checkpoint.
    auto read = [this, &tenant_id, &request] { return store_.GetTemplate(tenant_id, request.template_name); };
    auto t = co_await Blocking(std::move(read));
    if (!t) co_return Fail(t.error());  // 404 for an unknown one, as for an unknown source
    if (t->state == "building") {
      co_return Fail(ErrorCode::kFailedPrecondition, fmt::format("template '{}' is still being built", t->name));
    }
    if (t->state != "ready") {
      co_return Fail(ErrorCode::kFailedPrecondition,
                     fmt::format("template '{}' failed to build: {}", t->name, t->error));
    }
    request.source = t->workspace_id;
    request.checkpoint = t->checkpoint_id;
  }
  auto found = Lookup(tenant_id, request.source);
  if (!found) co_return Fail(found.error());
  ActorPtr source = *found;
  if (request.count != 1) request.idempotency_key.clear();
  if (!request.idempotency_key.empty()) {
    // Before any checkpoint is taken for it: a retry takes none.
    auto read = [this, &tenant_id, &request] { return ByIdempotencyKey(tenant_id, request.idempotency_key); };
    auto earlier = co_await Blocking(std::move(read));
    if (!earlier) co_return Fail(earlier.error());
    if (*earlier) co_return std::vector<Workspace>{std::move(**earlier)};
  }
  std::string checkpoint = request.checkpoint.value_or("");
  if (checkpoint.empty()) {
    // A name already taken is refused before a checkpoint is taken for nothing (ForkBlocking
    // asks again, under the lock).
    if (auto names = FreeForkNames(tenant_id, request); !names) co_return Fail(names.error());
    // The state it is in now, memory and processes too when it has them.
    CheckpointRequest take;
    State now = source->Snapshot().state;
    take.memory = now == State::kRunning || now == State::kHibernated;
    auto taken = co_await TakeCheckpoint(tenant_id, source->id(), take, request.by);
    if (!taken) {
      co_return Fail(taken.error().code, "checkpointing the workspace to fork: " + taken.error().message);
    }
    checkpoint = taken->id;
  }
  // Registered on the source's queue, one operation among its others: a delete of the
  // checkpoint queued before it has removed it (not found), one queued after it sees the fork
  // standing on it (ForksOn). Checked and registered elsewhere, the two could both succeed.
  auto check = [source]() -> Status {
    if (source->record().state == State::kDeleting) {
      return Fail(ErrorCode::kFailedPrecondition, fmt::format("workspace '{}' is being deleted", source->record().name));
    }
    return {};
  };
  auto op = [this, source, tenant_id, request, checkpoint]() { return ForkOp(source, tenant_id, request, checkpoint); };
  co_return co_await Queued<std::vector<Workspace>>(source, std::move(check), std::move(op));
}

Task<Result<std::vector<Workspace>>> WorkspaceService::ForkOp(ActorPtr source, std::string tenant_id,
                                                              ForkRequest request, std::string checkpoint) {
  auto fork = [this, &tenant_id, &request, &checkpoint, source]() -> Result<std::vector<Workspace>> {
    auto c = store_.GetCheckpoint(source->id(), checkpoint);
    if (!c) return Fail(c.error());
    if (c->state != "ready") {
      return Fail(ErrorCode::kNotFound, fmt::format("checkpoint '{}' is still being taken", checkpoint));
    }
    return ForkBlocking(tenant_id, source->Snapshot(), *c, request);
  };
  co_return co_await Blocking(std::move(fork));
}

Result<std::vector<std::string>> WorkspaceService::FreeForkNames(const std::string& tenant_id,
                                                                 const ForkRequest& request) const {
  std::vector<std::string> names;
  for (int i = 1; i <= request.count; ++i) {
    names.push_back(request.count == 1 ? request.name : fmt::format("{}-{}", request.name, i));
    if (Find(tenant_id, names.back())) {
      return Fail(ErrorCode::kAlreadyExists, fmt::format("a workspace named '{}' already exists", names.back()));
    }
  }
  return names;
}

Result<std::vector<Workspace>> WorkspaceService::ForkBlocking(const std::string& tenant_id, const Workspace& source,
                                                              const store::Checkpoint& c, const ForkRequest& request) {
  std::lock_guard create(create_mutex_);
  // A retry that raced the first request's registration: the workspace it made.
  if (!request.idempotency_key.empty()) {
    auto earlier = store_.FindIdempotencyKey(tenant_id, request.idempotency_key);
    if (!earlier) return Fail(earlier.error());
    if (*earlier) {
      if (auto actor = FindById(**earlier)) return std::vector<Workspace>{actor->Snapshot()};
    }
  }
  auto free = FreeForkNames(tenant_id, request);
  if (!free) return Fail(free.error());
  const std::vector<std::string>& names = *free;
  if (source.state == State::kDeleting) {
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("workspace '{}' is being deleted", source.name));
  }
  // The source's image version: the chain under the checkpoint ends at its disk.
  auto image = images_.Get(source.image, source.image_version);
  if (!image) return Fail(ErrorCode::kFailedPrecondition, image.error().message);
  std::lock_guard admission(admission_mutex_);
  QuotaUse ask;
  ask.workspaces = request.count;
  ask.vcpus = request.count * source.vcpus;  // each boots at once
  ask.memory_mib = request.count * source.memory_mib;
  ask.disk_gib = request.count * source.disk_gib;
  if (auto s = AdmitLocked(tenant_id, nullptr, ask); !s) return Fail(s.error());
  if (auto s = CheckHostDiskSpace(); !s) return Fail(s.error());
  std::vector<Workspace> made;
  for (const auto& name : names) {
    Workspace ws;
    ws.id = NewId("ws");
    ws.tenant_id = tenant_id;
    ws.name = name;
    ws.image = source.image;
    ws.image_version = source.image_version;
    ws.size = source.size;
    ws.vcpus = source.vcpus;
    ws.memory_mib = source.memory_mib;  // a resumed memory is exactly this big
    ws.disk_gib = source.disk_gib;
    ws.idle_timeout_s = source.idle_timeout_s;
    ws.idle_action = source.idle_action;
    ws.max_runtime_s = source.max_runtime_s;
    ws.checkpoints = source.checkpoints;
    ws.auto_start = source.auto_start;
    ws.screen = source.screen;
    ws.env = source.env;
    ws.labels = request.labels.value_or(source.labels);
    ws.network = source.network;  // never wider than the source's
    ws.state = State::kCreating;
    ws.transport = std::string(transport_->name());
    ws.uuid = NewUuid();
    ws.created_at = ws.updated_at = Now();
    ws.from_checkpoint = c.id;
    ws.fresh_identity = true;
    if (c.memory) ws.resume_memory = c.id;
    if (auto s = AssignVsockCid(ws); !s) return Fail(s.error());
    auto message = fmt::format("fork of '{}' at checkpoint {} ({}), image {} {}, {} vCPU, {} MiB, {} GiB",
                               source.name, c.name == c.id ? c.id : fmt::format("'{}' ({})", c.name, c.id),
                               c.memory ? "memory" : "disks", ws.image, ws.image_version.substr(0, 12), ws.vcpus,
                               ws.memory_mib, ws.disk_gib);
    auto registered = Register(std::move(ws), *image, request.by, request.idempotency_key, message);
    if (!registered) {
      if (made.empty()) return Fail(registered.error());
      return Fail(registered.error().code, fmt::format("{} of {} forks were made ({}); the next: {}", made.size(),
                                                       names.size(), made.front().name, registered.error().message));
    }
    made.push_back(std::move(registered->workspace));
  }
  return made;
}

Status WorkspaceService::MakeForkDisks(const Workspace& ws, const Layout& layout) {
  auto c = store_.FindCheckpoint(*ws.from_checkpoint);
  if (!c) return Fail(c.error().code, "the checkpoint it forks: " + c.error().message);
  Layout source = LayoutFor(c->workspace_id);
  // Made under temporary names and renamed, as DefaultMakeDisks does: a layer with its final
  // name is whole.
  for (const auto& [backing, path] : {std::pair{source.root_disk(c->gen), layout.root_disk(0)},
                                      std::pair{source.data_disk(c->gen), layout.data_disk(0)}}) {
    std::error_code ec;
    if (fs::exists(path, ec)) continue;
    fs::path tmp = path;
    tmp += ".tmp";
    fs::remove(tmp, ec);
    if (auto s = CreateOverlay(backing, tmp); !s) return s;
    fs::rename(tmp, path, ec);
    if (ec) return Fail(ErrnoError(ec.value(), "rename " + tmp.string()));
  }
  return {};
}

Task<Status> WorkspaceService::GiveIdentity(const ActorPtr& a, std::string mac) {
  auto link = a->link();
  if (!link) co_return Fail(ErrorCode::kUnavailable, "the fork's agent has no link");
  Workspace ws = a->record();
  protocol::IdentityRequest request;
  request.token = RandomHex(32);
  request.hostname = ws.name;
  request.machine_id = RandomHex(16);
  request.mac = std::move(mac);
  request.regenerate_ssh_host_keys = true;
  request.entropy = RandomHex(32);
  // The new token is kept before the guest may take it (Layout::next_token).
  auto keep = [this, ws, token = request.token] { return WriteSecret(LayoutFor(ws.id).next_token(), token); };
  if (auto kept = co_await Blocking(std::move(keep)); !kept) co_return kept;
  AgentCall call = [this, request](const agent_client::AgentLink& to, std::chrono::milliseconds deadline) {
    return options_.give_identity(to, request, deadline);
  };
  auto answer = co_await AskAgent(call, *link, options_.identity_deadline);
  if (!answer) {
    co_return Fail(answer.error().code,
                   "the fork's guest did not take an identity of its own: " + answer.error().message);
  }
  // From its answer on, the agent accepts the new token only.
  auto write = [this, ws, token = request.token] { return AdoptToken(ws, token); };
  if (auto written = co_await Blocking(std::move(write)); !written) co_return written;
  link->token = request.token;
  a->SetLink(*link);
  std::vector<std::string> applied;
  if (answer->contains("applied") && (*answer)["applied"].is_array()) {
    for (const auto& item : (*answer)["applied"]) {
      if (item.is_string() && applied.size() < 16) applied.push_back(item.get<std::string>().substr(0, 32));
    }
  }
  Record(*a, "identity", fmt::format("a machine of its own: {}", fmt::join(applied, ", ")),
         nlohmann::json{{"applied", applied}});
  // Its NIC has a new MAC, and the way to its agent may take a moment to settle (passt learns
  // the address from the guest's next frame; a connection in between is reset, seen under
  // TCG): it is running once its agent answers again, with its new token.
  const auto settle = std::chrono::duration_cast<std::chrono::seconds>(options_.identity_deadline);
  auto up = co_await WaitForAgent(a, settle);
  if (!up) co_return Fail(up.error().code, "the fork's agent after its new identity: " + up.error().message);
  co_return Status{};
}

namespace {

// Whether checkpoint `c` is `at` or one under it, among a workspace's `rows`.
bool AtOrUnder(std::optional<std::string> at, const store::Checkpoint& c, const std::vector<store::Checkpoint>& rows) {
  for (size_t hops = 0; at && hops <= rows.size(); ++hops) {
    auto row = std::find_if(rows.begin(), rows.end(), [&](const store::Checkpoint& r) { return r.id == *at; });
    if (row == rows.end()) return false;
    if (row->id == c.id) return true;
    at = row->parent;
  }
  return false;
}

}  // namespace

std::vector<std::string> WorkspaceService::ForksOn(const Workspace& ws, const store::Checkpoint& c,
                                                   const std::vector<store::Checkpoint>& rows) const {
  std::vector<std::string> out;
  for (const auto& other : AllActors()) {
    Workspace fork = other->Snapshot();
    if (fork.from_checkpoint && fork.id != ws.id && AtOrUnder(fork.from_checkpoint, c, rows)) {
      out.push_back(fork.name);
    }
  }
  // And the templates on it or on one above it: the forks to come would stand there.
  if (auto templates = store_.ListTemplates(ws.tenant_id)) {
    for (const auto& t : *templates) {
      if (t.workspace_id == ws.id && AtOrUnder(t.checkpoint_id, c, rows)) {
        out.push_back(fmt::format("template '{}'", t.name));
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> WorkspaceService::ForksOf(const Workspace& ws) const {
  std::vector<std::string> out;
  auto rows = store_.ListCheckpoints(ws.id);
  if (!rows) {
    spdlog::warn("workspace {}: checkpoints: {}", ws.id, rows.error().message);
    return out;
  }
  std::set<std::string> ids;
  for (const auto& c : *rows) ids.insert(c.id);
  for (const auto& other : AllActors()) {
    Workspace fork = other->Snapshot();
    if (fork.from_checkpoint && fork.id != ws.id && ids.contains(*fork.from_checkpoint)) out.push_back(fork.name);
  }
  if (auto templates = store_.ListTemplates(ws.tenant_id)) {
    for (const auto& t : *templates) {
      // Not one being built (or failed): deleting its workspace ends that build.
      if (t.workspace_id == ws.id && t.state == "ready") out.push_back(fmt::format("template '{}'", t.name));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace berth::workspace
