#include "controller/hypervisor/fake_hypervisor.h"

#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

namespace berth::hypervisor {

std::string_view DomainStateName(DomainState state) {
  switch (state) {
    case DomainState::kMissing: return "missing";
    case DomainState::kShutoff: return "shutoff";
    case DomainState::kSaved: return "saved";
    case DomainState::kRunning: return "running";
    case DomainState::kPaused: return "paused";
    case DomainState::kCrashed: return "crashed";
  }
  return "unknown";
}

Status FakeHypervisor::Enter(const std::string& method) {
  ++calls_[method];
  auto it = failures_.find(method);
  if (it == failures_.end()) return {};
  Error error = it->second;
  failures_.erase(it);
  return Fail(std::move(error));
}

void FakeHypervisor::Pass(const std::string& method) {
  std::unique_lock lock(gate_mutex_);
  auto it = gates_.find(method);
  if (it == gates_.end() || it->second.state != Gate::kArmed) return;
  it->second.state = Gate::kHolding;
  gate_changed_.notify_all();
  gate_changed_.wait(lock, [&] { return it->second.state == Gate::kOpen; });
  gates_.erase(it);
}

void FakeHypervisor::HoldNextForTest(const std::string& method) {
  std::lock_guard lock(gate_mutex_);
  gates_[method].state = Gate::kArmed;
}

bool FakeHypervisor::WaitHeldForTest(const std::string& method, std::chrono::milliseconds timeout) {
  std::unique_lock lock(gate_mutex_);
  return gate_changed_.wait_for(lock, timeout, [&] {
    auto it = gates_.find(method);
    return it != gates_.end() && it->second.state == Gate::kHolding;
  });
}

void FakeHypervisor::ReleaseForTest(const std::string& method) {
  std::lock_guard lock(gate_mutex_);
  auto it = gates_.find(method);
  if (it != gates_.end()) it->second.state = Gate::kOpen;
  gate_changed_.notify_all();
}

void FakeHypervisor::Emit(const DomainEvent& event) {
  if (handler_) handler_(event);
}

Status FakeHypervisor::Define(const DomainSpec& spec) {
  Pass("Define");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("Define"); !s) return s;
  auto& domain = domains_[spec.name];
  domain.spec = spec;
  return {};
}

Status FakeHypervisor::Start(const std::string& name) {
  Pass("Start");
  std::function<void(const DomainEvent&)> handler;
  {
    std::lock_guard lock(mutex_);
    if (auto s = Enter("Start"); !s) return s;
    auto it = domains_.find(name);
    if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
    if (it->second.state == DomainState::kRunning) {
      return Fail(ErrorCode::kFailedPrecondition, "domain is already running");
    }
    it->second.state = DomainState::kRunning;  // from shut off, saved, or paused (starting up)
  }
  return {};
}

Status FakeHypervisor::PressPowerButton(const std::string& name) {
  Pass("PressPowerButton");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("PressPowerButton"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  if (it->second.state != DomainState::kRunning) {
    return Fail(ErrorCode::kFailedPrecondition, "domain is not running");
  }
  if (acpi_works_) {
    it->second.state = DomainState::kShutoff;
    it->second.attached.clear();
    Emit({name, DomainEventKind::kShutdownByGuest, "acpi"});
  }
  return {};
}

Status FakeHypervisor::Destroy(const std::string& name) {
  Pass("Destroy");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("Destroy"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  if (it->second.state == DomainState::kRunning || it->second.state == DomainState::kPaused) {
    it->second.state = DomainState::kShutoff;
    it->second.attached.clear();
  }
  return {};
}

Status FakeHypervisor::Save(const std::string& name) {
  Pass("Save");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("Save"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  if (it->second.state != DomainState::kRunning) {
    return Fail(ErrorCode::kFailedPrecondition, "domain is not running");
  }
  it->second.state = DomainState::kSaved;
  it->second.attached.clear();
  return {};
}

Result<SnapshotTaken> FakeHypervisor::Snapshot(const std::string& name, const SnapshotSpec& snapshot) {
  Pass("Snapshot");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("Snapshot"); !s) return Fail(s.error());
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  if (it->second.state != DomainState::kRunning) {
    return Fail(ErrorCode::kFailedPrecondition, "domain is not running");
  }
  SnapshotTaken taken{0};
  if (!snapshot.memory_file.empty()) {
    // The "memory": which domain it is and the root layer it matches, as RestoreMemory checks.
    std::ofstream out(snapshot.memory_file, std::ios::binary | std::ios::trunc);
    out << kFakeMemoryMagic << name << "\n" << it->second.spec.root_disk << "\n";
    if (!out.flush()) return Fail(ErrorCode::kInternal, "cannot write " + snapshot.memory_file);
    taken.paused_ms = kFakePauseMs;
  }
  // As libvirt does: the live disks and the stored definition both move.
  it->second.spec.root_disk = snapshot.root_disk;
  it->second.spec.data_disk = snapshot.data_disk;
  return taken;
}

Status FakeHypervisor::RestoreMemory(const std::string& memory_file, const DomainSpec& spec) {
  Pass("RestoreMemory");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("RestoreMemory"); !s) return s;
  return RestoreLocked(memory_file, spec, true);
}

// Under mutex_. `same_machine`: libvirt's ABI check, the memory's domain and this definition
// must be the same machine (a rebound image was made this definition's first).
Status FakeHypervisor::RestoreLocked(const std::string& memory_file, const DomainSpec& spec, bool same_machine) {
  std::ifstream in(memory_file, std::ios::binary);
  std::string magic;
  std::string domain;
  std::string root;
  if (!in || !std::getline(in, magic) || !std::getline(in, domain) || !std::getline(in, root) ||
      magic + "\n" != kFakeMemoryMagic) {
    return Fail(ErrorCode::kInvalidArgument, "not a memory image: " + memory_file);
  }
  if (same_machine && domain != spec.name) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("Target domain name '{}' does not match source '{}'", spec.name, domain));
  }
  auto it = domains_.find(spec.name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + spec.name);
  if (it->second.state != DomainState::kShutoff) {
    return Fail(ErrorCode::kFailedPrecondition, "domain is not shut off");
  }
  it->second.spec = spec;
  it->second.state = DomainState::kRunning;
  it->second.restored_from = memory_file;
  it->second.restored_root = root;
  return {};
}

Status FakeHypervisor::CopySave(const std::string& name, const std::string& dest) {
  Pass("CopySave");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("CopySave"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  if (it->second.state != DomainState::kSaved) return Fail(ErrorCode::kFailedPrecondition, name + " has no managed save image");
  // The same "memory" Snapshot writes: the domain and the root layer it saved on.
  std::ofstream out(dest, std::ios::binary | std::ios::trunc);
  out << kFakeMemoryMagic << name << "\n" << it->second.spec.root_disk << "\n";
  if (!out.flush()) return Fail(ErrorCode::kInternal, "cannot write " + dest);
  return {};
}

Status FakeHypervisor::RedefineSave(const std::string& name, const std::string& root_disk,
                                    const std::string& data_disk) {
  Pass("RedefineSave");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("RedefineSave"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  if (it->second.state != DomainState::kSaved) {
    return Fail(ErrorCode::kFailedPrecondition, name + " has no managed save image");
  }
  // (One definition stands for the stored one and the save's here: the resume runs on these.)
  it->second.spec.root_disk = root_disk;
  it->second.spec.data_disk = data_disk;
  return {};
}

std::optional<std::pair<std::string, std::string>> FakeHypervisor::RestoredForTest(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = domains_.find(name);
  if (it == domains_.end() || it->second.restored_from.empty()) return std::nullopt;
  return std::pair{it->second.restored_from, it->second.restored_root};
}

Status FakeHypervisor::RestoreMemoryAs(const std::string& memory_file, const DomainSpec& spec,
                                      const std::string& scratch) {
  Pass("RestoreMemoryAs");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("RestoreMemoryAs"); !s) return s;
  if (scratch.empty() || scratch == memory_file) {
    return Fail(ErrorCode::kInvalidArgument, "a rebound restore needs a scratch file of its own");
  }
  return RestoreLocked(memory_file, spec, false);
}

Result<std::map<std::string, std::string>> FakeHypervisor::DiskSources(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (auto s = Enter("DiskSources"); !s) return Fail(s.error());
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  std::map<std::string, std::string> sources{{"vda", it->second.spec.root_disk}, {"vdb", it->second.spec.data_disk}};
  for (const auto& [target, disk] : it->second.attached) sources[target] = disk.file;
  return sources;
}

Status FakeHypervisor::AttachDisk(const std::string& name, const DiskAttachment& disk) {
  Pass("AttachDisk");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("AttachDisk"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  if (it->second.state != DomainState::kRunning) return Fail(ErrorCode::kFailedPrecondition, "domain is not running");
  if (disk.target == "vda" || disk.target == "vdb" || it->second.attached.contains(disk.target)) {
    return Fail(ErrorCode::kAlreadyExists, "target " + disk.target + " is taken");
  }
  if (::access(disk.file.c_str(), R_OK) != 0) return Fail(ErrnoError(errno, "open " + disk.file));
  it->second.attached[disk.target] = disk;
  return {};
}

Status FakeHypervisor::DetachDisk(const std::string& name, const std::string& target, std::chrono::seconds timeout) {
  Pass("DetachDisk");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("DetachDisk"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end() || !it->second.attached.contains(target)) return {};
  if (!detach_works_) {
    return Fail(ErrorCode::kDeadlineExceeded,
                fmt::format("the guest of {} did not let go of disk {} in {} s", name, target, timeout.count()));
  }
  it->second.attached.erase(target);
  return {};
}

std::map<std::string, DiskAttachment> FakeHypervisor::AttachedForTest(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = domains_.find(name);
  return it == domains_.end() ? std::map<std::string, DiskAttachment>{} : it->second.attached;
}

Status FakeHypervisor::DiscardSave(const std::string& name) {
  Pass("DiscardSave");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("DiscardSave"); !s) return s;
  auto it = domains_.find(name);
  if (it != domains_.end() && it->second.state == DomainState::kSaved) {
    it->second.state = DomainState::kShutoff;
  }
  return {};
}

Status FakeHypervisor::Undefine(const std::string& name) {
  Pass("Undefine");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("Undefine"); !s) return s;
  auto it = domains_.find(name);
  if (it == domains_.end()) return {};
  if (it->second.state == DomainState::kRunning) {
    return Fail(ErrorCode::kFailedPrecondition, "domain is running");
  }
  domains_.erase(it);
  return {};
}

Result<DomainState> FakeHypervisor::State(const std::string& name) {
  Pass("State");
  std::lock_guard lock(mutex_);
  if (auto s = Enter("State"); !s) return Fail(s.error());
  auto it = domains_.find(name);
  return it == domains_.end() ? DomainState::kMissing : it->second.state;
}

Result<std::vector<DomainInfo>> FakeHypervisor::List(const std::string& prefix) {
  std::lock_guard lock(mutex_);
  if (auto s = Enter("List"); !s) return Fail(s.error());
  std::vector<DomainInfo> out;
  for (const auto& [name, domain] : domains_) {
    if (name.starts_with(prefix)) out.push_back({name, domain.spec.uuid, domain.state});
  }
  return out;
}

Result<DomainStats> FakeHypervisor::Stats(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (auto s = Enter("Stats"); !s) return Fail(s.error());
  auto it = domains_.find(name);
  if (it == domains_.end()) return Fail(ErrorCode::kNotFound, "no domain " + name);
  return DomainStats{it->second.cpu_time_ns, static_cast<uint64_t>(it->second.spec.memory_mib) * 1024};
}

void FakeHypervisor::SetEventHandler(std::function<void(const DomainEvent&)> handler) {
  std::lock_guard lock(mutex_);
  handler_ = std::move(handler);
}

void FakeHypervisor::FailNextForTest(const std::string& method, Error error) {
  std::lock_guard lock(mutex_);
  failures_[method] = std::move(error);
}

void FakeHypervisor::StopFromGuestForTest(const std::string& name, bool crashed) {
  std::lock_guard lock(mutex_);
  auto it = domains_.find(name);
  if (it == domains_.end()) return;
  it->second.state = DomainState::kShutoff;
  it->second.attached.clear();
  Emit({name, crashed ? DomainEventKind::kCrashed : DomainEventKind::kShutdownByGuest, ""});
}

void FakeHypervisor::SetCpuTimeForTest(const std::string& name, uint64_t ns) {
  std::lock_guard lock(mutex_);
  domains_[name].cpu_time_ns = ns;
}

int FakeHypervisor::CallsForTest(const std::string& method) const {
  std::lock_guard lock(mutex_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

std::optional<DomainSpec> FakeHypervisor::SpecForTest(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = domains_.find(name);
  if (it == domains_.end()) return std::nullopt;
  return it->second.spec;
}

}  // namespace berth::hypervisor
