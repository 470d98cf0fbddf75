// The hypervisor boundary, in Berth's words: define, start, power button, destroy, save, state,
// screenshot. The workspace layer never sees libvirt, XML or a virDomainPtr. Implementations:
// LibvirtHypervisor (qemu:///system, or libvirt's test driver in integration tests) and
// FakeHypervisor (unit tests). All methods block; call them off I/O threads. Any thread, and
// concurrently: an implementation serializes only what it must.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "controller/hypervisor/domain_spec.h"

namespace berth::hypervisor {

enum class DomainState {
  kMissing,   // no such domain defined
  kShutoff,   // defined, not running, no saved memory
  kSaved,     // not running, with a managed save image (hibernated)
  kRunning,
  kPaused,
  kCrashed,
};
std::string_view DomainStateName(DomainState state);

struct DomainInfo {
  std::string name;
  std::string uuid;
  DomainState state = DomainState::kMissing;
};

struct DomainStats {
  uint64_t cpu_time_ns = 0;  // total guest CPU time, all vCPUs
  uint64_t memory_kib = 0;   // current balloon size
};

enum class DomainEventKind { kStarted, kStopped, kShutdownByGuest, kCrashed, kSaved, kOther };
struct DomainEvent {
  std::string name;
  DomainEventKind kind = DomainEventKind::kOther;
  std::string detail;
};

class Hypervisor {
 public:
  virtual ~Hypervisor() = default;

  // Defines or redefines the domain (same name and UUID).
  virtual Status Define(const DomainSpec& spec) = 0;
  // Boots it, or resumes it from its managed save; a paused one (a start cut short) runs on.
  virtual Status Start(const std::string& name) = 0;
  // Presses the VM's ACPI power button: asks the guest to power off; returns at once.
  virtual Status PressPowerButton(const std::string& name) = 0;
  // Pulls the plug. Fine on a domain that is not running.
  virtual Status Destroy(const std::string& name) = 0;
  // Saves memory and devices to a managed save image and stops the domain (hibernate).
  virtual Status Save(const std::string& name) = 0;
  // Drops a managed save image (the next start is a cold boot).
  virtual Status DiscardSave(const std::string& name) = 0;
  // Removes the definition and any managed save image. Fine on a missing domain.
  virtual Status Undefine(const std::string& name) = 0;

  // Moves a running domain's two disks onto new top layers at one instant, for both at once or
  // neither (libvirt's external snapshot, atomic, no metadata kept). Disks only (no
  // `memory_file`): the guest does not pause, and the layers it leaves hold what a power cut at
  // that instant would have left. With a `memory_file`: the guest's memory and devices are
  // written there while it runs on, then it is paused for the last of them and the move, and
  // runs on; the memory matches the layers it left. Returns how long the guest was paused.
  virtual Result<SnapshotTaken> Snapshot(const std::string& name, const SnapshotSpec& snapshot) = 0;
  // Runs the defined, shut-off domain `spec.name` from a memory file Snapshot (or CopySave)
  // wrote, on `spec`'s disks (new tops on the layers the memory matches); the rest of the
  // machine is the one the memory was taken with, as the file defines it. The file is only
  // read.
  virtual Status RestoreMemory(const std::string& memory_file, const DomainSpec& spec) = 0;
  // A fork: runs the defined, shut-off domain `spec.name` from another machine's memory file,
  // as `spec`'s machine (RebindDomainXml) with a new generation ID. The rebound image is
  // written to `scratch` (a new file of berthd's, 0600), restored from and removed; the memory
  // file is only read.
  virtual Status RestoreMemoryAs(const std::string& memory_file, const DomainSpec& spec, const std::string& scratch) = 0;
  // Waits, up to `timeout`, until libvirt runs no job for the domain: one that a berthd killed
  // during it had asked for (a snapshot writing its memory, a disk switch) goes on in libvirtd
  // after berthd is gone, and where the disks are is only known once it ends.
  virtual Status Settle(const std::string& name, std::chrono::seconds timeout) = 0;
  // A hibernated domain's managed save image, copied whole to `dest` (a new file, 0600): the
  // memory of a checkpoint taken while it sleeps, which RestoreMemory reads like Snapshot's.
  virtual Status CopySave(const std::string& name, const std::string& dest) = 0;
  // Points a hibernated domain's managed save (and its stored definition) at new top layers,
  // overlays on the ones it saved on: its resume then runs on them.
  virtual Status RedefineSave(const std::string& name, const std::string& root_disk, const std::string& data_disk) = 0;
  // The file each disk reads and writes now, by target ("vda", "vdb"): the live definition of a
  // running domain, the managed save's of a hibernated one, else the stored one.
  virtual Result<std::map<std::string, std::string>> DiskSources(const std::string& name) = 0;
  // Plugs `disk` into the running domain (live only, domain_spec.h). Fails when the domain
  // is not running or the target is taken.
  virtual Status AttachDisk(const std::string& name, const DiskAttachment& disk) = 0;
  // Asks the guest to let go of the disk with target dev `target` (an ACPI eject) and waits,
  // up to `timeout`, until it is gone from the running domain: deadline_exceeded when the
  // guest keeps it. Fine on a disk that is not there (or a domain not running).
  virtual Status DetachDisk(const std::string& name, const std::string& target, std::chrono::seconds timeout) = 0;
  virtual Result<DomainState> State(const std::string& name) = 0;
  // Every domain whose name starts with `prefix`.
  virtual Result<std::vector<DomainInfo>> List(const std::string& prefix) = 0;
  virtual Result<DomainStats> Stats(const std::string& name) = 0;

  // True when the hypervisor offers KVM here (libvirt's domcapabilities). Not proof that a
  // guest runs: see kvm_probe.h.
  virtual bool KvmAvailable() = 0;
  // The end of the hypervisor's own log for the domain (QEMU's stderr), for an error that
  // says why a boot failed; empty where there is none.
  virtual std::string LogTail(const std::string& /*name*/) { return {}; }
  // Lifecycle events from the hypervisor (crash, guest shutdown), called on an internal thread.
  // Once SetEventHandler returns, the handler it replaced is not running and never runs again
  // (so SetEventHandler(nullptr) makes what the handler captured safe to destroy).
  virtual void SetEventHandler(std::function<void(const DomainEvent&)> handler) = 0;
};

}  // namespace berth::hypervisor
