#include "controller/hypervisor/libvirt_hypervisor.h"


#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "controller/hypervisor/save_image.h"

namespace berth::hypervisor {
namespace {

// libvirt's event loop: registered once per process before any connection, run forever on
// a detached thread (libvirt has no clean way to stop it, and its docs say not to).
void EnsureEventLoop() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Errors are read per call with virGetLastError(); don't also print them to stderr.
    virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});
    if (virEventRegisterDefaultImpl() < 0) {
      spdlog::error("libvirt: cannot register the default event loop");
      return;
    }
    std::thread([] {
      for (;;) {
        if (virEventRunDefaultImpl() < 0) spdlog::warn("libvirt event loop: {}", virGetLastErrorMessage());
      }
    }).detach();
  });
}

bool LastErrorIs(int code) {
  virErrorPtr err = virGetLastError();
  return err != nullptr && err->code == code;
}

}  // namespace

Error LibvirtError(std::string_view what) {
  virErrorPtr err = virGetLastError();
  std::string message = err != nullptr && err->message != nullptr ? err->message : "unknown error";
  ErrorCode code = ErrorCode::kInternal;
  if (err != nullptr) {
    switch (err->code) {
      case VIR_ERR_NO_DOMAIN: code = ErrorCode::kNotFound; break;
      case VIR_ERR_OPERATION_INVALID:
      case VIR_ERR_NO_SUPPORT:  // this hypervisor cannot (libvirt's test driver: a managed save's XML)
        code = ErrorCode::kFailedPrecondition;
        break;
      case VIR_ERR_NO_CONNECT:
      case VIR_ERR_SYSTEM_ERROR:
      case VIR_ERR_RPC: code = ErrorCode::kUnavailable; break;
      case VIR_ERR_OPERATION_TIMEOUT: code = ErrorCode::kDeadlineExceeded; break;
      default: break;
    }
  }
  return Error(code, fmt::format("libvirt {}: {}", what, message));
}

Result<std::unique_ptr<LibvirtHypervisor>> LibvirtHypervisor::Connect(const std::string& uri) {
  EnsureEventLoop();
  std::unique_ptr<LibvirtHypervisor> hv(new LibvirtHypervisor(uri));
  auto conn = hv->Conn();
  if (!conn) return Fail(conn.error());
  return hv;
}

LibvirtHypervisor::~LibvirtHypervisor() {
  SetEventHandler(nullptr);  // waits for a handler call in flight
  std::lock_guard lock(mutex_);
  if (conn_ != nullptr) {
    if (callback_id_ >= 0) virConnectDomainEventDeregisterAny(conn_, callback_id_);
    virConnectClose(conn_);
  }
}

Result<Unique<virConnect>> LibvirtHypervisor::Conn() {
  std::lock_guard lock(mutex_);
  auto shared = [this]() -> Unique<virConnect> {
    virConnectRef(conn_);
    return Unique<virConnect>(conn_);
  };
  if (conn_ != nullptr && virConnectIsAlive(conn_) == 1) return shared();
  if (conn_ != nullptr) {
    spdlog::warn("libvirt connection to {} died; reconnecting", uri_);
    virConnectClose(conn_);
    conn_ = nullptr;
    callback_id_ = -1;
  }
  virConnectPtr conn = virConnectOpen(uri_.c_str());
  if (conn == nullptr) return Fail(LibvirtError("connect " + uri_));
  // Detects a dead libvirtd within ~15 s even when we're idle.
  virConnectSetKeepAlive(conn, 5, 3);
  callback_id_ = virConnectDomainEventRegisterAny(
      conn, nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
      VIR_DOMAIN_EVENT_CALLBACK(&LibvirtHypervisor::OnLifecycle),
      new std::shared_ptr<EventSink>(sink_),
      [](void* opaque) { delete static_cast<std::shared_ptr<EventSink>*>(opaque); });
  conn_ = conn;
  return shared();
}

Result<Unique<virDomain>> LibvirtHypervisor::Lookup(const std::string& name) {
  auto conn = Conn();
  if (!conn) return Fail(conn.error());
  virDomainPtr dom = virDomainLookupByName(conn->get(), name.c_str());
  if (dom == nullptr) return Fail(LibvirtError("lookup " + name));
  return Unique<virDomain>(dom);
}

int LibvirtHypervisor::OnLifecycle(virConnectPtr, virDomainPtr dom, int event, int detail,
                                   void* opaque) {
  auto& sink = *static_cast<std::shared_ptr<EventSink>*>(opaque);
  DomainEvent ev;
  ev.name = virDomainGetName(dom);
  switch (event) {
    case VIR_DOMAIN_EVENT_STARTED: ev.kind = DomainEventKind::kStarted; break;
    case VIR_DOMAIN_EVENT_STOPPED:
      switch (detail) {
        case VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN: ev.kind = DomainEventKind::kShutdownByGuest; break;
        case VIR_DOMAIN_EVENT_STOPPED_CRASHED:
        case VIR_DOMAIN_EVENT_STOPPED_FAILED: ev.kind = DomainEventKind::kCrashed; break;
        case VIR_DOMAIN_EVENT_STOPPED_SAVED: ev.kind = DomainEventKind::kSaved; break;
        default: ev.kind = DomainEventKind::kStopped; break;
      }
      break;
    case VIR_DOMAIN_EVENT_CRASHED: ev.kind = DomainEventKind::kCrashed; break;
    default: ev.kind = DomainEventKind::kOther; break;
  }
  ev.detail = fmt::format("event {} detail {}", event, detail);
  std::lock_guard lock(sink->mutex);
  if (sink->handler) sink->handler(ev);
  return 0;
}

void LibvirtHypervisor::SetEventHandler(std::function<void(const DomainEvent&)> handler) {
  std::function<void(const DomainEvent&)> old;
  {
    std::lock_guard lock(sink_->mutex);
    old = std::exchange(sink_->handler, std::move(handler));
  }
  // `old` is destroyed here, outside the lock: what it captured may be anything.
}

Status LibvirtHypervisor::Define(const DomainSpec& spec) {
  auto conn = Conn();
  if (!conn) return Fail(conn.error());
  std::string xml = RenderDomainXml(spec);
  virDomainPtr dom = virDomainDefineXML(conn->get(), xml.c_str());
  if (dom == nullptr) return Fail(LibvirtError("define " + spec.name));
  virDomainFree(dom);
  return {};
}

Status LibvirtHypervisor::Start(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  // Drivers disagree on the error for this (QEMU: operation invalid, test: internal).
  if (virDomainIsActive(dom->get()) == 1) {
    // A start whose caller went away early (berthd killed during virDomainCreate) leaves QEMU
    // paused for good, "starting up": libvirt lets the vCPUs run only at the very end of a
    // start (measured: a client killed 0.15 s into `virsh start`). Let it run now.
    int state = 0;
    int reason = 0;
    if (virDomainGetState(dom->get(), &state, &reason, 0) == 0 && state == VIR_DOMAIN_PAUSED &&
        reason == VIR_DOMAIN_PAUSED_STARTING_UP) {
      if (virDomainResume(dom->get()) < 0) return Fail(LibvirtError("resume " + name));
      return {};
    }
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("{} is already running", name));
  }
  // virDomainCreate resumes from a managed save image when there is one.
  if (virDomainCreate(dom->get()) < 0) return Fail(LibvirtError("start " + name));
  return {};
}

Status LibvirtHypervisor::PressPowerButton(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  if (virDomainShutdownFlags(dom->get(), VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN) < 0) {
    return Fail(LibvirtError("shutdown " + name));
  }
  return {};
}

Status LibvirtHypervisor::Destroy(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  if (virDomainDestroy(dom->get()) < 0) {
    if (LastErrorIs(VIR_ERR_OPERATION_INVALID)) return {};  // not running: nothing to do
    return Fail(LibvirtError("destroy " + name));
  }
  return {};
}

Status LibvirtHypervisor::Save(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  if (virDomainManagedSave(dom->get(), 0) < 0) return Fail(LibvirtError("managed save " + name));
  return {};
}

Status LibvirtHypervisor::DiscardSave(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  if (virDomainHasManagedSaveImage(dom->get(), 0) == 1 &&
      virDomainManagedSaveRemove(dom->get(), 0) < 0) {
    return Fail(LibvirtError("remove managed save " + name));
  }
  return {};
}

Status LibvirtHypervisor::Undefine(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) {
    if (dom.error().code == ErrorCode::kNotFound) return {};
    return Fail(dom.error());
  }
  if (virDomainUndefineFlags(dom->get(), VIR_DOMAIN_UNDEFINE_MANAGED_SAVE) < 0) {
    return Fail(LibvirtError("undefine " + name));
  }
  return {};
}

namespace {

// When libvirt stopped and restarted a domain's vCPUs, from its lifecycle events (suspended,
// resumed) as they reach this process: both travel the same way, so their difference is the
// pause the guest saw, which is longer than QEMU's own "downtime" (the disk switch and the
// resume are in it too).
struct PauseClock {
  std::mutex mutex;
  std::condition_variable changed;
  std::optional<std::chrono::steady_clock::time_point> suspended;
  std::optional<std::chrono::steady_clock::time_point> resumed;

  static int OnEvent(virConnectPtr, virDomainPtr, int event, int, void* opaque) {
    auto& clock = **static_cast<std::shared_ptr<PauseClock>*>(opaque);
    std::lock_guard lock(clock.mutex);
    auto now = std::chrono::steady_clock::now();
    if (event == VIR_DOMAIN_EVENT_SUSPENDED && !clock.suspended) clock.suspended = now;
    if (event == VIR_DOMAIN_EVENT_RESUMED && clock.suspended && !clock.resumed) clock.resumed = now;
    clock.changed.notify_all();
    return 0;
  }
};

}  // namespace

Result<SnapshotTaken> LibvirtHypervisor::Snapshot(const std::string& name, const SnapshotSpec& snapshot) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  auto conn = Conn();
  if (!conn) return Fail(conn.error());
  // The files exist (REUSE_EXT: libvirt neither creates nor relabels them); ATOMIC: both disks
  // move or neither; NO_METADATA: berthd's store is the only record of the checkpoint. With
  // memory, LIVE: the memory is copied while the guest runs, which is paused only for the rest.
  std::string xml = RenderSnapshotXml(snapshot);
  const bool memory = !snapshot.memory_file.empty();
  unsigned flags = VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT | VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC |
                   VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA;
  flags |= memory ? VIR_DOMAIN_SNAPSHOT_CREATE_LIVE : VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY;
  auto clock = std::make_shared<PauseClock>();
  int watch = -1;
  if (memory) {
    watch = virConnectDomainEventRegisterAny(
        conn->get(), dom->get(), VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(&PauseClock::OnEvent),
        new std::shared_ptr<PauseClock>(clock),
        [](void* opaque) { delete static_cast<std::shared_ptr<PauseClock>*>(opaque); });
  }
  auto began = std::chrono::steady_clock::now();
  virDomainSnapshotPtr snap = virDomainSnapshotCreateXML(dom->get(), xml.c_str(), flags);
  auto ended = std::chrono::steady_clock::now();
  Error failed = snap == nullptr ? LibvirtError((memory ? "snapshot the memory and disks of " : "snapshot the disks of ") + name)
                                  : Error{};
  if (snap != nullptr) virDomainSnapshotFree(snap);
  SnapshotTaken taken;
  if (!memory) taken.paused_ms = 0;
  if (watch >= 0) {
    {
      // The resume's event may trail the call's return a little.
      std::unique_lock lock(clock->mutex);
      clock->changed.wait_for(lock, std::chrono::seconds(2), [&] { return clock->resumed.has_value(); });
      if (clock->suspended && clock->resumed) {
        taken.paused_ms = std::chrono::duration_cast<std::chrono::milliseconds>(*clock->resumed - *clock->suspended).count();
      }
    }
    virConnectDomainEventDeregisterAny(conn->get(), watch);
  }
  if (snap == nullptr) return Fail(std::move(failed));
  if (memory && !taken.paused_ms) {
    // No events (a dropped connection): the pause lay within the call.
    taken.paused_ms = std::chrono::duration_cast<std::chrono::milliseconds>(ended - began).count();
    spdlog::warn("{}: no pause events for the snapshot; recording the call's {} ms", name, *taken.paused_ms);
  }
  return taken;
}

Status LibvirtHypervisor::Settle(const std::string& name, std::chrono::seconds timeout) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  // An asynchronous job (a snapshot's memory, a save) shows in the job info until it ends.
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    virDomainJobInfo info{};
    if (virDomainGetJobInfo(dom->get(), &info) < 0) break;  // not running: no job
    if (info.type == VIR_DOMAIN_JOB_NONE) break;
    if (std::chrono::steady_clock::now() >= until) {
      return Fail(ErrorCode::kDeadlineExceeded, fmt::format("{} still runs a libvirt job after {} s", name,
                                                            timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // A synchronous one (a disk-only snapshot's switch) does not; a query waits for it to end.
  if (virDomainIsActive(dom->get()) == 1) {
    virDomainBlockInfo block{};
    if (virDomainGetBlockInfo(dom->get(), "vda", &block, 0) < 0) {
      spdlog::warn("{}: waiting for its libvirt jobs: {}", name, virGetLastErrorMessage());
    }
  }
  return {};
}

Status LibvirtHypervisor::CopySave(const std::string& name, const std::string& dest) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  if (virDomainHasManagedSaveImage(dom->get(), 0) != 1) {
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("{} has no managed save image", name));
  }
  // libvirt names no API for the file: the QEMU driver keeps it here (its save_dir), root's.
  if (!uri_.starts_with("qemu:")) {
    return Fail(ErrorCode::kFailedPrecondition, fmt::format("{}: copying a managed save needs the QEMU driver", uri_));
  }
  std::string source = "/var/lib/libvirt/qemu/save/" + name + ".save";
  int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return Fail(ErrnoError(errno, "open " + source));
  int out = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) {
    int err = errno;
    ::close(in);
    return Fail(ErrnoError(err, "create " + dest));
  }
  Status copied;
  for (;;) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, 1 << 30, 0);
    if (n == 0) break;
    if (n < 0) {
      copied = Fail(ErrnoError(errno, "copy " + source + " to " + dest));
      break;
    }
  }
  if (copied && ::fsync(out) != 0) copied = Fail(ErrnoError(errno, "fsync " + dest));
  ::close(in);
  ::close(out);
  if (!copied) ::unlink(dest.c_str());
  return copied;
}

Status LibvirtHypervisor::RedefineSave(const std::string& name, const std::string& root_disk,
                                       const std::string& data_disk) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  // The save's own definition (the very machine it holds, which libvirt checks a new one
  // against) with only the disks' files changed; their old backing chains go with them, so
  // libvirt reads the new ones from the layers.
  char* saved = virDomainManagedSaveGetXMLDesc(dom->get(), VIR_DOMAIN_SAVE_IMAGE_XML_SECURE);
  if (saved == nullptr) return Fail(LibvirtError("read the managed save of " + name));
  auto xml = RetargetDisks(saved, {{"vda", root_disk}, {"vdb", data_disk}});
  free(saved);
  if (!xml) return Fail(xml.error());
  if (virDomainManagedSaveDefineXML(dom->get(), xml->c_str(), 0) < 0) {
    return Fail(LibvirtError("point the managed save of " + name + " at new disks"));
  }
  // And the stored definition, so that nothing reads the old tops as this domain's.
  char* stored = virDomainGetXMLDesc(dom->get(), VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
  if (stored == nullptr) return Fail(LibvirtError("read the definition of " + name));
  auto defined = RetargetDisks(stored, {{"vda", root_disk}, {"vdb", data_disk}});
  free(stored);
  if (!defined) return Fail(defined.error());
  virDomainPtr redefined = virDomainDefineXML(virDomainGetConnect(dom->get()), defined->c_str());
  if (redefined == nullptr) return Fail(LibvirtError("redefine " + name));
  virDomainFree(redefined);
  return {};
}

Status LibvirtHypervisor::RestoreMemory(const std::string& memory_file, const DomainSpec& spec) {
  auto conn = Conn();
  if (!conn) return Fail(conn.error());
  // libvirt checks the XML it is given against the one inside the file, device by device, down
  // to the addresses it assigned at the boot (measured: berthd's own rendering fails on the USB
  // tablet's), and refuses a changed name, uuid or generation ID: so the file's own definition
  // is the one given, with only the disks' files changed. libvirtd reads the file itself, so a
  // restore berthd asked for completes even if berthd dies during it. (A resume with a new
  // generation ID through RebindDomainXml and save_image.h waits for a writer of its FIFO that
  // outlives berthd: with the writer on a thread of berthd's, the crash suite's kills during a
  // restore left domains shut off that the restarted berthd took for running.)
  // RUNNING: the guest runs on at once.
  char* saved = virDomainSaveImageGetXMLDesc(conn->get(), memory_file.c_str(), VIR_DOMAIN_SAVE_IMAGE_XML_SECURE);
  if (saved == nullptr) return Fail(LibvirtError("read the machine in " + memory_file));
  auto xml = RetargetDisks(saved, {{"vda", spec.root_disk}, {"vdb", spec.data_disk}});
  free(saved);
  if (!xml) return Fail(xml.error());
  if (virDomainRestoreFlags(conn->get(), memory_file.c_str(), xml->c_str(), VIR_DOMAIN_SAVE_RUNNING) < 0) {
    return Fail(LibvirtError("restore " + spec.name + " from its checkpoint's memory"));
  }
  return {};
}

Status LibvirtHypervisor::RestoreMemoryAs(const std::string& memory_file, const DomainSpec& spec,
                                         const std::string& scratch) {
  auto conn = Conn();
  if (!conn) return Fail(conn.error());
  int in = ::open(memory_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return Fail(ErrnoError(errno, "open " + memory_file));
  auto close_in = [in] { ::close(in); };
  auto head = ReadSaveImageHead(in);
  if (!head) {
    close_in();
    return Fail(head.error());
  }
  // A new generation ID: the guest's kernel reseeds its random number generator on it.
  std::string hex = RandomHex(16);
  std::string genid = fmt::format("{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4),
                                  hex.substr(16, 4), hex.substr(20));
  auto xml = RebindDomainXml(head->xml, spec, genid);
  if (!xml) {
    close_in();
    return Fail(xml.error());
  }
  ::unlink(scratch.c_str());
  int out = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) {
    int err = errno;
    close_in();
    return Fail(ErrnoError(err, "create " + scratch));
  }
  auto written = WriteReboundImage(in, *head, *xml, out);
  close_in();
  ::close(out);
  if (!written) {
    ::unlink(scratch.c_str());
    return written;
  }
  Status restored;
  if (virDomainRestoreFlags(conn->get(), scratch.c_str(), nullptr, VIR_DOMAIN_SAVE_RUNNING) < 0) {
    restored = Fail(LibvirtError("restore " + spec.name + " from another machine's memory"));
  }
  ::unlink(scratch.c_str());
  return restored;
}

Result<std::map<std::string, std::string>> LibvirtHypervisor::DiskSources(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  // A hibernated domain resumes onto its managed save's disks, not its stored definition's (a
  // driver that cannot read a save's XML cannot change it either: the stored one's are its).
  char* xml = nullptr;
  if (virDomainIsActive(dom->get()) == 0 && virDomainHasManagedSaveImage(dom->get(), 0) == 1) {
    xml = virDomainManagedSaveGetXMLDesc(dom->get(), 0);
    if (xml == nullptr && !LastErrorIs(VIR_ERR_NO_SUPPORT)) {
      return Fail(LibvirtError("read the managed save of " + name));
    }
  }
  if (xml == nullptr) xml = virDomainGetXMLDesc(dom->get(), 0);
  if (xml == nullptr) return Fail(LibvirtError("read the definition of " + name));
  auto sources = ParseDiskSources(xml);
  free(xml);
  return sources;
}

Status LibvirtHypervisor::AttachDisk(const std::string& name, const DiskAttachment& disk) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  std::string xml = RenderDiskXml(disk);
  if (virDomainAttachDeviceFlags(dom->get(), xml.c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
    return Fail(LibvirtError(fmt::format("attach disk {} to {}", disk.target, name)));
  }
  return {};
}

namespace {

// The aliases of the devices a domain's guest let go of, from libvirt's device-removed events.
struct RemovedDevices {
  std::mutex mutex;
  std::condition_variable changed;
  std::set<std::string> aliases;

  static void OnEvent(virConnectPtr, virDomainPtr, const char* alias, void* opaque) {
    auto& removed = **static_cast<std::shared_ptr<RemovedDevices>*>(opaque);
    std::lock_guard lock(removed.mutex);
    removed.aliases.insert(alias);
    removed.changed.notify_all();
  }
};

}  // namespace

Status LibvirtHypervisor::DetachDisk(const std::string& name, const std::string& target, std::chrono::seconds timeout) {
  auto dom = Lookup(name);
  if (!dom) return dom.error().code == ErrorCode::kNotFound ? Status{} : Fail(dom.error());
  auto conn = Conn();
  if (!conn) return Fail(conn.error());
  auto live_alias = [&]() -> Result<std::optional<std::string>> {
    if (virDomainIsActive(dom->get()) != 1) return std::optional<std::string>();
    char* xml = virDomainGetXMLDesc(dom->get(), 0);
    if (xml == nullptr) return Fail(LibvirtError("read the definition of " + name));
    std::string_view view(xml);
    bool present = ParseDiskSources(view).contains(target);
    auto alias = present ? DiskAlias(view, target).value_or("") : std::optional<std::string>();
    free(xml);
    return alias;
  };
  auto alias = live_alias();
  if (!alias) return Fail(alias.error());
  if (!*alias) return {};
  if (alias->value().empty()) {
    return Fail(ErrorCode::kInternal, fmt::format("disk {} of {} has no alias to detach it by", target, name));
  }
  // Registered before the request: the guest may let go at once.
  auto removed = std::make_shared<RemovedDevices>();
  int watch = virConnectDomainEventRegisterAny(
      conn->get(), dom->get(), VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, VIR_DOMAIN_EVENT_CALLBACK(&RemovedDevices::OnEvent),
      new std::shared_ptr<RemovedDevices>(removed),
      [](void* opaque) { delete static_cast<std::shared_ptr<RemovedDevices>*>(opaque); });
  // libvirt waits a few seconds for the guest itself, then answers with the removal pending.
  if (virDomainDetachDeviceAlias(dom->get(), alias->value().c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0 &&
      !LastErrorIs(VIR_ERR_DEVICE_MISSING) && !LastErrorIs(VIR_ERR_OPERATION_INVALID)) {
    Error failed = LibvirtError(fmt::format("detach disk {} from {}", target, name));
    if (watch >= 0) virConnectDomainEventDeregisterAny(conn->get(), watch);
    return Fail(std::move(failed));
  }
  // The event ends the wait; the domain's own definition decides (an event lost with a
  // dropped connection costs a second, not the timeout).
  auto until = std::chrono::steady_clock::now() + timeout;
  Result<std::optional<std::string>> still = alias;
  while (true) {
    {
      std::unique_lock lock(removed->mutex);
      removed->changed.wait_until(lock, std::min(until, std::chrono::steady_clock::now() + std::chrono::seconds(1)),
                                  [&] { return removed->aliases.contains(alias->value()); });
    }
    still = live_alias();
    if (!still || !*still || std::chrono::steady_clock::now() >= until) break;
  }
  if (watch >= 0) virConnectDomainEventDeregisterAny(conn->get(), watch);
  if (!still) return Fail(still.error());
  if (*still) {
    return Fail(ErrorCode::kDeadlineExceeded,
                fmt::format("the guest of {} did not let go of disk {} in {} s", name, target, timeout.count()));
  }
  return {};
}

Result<DomainState> LibvirtHypervisor::State(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) {
    if (dom.error().code == ErrorCode::kNotFound) return DomainState::kMissing;
    return Fail(dom.error());
  }
  int state = 0;
  int reason = 0;
  if (virDomainGetState(dom->get(), &state, &reason, 0) < 0) {
    return Fail(LibvirtError("state of " + name));
  }
  switch (state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED: return DomainState::kRunning;
    case VIR_DOMAIN_PAUSED:
    case VIR_DOMAIN_PMSUSPENDED: return DomainState::kPaused;
    case VIR_DOMAIN_CRASHED: return DomainState::kCrashed;
    default:
      return virDomainHasManagedSaveImage(dom->get(), 0) == 1 ? DomainState::kSaved
                                                                : DomainState::kShutoff;
  }
}

Result<std::vector<DomainInfo>> LibvirtHypervisor::List(const std::string& prefix) {
  auto conn = Conn();
  if (!conn) return Fail(conn.error());
  virDomainPtr* domains = nullptr;
  int n = virConnectListAllDomains(conn->get(), &domains, 0);
  if (n < 0) return Fail(LibvirtError("list domains"));
  std::vector<DomainInfo> out;
  for (int i = 0; i < n; ++i) {
    Unique<virDomain> dom(domains[i]);
    std::string name = virDomainGetName(dom.get());
    if (!name.starts_with(prefix)) continue;
    char uuid[VIR_UUID_STRING_BUFLEN] = {};
    virDomainGetUUIDString(dom.get(), uuid);
    int state = 0;
    int reason = 0;
    virDomainGetState(dom.get(), &state, &reason, 0);
    DomainState mapped = DomainState::kShutoff;
    if (state == VIR_DOMAIN_RUNNING || state == VIR_DOMAIN_BLOCKED) mapped = DomainState::kRunning;
    else if (state == VIR_DOMAIN_PAUSED || state == VIR_DOMAIN_PMSUSPENDED) mapped = DomainState::kPaused;
    else if (state == VIR_DOMAIN_CRASHED) mapped = DomainState::kCrashed;
    else if (virDomainHasManagedSaveImage(dom.get(), 0) == 1) mapped = DomainState::kSaved;
    out.push_back({name, uuid, mapped});
  }
  free(domains);
  return out;
}

Result<DomainStats> LibvirtHypervisor::Stats(const std::string& name) {
  auto dom = Lookup(name);
  if (!dom) return Fail(dom.error());
  virDomainInfo info{};
  if (virDomainGetInfo(dom->get(), &info) < 0) return Fail(LibvirtError("info of " + name));
  return DomainStats{info.cpuTime, info.memory};
}

bool LibvirtHypervisor::KvmAvailable() {
  auto conn = Conn();
  if (!conn) return false;
  // libvirt answers for virttype=kvm only when it can really start KVM guests here.
  char* caps = virConnectGetDomainCapabilities(conn->get(), nullptr, "x86_64", nullptr, "kvm", 0);
  if (caps == nullptr) return false;
  free(caps);
  return true;
}

std::string LibvirtHypervisor::LogTail(const std::string& name) {
  // Where libvirt's QEMU driver keeps each domain's QEMU log (its stderr: "kvm run failed", an
  // assertion on an MSR). Only for the system instance; other drivers have none.
  if (uri_ != "qemu:///system") return {};
  std::string path = "/var/log/libvirt/qemu/" + name + ".log";
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) return {};
  constexpr long kTail = 800;
  std::string tail(kTail, '\0');
  if (fseek(f, -kTail, SEEK_END) != 0) fseek(f, 0, SEEK_SET);
  size_t n = fread(tail.data(), 1, tail.size(), f);
  fclose(f);
  tail.resize(n);
  for (char& c : tail) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n') c = ' ';
  }
  return "; QEMU log: " + tail;
}

}  // namespace berth::hypervisor
