// The Hypervisor on libvirt: qemu:///system in production, test:///default in integration
// tests. One connection, reopened when virConnectIsAlive() says it died; libvirt's default
// event loop runs on its own thread from construction (registered before the first
// connection, never stopped) and delivers lifecycle events.
//
// Threads: any. libvirt's connection is thread-safe and its errors are per thread, so calls
// run concurrently: only taking the connection (and reconnecting) is serialized, and each call
// holds its own reference to the connection, so a reconnect never pulls it from under a call
// in flight. A long managedsave of one domain does not hold up a boot or a state query of
// another.
#pragma once

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "common/unique.h"
#include "controller/hypervisor/hypervisor.h"

namespace berth {
template <>
struct Deleter<virDomain> {
  void operator()(virDomain* d) const { virDomainFree(d); }
};
template <>
struct Deleter<virConnect> {
  void operator()(virConnect* c) const { virConnectClose(c); }  // drops one reference
};
template <>
struct Deleter<virStream> {
  void operator()(virStream* s) const { virStreamFree(s); }
};
}  // namespace berth

namespace berth::hypervisor {

class LibvirtHypervisor : public Hypervisor {
 public:
  // Connects to `uri`; fails when libvirt is unreachable.
  static Result<std::unique_ptr<LibvirtHypervisor>> Connect(const std::string& uri);
  ~LibvirtHypervisor() override;

  Status Define(const DomainSpec& spec) override;
  Status Start(const std::string& name) override;
  Status PressPowerButton(const std::string& name) override;
  Status Destroy(const std::string& name) override;
  Status Save(const std::string& name) override;
  Status DiscardSave(const std::string& name) override;
  Status Undefine(const std::string& name) override;
  Result<SnapshotTaken> Snapshot(const std::string& name, const SnapshotSpec& snapshot) override;
  Status RestoreMemory(const std::string& memory_file, const DomainSpec& spec) override;
  Status RestoreMemoryAs(const std::string& memory_file, const DomainSpec& spec, const std::string& scratch) override;
  Status Settle(const std::string& name, std::chrono::seconds timeout) override;
  Status CopySave(const std::string& name, const std::string& dest) override;
  Status RedefineSave(const std::string& name, const std::string& root_disk, const std::string& data_disk) override;
  Result<std::map<std::string, std::string>> DiskSources(const std::string& name) override;
  Status AttachDisk(const std::string& name, const DiskAttachment& disk) override;
  Status DetachDisk(const std::string& name, const std::string& target, std::chrono::seconds timeout) override;
  Result<DomainState> State(const std::string& name) override;
  Result<std::vector<DomainInfo>> List(const std::string& prefix) override;
  Result<DomainStats> Stats(const std::string& name) override;
  bool KvmAvailable() override;
  std::string LogTail(const std::string& name) override;
  void SetEventHandler(std::function<void(const DomainEvent&)> handler) override;

 private:
  explicit LibvirtHypervisor(std::string uri) : uri_(std::move(uri)) {}
  // A reference to the live connection, reconnecting if needed. Takes mutex_ briefly.
  Result<Unique<virConnect>> Conn();
  Result<Unique<virDomain>> Lookup(const std::string& name);
  static int OnLifecycle(virConnectPtr, virDomainPtr dom, int event, int detail, void* opaque);

  std::string uri_;
  std::mutex mutex_;  // guards conn_ and callback_id_ only; never held across a libvirt call on a domain
  virConnectPtr conn_ = nullptr;
  int callback_id_ = -1;
  // What libvirt's callback reaches: shared with every registration (each holds a reference,
  // freed by libvirt once the registration is gone), so a dispatch that races the destructor
  // or a deregistration finds a live sink with no handler rather than a freed hypervisor. The
  // handler runs under the mutex: SetEventHandler waits for a call in flight.
  struct EventSink {
    std::mutex mutex;
    std::function<void(const DomainEvent&)> handler;
  };
  std::shared_ptr<EventSink> sink_ = std::make_shared<EventSink>();
};

// libvirt's last error on this thread as an Error; `what` names the operation.
Error LibvirtError(std::string_view what);

}  // namespace berth::hypervisor
