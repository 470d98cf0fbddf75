// LibvirtHypervisor against libvirt's test driver (test:///default): the real library, the
// real XML, an in-memory hypervisor. Booting real VMs is the end-to-end tests' job.
#include <catch2/catch.hpp>

#include "controller/hypervisor/libvirt_hypervisor.h"

using namespace berth;
using namespace berth::hypervisor;

namespace {

DomainSpec Spec(const std::string& name, const std::string& uuid) {
  DomainSpec spec;
  spec.name = name;
  spec.uuid = uuid;
  spec.kernel = "/nonexistent/vmlinuz";
  spec.initrd = "/nonexistent/initrd.img";
  spec.root_disk = "/nonexistent/root.qcow2";
  spec.data_disk = "/nonexistent/data.qcow2";
  spec.token_file = "/nonexistent/token";
  spec.serial_log = "/nonexistent/serial.log";
  spec.vnc_socket = "/nonexistent/vnc.sock";
  spec.forward_port = 40000;
  return spec;
}

}  // namespace

TEST_CASE("libvirt hypervisor: define, start, hibernate, resume, destroy, undefine",
          "[libvirt]") {
  auto hv = LibvirtHypervisor::Connect("test:///default");
  REQUIRE(hv);
  Hypervisor& h = **hv;
  const std::string name = "berth-ws_lifecycle";

  CHECK(h.State(name).value() == DomainState::kMissing);
  REQUIRE(h.Define(Spec(name, "11111111-2222-4333-8444-555555555555")));
  CHECK(h.State(name).value() == DomainState::kShutoff);
  // Redefining with the same UUID is an update, not a conflict.
  REQUIRE(h.Define(Spec(name, "11111111-2222-4333-8444-555555555555")));

  REQUIRE(h.Start(name));
  CHECK(h.State(name).value() == DomainState::kRunning);
  auto again = h.Start(name);
  REQUIRE_FALSE(again);
  INFO(again.error().message);
  CHECK(again.error().code == ErrorCode::kFailedPrecondition);

  REQUIRE(h.Save(name));
  CHECK(h.State(name).value() == DomainState::kSaved);
  REQUIRE(h.Start(name));  // resumes from the managed save image
  CHECK(h.State(name).value() == DomainState::kRunning);

  auto listed = h.List("berth-");
  REQUIRE(listed);
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].uuid == "11111111-2222-4333-8444-555555555555");
  CHECK(h.List("nothing-").value().empty());

  REQUIRE(h.Stats(name));
  REQUIRE(h.Destroy(name));
  CHECK(h.State(name).value() == DomainState::kShutoff);
  REQUIRE(h.Destroy(name));  // destroying a stopped domain is not an error

  REQUIRE(h.Save(name).error().code == ErrorCode::kFailedPrecondition);
  REQUIRE(h.Undefine(name));
  CHECK(h.State(name).value() == DomainState::kMissing);
  REQUIRE(h.Undefine(name));  // already gone: fine
}

TEST_CASE("libvirt hypervisor: errors name the domain and map to codes", "[libvirt]") {
  auto hv = LibvirtHypervisor::Connect("test:///default");
  REQUIRE(hv);
  auto missing = (*hv)->Start("berth-ws_missing");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
  CHECK(missing.error().message.find("berth-ws_missing") != std::string::npos);

  auto bad = LibvirtHypervisor::Connect("qemu+unix:///system?socket=/nonexistent/sock");
  REQUIRE_FALSE(bad);
}

TEST_CASE("libvirt hypervisor: lifecycle events reach the handler", "[libvirt]") {
  auto hv = LibvirtHypervisor::Connect("test:///default");
  REQUIRE(hv);
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<DomainEvent> events;
  (*hv)->SetEventHandler([&](const DomainEvent& e) {
    std::lock_guard lock(mutex);
    events.push_back(e);
    cv.notify_all();
  });
  const std::string name = "berth-ws_events";
  REQUIRE((*hv)->Define(Spec(name, "21111111-2222-4333-8444-555555555555")));
  REQUIRE((*hv)->Start(name));
  REQUIRE((*hv)->Destroy(name));
  std::unique_lock lock(mutex);
  bool seen = cv.wait_for(lock, std::chrono::seconds(10), [&] {
    bool started = false, stopped = false;
    for (const auto& e : events) {
      if (e.name != name) continue;
      started |= e.kind == DomainEventKind::kStarted;
      stopped |= e.kind == DomainEventKind::kStopped;
    }
    return started && stopped;
  });
  lock.unlock();
  CHECK(seen);
  REQUIRE((*hv)->Undefine(name));
  // The handler holds this case's locals, which go before `hv` does: once this returns, no
  // event (the undefine's, still on its way) reaches them. The ASan build caught one that did.
  (*hv)->SetEventHandler(nullptr);
}
