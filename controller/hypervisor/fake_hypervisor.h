// A hypervisor in memory for unit tests: call counters, canned failures, and state changes
// that tests can trigger (a crash, a guest shutdown). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "controller/hypervisor/hypervisor.h"

namespace berth::hypervisor {

class FakeHypervisor : public Hypervisor {
 public:
  Status Define(const DomainSpec& spec) override;
  Status Start(const std::string& name) override;
  Status PressPowerButton(const std::string& name) override;
  Status Destroy(const std::string& name) override;
  Status Save(const std::string& name) override;
  Status DiscardSave(const std::string& name) override;
  Status Undefine(const std::string& name) override;
  // A snapshot with memory writes a small text file in place of the memory: the domain and the
  // root layer it matches, which RestoreMemory checks the way libvirt checks the machine.
  Result<SnapshotTaken> Snapshot(const std::string& name, const SnapshotSpec& snapshot) override;
  Status RestoreMemory(const std::string& memory_file, const DomainSpec& spec) override;
  Status RestoreMemoryAs(const std::string& memory_file, const DomainSpec& spec, const std::string& scratch) override;
  Status Settle(const std::string&, std::chrono::seconds) override { return {}; }  // no job outlives a call
  Status CopySave(const std::string& name, const std::string& dest) override;
  Status RedefineSave(const std::string& name, const std::string& root_disk, const std::string& data_disk) override;
  Result<std::map<std::string, std::string>> DiskSources(const std::string& name) override;
  Status AttachDisk(const std::string& name, const DiskAttachment& disk) override;
  Status DetachDisk(const std::string& name, const std::string& target, std::chrono::seconds timeout) override;
  Result<DomainState> State(const std::string& name) override;
  Result<std::vector<DomainInfo>> List(const std::string& prefix) override;
  Result<DomainStats> Stats(const std::string& name) override;
  bool KvmAvailable() override { return kvm_; }
  void SetEventHandler(std::function<void(const DomainEvent&)> handler) override;

  // --- test controls ---
  void SetKvmForTest(bool kvm) { kvm_ = kvm; }
  // The next call of `method` ("Start", "Save", ...) fails with `error`.
  void FailNextForTest(const std::string& method, Error error);
  // Simulates the guest going away by itself (power off from inside, or a crash).
  void StopFromGuestForTest(const std::string& name, bool crashed);
  // Whether PressPowerButton() powers the guest off at once (true) or leaves it running (a guest that
  // ignores ACPI).
  void SetAcpiWorksForTest(bool works) { acpi_works_ = works; }
  // Whether DetachDisk takes the disk away (true) or times out (a guest that keeps it).
  void SetDetachWorksForTest(bool works) { detach_works_ = works; }
  // The disks AttachDisk plugged into the running domain, by target.
  std::map<std::string, DiskAttachment> AttachedForTest(const std::string& name) const;
  void SetCpuTimeForTest(const std::string& name, uint64_t ns);
  // The next call of `method` blocks (holding nothing of the fake) until ReleaseForTest: a
  // long managedsave, a hung libvirt call. WaitHeldForTest waits until a call is blocked there.
  void HoldNextForTest(const std::string& method);
  bool WaitHeldForTest(const std::string& method, std::chrono::milliseconds timeout);
  void ReleaseForTest(const std::string& method);
  int CallsForTest(const std::string& method) const;
  std::optional<DomainSpec> SpecForTest(const std::string& name) const;
  // The memory file the domain's last RestoreMemory read, and the root layer it was taken on.
  std::optional<std::pair<std::string, std::string>> RestoredForTest(const std::string& name) const;
  static constexpr std::string_view kFakeMemoryMagic = "berth-fake-memory\n";
  static constexpr int64_t kFakePauseMs = 7;

 private:
  struct Domain {
    DomainSpec spec;
    DomainState state = DomainState::kShutoff;
    uint64_t cpu_time_ns = 0;
    std::string restored_from;
    std::string restored_root;
    std::map<std::string, DiskAttachment> attached;  // live only: gone when it stops
  };
  Status Enter(const std::string& method);
  void Pass(const std::string& method);
  Status RestoreLocked(const std::string& memory_file, const DomainSpec& spec, bool same_machine);
  struct Gate {
    enum { kArmed, kHolding, kOpen } state = kArmed;
  };
  std::mutex gate_mutex_;
  std::condition_variable gate_changed_;
  std::map<std::string, Gate> gates_;
  void Emit(const DomainEvent& event);

  mutable std::mutex mutex_;
  std::map<std::string, Domain> domains_;
  std::map<std::string, int> calls_;
  std::map<std::string, Error> failures_;
  std::function<void(const DomainEvent&)> handler_;
  bool kvm_ = false;
  bool acpi_works_ = true;
  std::atomic<bool> detach_works_ = true;
};

}  // namespace berth::hypervisor
