// The workspace operations, each on its own thread under the workspace's op lock (service.cc
// spawns them). Every one re-reads the record first and does nothing unless it is still in the
// state the API left it in: a later call (a delete during a boot) wins.
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "controller/workspace/service.h"
#include "controller/workspace/service_runtime.h"

namespace berth::workspace {

namespace fs = std::filesystem;
using hypervisor::DomainState;

namespace {

// The last lines of the guest's console, for an error that says why a boot failed.
std::string ConsoleTail(const fs::path& log, size_t bytes = 600) {
  std::ifstream in(log, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  in.seekg(static_cast<std::streamoff>(size > bytes ? size - bytes : 0));
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : tail) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n') c = ' ';
  }
  return tail;
}

}  // namespace

hypervisor::DomainSpec WorkspaceService::SpecFor(const Workspace& ws, const ImageVersion& image) const {
  auto layout = LayoutFor(ws.id);
  hypervisor::DomainSpec spec;
  spec.name = ws.DomainName();
  spec.uuid = ws.uuid;
  spec.vcpus = ws.vcpus;
  spec.memory_mib = ws.memory_mib;
  spec.accel = kvm_ ? hypervisor::Accel::kKvm : hypervisor::Accel::kTcg;
  spec.kernel = image.kernel.string();
  spec.initrd = image.initrd.string();
  spec.root_disk = layout.root_disk().string();
  spec.data_disk = layout.data_disk().string();
  spec.token_file = layout.token().string();
  spec.hostname = ws.name;
  spec.serial_log = layout.serial_log().string();
  spec.vnc_socket = layout.vnc_socket().string();
  // A stable MAC from the UUID: the guest keeps its interface name and DHCP lease.
  std::string hex;
  for (char c : ws.uuid) {
    if (std::isxdigit(static_cast<unsigned char>(c))) hex.push_back(c);
  }
  spec.mac = fmt::format("52:54:00:{}:{}:{}", hex.substr(0, 2), hex.substr(2, 2), hex.substr(4, 2));
  spec.transport = transport_->name() == "vsock" ? hypervisor::Transport::kVsock
                                                 : hypervisor::Transport::kForward;
  spec.vsock_cid = static_cast<uint32_t>(ws.vsock_cid.value_or(0));
  spec.passt_socket = layout.passt_socket().string();
  return spec;
}

Status WorkspaceService::WriteToken(const Workspace& ws) {
  // A new 256-bit token per cold boot, in a file only berthd can read (libvirt lends it to
  // QEMU for fw_cfg; it never reaches QEMU's command line).
  auto path = LayoutFor(ws.id).token();
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    chmod(tmp.c_str(), 0600);
    out << RandomHex(32);
    if (!out.flush()) return Fail(ErrnoError(errno, "write " + tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "rename " + tmp.string()));
  std::lock_guard lock(mutex_);
  if (auto it = runtimes_.find(ws.id); it != runtimes_.end()) it->second->link.reset();
  return {};
}

void WorkspaceService::FinishCreate(const std::string& id) {
  auto ws = store_.GetWorkspaceById(id);
  if (!ws || ws->state != State::kCreating) return;
  auto layout = LayoutFor(id);
  auto fail = [&](const Error& e) {
    Transition(*ws, State::kError, "error", "create failed: " + e.message, "create failed: " + e.message);
  };
  auto image = images_.Get(ws->image, ws->image_version);
  if (!image) return fail(image.error());
  std::error_code ec;
  fs::create_directories(layout.dir, ec);
  if (ec) return fail(ErrnoError(ec.value(), "mkdir " + layout.dir.string()));
  fs::permissions(layout.dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  if (auto s = options_.make_disks(*image, layout, ws->disk_gib); !s) return fail(s.error());
  if (auto s = hypervisor_.Define(SpecFor(*ws, *image)); !s) return fail(s.error());
  if (!Transition(*ws, State::kStarting, "starting", "")) return;
  Boot(id, false);
}

Status WorkspaceService::WaitForAgent(Workspace& ws, std::chrono::seconds deadline) {
  auto link = LinkFor(ws);
  if (!link) return Fail(link.error());
  auto until = std::chrono::steady_clock::now() + deadline;
  Error last{ErrorCode::kUnavailable, "no answer yet"};
  for (int round = 0;; ++round) {
    if (stopping_) return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
    if (CachedState(ws.id) != State::kStarting) {
      return Fail(ErrorCode::kFailedPrecondition, "the boot was overtaken by another operation");
    }
    auto answer = options_.probe(*link, std::chrono::milliseconds(3000));
    if (answer) {
      std::lock_guard lock(mutex_);
      runtimes_[ws.id]->link = *link;
      return {};
    }
    last = answer.error();
    // Every few rounds: is the VM still there at all? A guest that powered off or crashed
    // during boot fails now rather than at the deadline.
    if (round % 4 == 3) {
      auto state = hypervisor_.State(ws.DomainName());
      if (state && *state != DomainState::kRunning && *state != DomainState::kPaused) {
        return Fail(ErrorCode::kUnavailable,
                    fmt::format("the VM stopped during boot ({}); console: {}",
                                hypervisor::DomainStateName(*state),
                                ConsoleTail(LayoutFor(ws.id).serial_log())));
      }
    }
    if (std::chrono::steady_clock::now() >= until) {
      return Fail(ErrorCode::kDeadlineExceeded,
                  fmt::format("the agent did not answer within {} s ({}); console: {}",
                              deadline.count(), last.message,
                              ConsoleTail(LayoutFor(ws.id).serial_log())));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

Status WorkspaceService::BootOnce(Workspace& ws, bool resume, int attempt) {
  auto image = images_.Get(ws.image, ws.image_version);
  if (!image) return Fail(image.error());
  auto layout = LayoutFor(ws.id);
  if (!resume) {
    if (auto s = WriteToken(ws); !s) return s;
  }
  auto spec = SpecFor(ws, *image);
  if (auto s = transport_->BeforeStart(ws, layout, resume, spec); !s) return s;
  auto port = ws.agent_port;
  auto saved = Modify(ws.id, [&](Workspace& fresh) -> Status {  // the agent port of this boot
    fresh.agent_port = port;
    return {};
  });
  if (!saved) return Fail(saved.error());
  if (!resume) {
    if (auto s = hypervisor_.Define(spec); !s) return s;
  }
  if (auto s = hypervisor_.Start(ws.DomainName()); !s) return s;
  spdlog::info("workspace {}: {} (attempt {})", ws.id, resume ? "resuming" : "booting", attempt);
  return WaitForAgent(ws, resume ? options_.resume_timeout : boot_timeout_);
}

void WorkspaceService::Boot(const std::string& id, bool woken) {
  auto ws = store_.GetWorkspaceById(id);
  if (!ws || ws->state != State::kStarting) return;
  auto started = std::chrono::steady_clock::now();
  auto domain = hypervisor_.State(ws->DomainName());
  if (!domain) {
    Transition(*ws, State::kError, "error", domain.error().message, domain.error().message);
    return;
  }
  if (*domain == DomainState::kMissing) {
    // Defined again from the record (a host that lost its libvirt definitions).
    auto image = images_.Get(ws->image, ws->image_version);
    if (!image) {
      Transition(*ws, State::kError, "error", image.error().message, image.error().message);
      return;
    }
    if (auto s = hypervisor_.Define(SpecFor(*ws, *image)); !s) {
      Transition(*ws, State::kError, "error", s.error().message, s.error().message);
      return;
    }
    domain = DomainState::kShutoff;
  }
  Status booted = Fail(ErrorCode::kInternal, "not booted");
  if (*domain == DomainState::kRunning || *domain == DomainState::kPaused) {
    // Already up (berthd restarted during a boot): only the agent is left to wait for.
    booted = WaitForAgent(*ws, boot_timeout_);
  } else {
    bool resume = *domain == DomainState::kSaved;
    for (int attempt = 1; attempt <= options_.boot_attempts; ++attempt) {
      bool slot = false;
      if (!resume) {
        // Cold boots take turns; resumes are cheap and do not wait.
        while (!stopping_ && !(slot = boot_slots_.try_acquire_for(std::chrono::milliseconds(500)))) {
        }
        if (!slot) return;
      }
      booted = BootOnce(*ws, resume, attempt);
      if (slot) boot_slots_.release();
      if (booted || stopping_) break;
      if (booted.error().code == ErrorCode::kFailedPrecondition) return;  // overtaken
      Record(*ws, "boot_retry", fmt::format("attempt {} failed: {}", attempt, booted.error().message));
      hypervisor_.Destroy(ws->DomainName());
      transport_->AfterStop(*ws, LayoutFor(id), false);
      if (resume) {
        // A save image that does not resume would fail every time: drop it and boot cold.
        // The disks are untouched; what was in memory is lost, and the event says so.
        hypervisor_.DiscardSave(ws->DomainName());
        Record(*ws, "error", "resume from hibernation failed; booting from disk instead");
        resume = false;
      }
    }
  }
  if (stopping_) return;  // left "starting": the next berthd picks the boot up
  if (!booted) {
    if (booted.error().code == ErrorCode::kFailedPrecondition) return;
    hypervisor_.Destroy(ws->DomainName());
    transport_->AfterStop(*ws, LayoutFor(id), false);
    Transition(*ws, State::kError, "error", booted.error().message, "boot failed: " + booted.error().message);
    return;
  }
  // The API may have moved on (a stop during the boot) while the agent came up.
  auto now_state = CachedState(id);
  if (now_state != State::kStarting) return;
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ws->started_at = Now();
  ws->last_active_at = Now();
  NoteActivity(id);
  {
    // So the API shows when it will idle from the moment it runs, not from the first idle tick.
    auto rt = RuntimeFor(id);
    std::lock_guard lock(mutex_);
    rt->idle_at = *ws->started_at + ws->idle_timeout_s;
  }
  if (!Transition(*ws, State::kRunning, "started",
                  fmt::format("agent ready after {:.1f} s{}", secs, woken ? " (woken by a request)" : ""))) {
    return;
  }
  if (auto s = store_.OpenUsage(*ws, Now()); !s) spdlog::warn("usage for {}: {}", id, s.error().message);
}

Status WorkspaceService::PowerOff(const Workspace& ws, bool force) {
  auto name = ws.DomainName();
  auto state = hypervisor_.State(name);
  if (!state) return Fail(state.error());
  if (*state == DomainState::kSaved) return hypervisor_.DiscardSave(name);
  if (*state != DomainState::kRunning && *state != DomainState::kPaused) return {};
  if (!force && *state == DomainState::kRunning) {
    if (auto s = hypervisor_.Shutdown(name); s) {
      auto until = std::chrono::steady_clock::now() + options_.stop_grace;
      while (std::chrono::steady_clock::now() < until) {
        if (stopping_) return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
        auto now = hypervisor_.State(name);
        if (now && *now != DomainState::kRunning && *now != DomainState::kPaused) return {};
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
      spdlog::info("workspace {}: no power-off after {} s; pulling the plug", ws.id,
                   options_.stop_grace.count());
    }
  }
  return hypervisor_.Destroy(name);
}

void WorkspaceService::StopOp(const std::string& id, bool force, const std::string& reason) {
  auto ws = store_.GetWorkspaceById(id);
  if (!ws || ws->state != State::kStopping) return;
  auto status = PowerOff(*ws, force);
  if (stopping_) return;  // left "stopping": the next berthd finishes it
  if (!status) {
    Transition(*ws, State::kError, "error", "stop failed: " + status.error().message,
               "stop failed: " + status.error().message);
    return;
  }
  transport_->AfterStop(*ws, LayoutFor(id), false);
  store_.CloseUsage(id, Now());
  Transition(*ws, State::kStopped, reason, "");
}

void WorkspaceService::HibernateOp(const std::string& id, const std::string& reason) {
  auto ws = store_.GetWorkspaceById(id);
  if (!ws || ws->state != State::kHibernating) return;
  auto status = hypervisor_.Save(ws->DomainName());
  if (!status) {
    // Still running (a save that fails leaves the domain as it was): say so and carry on.
    auto state = hypervisor_.State(ws->DomainName());
    bool running = state && *state == DomainState::kRunning;
    Transition(*ws, running ? State::kRunning : State::kError, "error",
               "hibernate failed: " + status.error().message,
               running ? std::nullopt : std::optional<std::string>("hibernate failed: " + status.error().message));
    return;
  }
  transport_->AfterStop(*ws, LayoutFor(id), true);
  store_.CloseUsage(id, Now());
  Transition(*ws, State::kHibernated, reason, "");
}

void WorkspaceService::DeleteOp(const std::string& id) {
  auto ws = store_.GetWorkspaceById(id);
  if (!ws || ws->state != State::kDeleting) return;
  auto name = ws->DomainName();
  if (auto s = hypervisor_.Destroy(name); !s) spdlog::warn("delete {}: {}", id, s.error().message);
  if (auto s = hypervisor_.Undefine(name); !s) {
    // The disks stay until the domain is gone: the reconciler retries.
    Record(*ws, "error", "delete: " + s.error().message);
    return;
  }
  transport_->AfterStop(*ws, LayoutFor(id), false);
  store_.CloseUsage(id, Now());
  std::error_code ec;
  fs::remove_all(LayoutFor(id).dir, ec);
  if (ec) {
    Record(*ws, "error", fmt::format("delete: removing files: {}", ec.message()));
    return;
  }
  images_.Release(ws->image, ws->image_version, id);
  Record(*ws, "deleted", "");
  if (auto s = store_.DeleteWorkspace(id); !s) {
    spdlog::error("delete {}: {}", id, s.error().message);
    return;
  }
  std::lock_guard lock(mutex_);
  runtimes_.erase(id);
}

void WorkspaceService::OnDomainEvent(const hypervisor::DomainEvent& event) {
  // Called on the hypervisor's event thread: only look, and hand real work to an operation.
  constexpr std::string_view kPrefix = "berth-";
  if (!event.name.starts_with(kPrefix)) return;
  if (event.kind != hypervisor::DomainEventKind::kShutdownByGuest &&
      event.kind != hypervisor::DomainEventKind::kCrashed &&
      event.kind != hypervisor::DomainEventKind::kStopped) {
    return;
  }
  std::string id = event.name.substr(kPrefix.size());
  // The operation decides under the workspace's op lock, after any operation in flight: the
  // events of our own stops, saves and boot retries find the workspace not running and end
  // there.
  auto kind = event.kind;
  std::string detail = event.detail;
  Spawn(id, [this, id, kind, detail] {
    auto ws = store_.GetWorkspaceById(id);
    if (!ws || ws->state != State::kRunning) return;
    auto state = hypervisor_.State(ws->DomainName());
    if (state && (*state == DomainState::kRunning || *state == DomainState::kPaused)) return;
    transport_->AfterStop(*ws, LayoutFor(id), false);
    store_.CloseUsage(id, Now());
    if (kind == hypervisor::DomainEventKind::kCrashed) {
      Transition(*ws, State::kError, "crashed", detail, "the guest crashed");
    } else {
      Transition(*ws, State::kStopped, "shutdown_by_guest", detail);
    }
  });
}

}  // namespace berth::workspace
