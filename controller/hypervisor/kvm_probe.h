// Does KVM work here, for the guests Berth boots? `/dev/kvm` existing is not enough, and
// neither is libvirt's domcapabilities: on hosts whose KVM is a paravirtual shim (kvm_pvm on
// these CI machines) both say yes, and QEMU then aborts or crawls. So berthd asks the way the
// image scripts do (images/lib/common.sh, berth_accel): it boots a 512-byte real-mode guest
// that writes one byte to the serial port and exits through isa-debug-exit, once under TCG and
// once under KVM with the CPU model Berth's KVM domains use (host-passthrough), and KVM passes
// when it ran the guest and was not pathologically slower than TCG (a working KVM is faster).
#pragma once

#include <chrono>
#include <string>

#include "common/error.h"

namespace berth::hypervisor {

struct KvmProbe {
  double kvm_seconds = 0;
  double tcg_seconds = 0;
};

// OK when KVM works; the error says why not (no /dev/kvm, QEMU failed under KVM, too slow).
// Blocking: at most a few seconds (`budget` bounds the KVM run). Runs `qemu` (by PATH lookup
// when it has no '/').
Result<KvmProbe> ProbeKvm(std::chrono::milliseconds budget = std::chrono::seconds(3),
                          const std::string& qemu = "qemu-system-x86_64");

}  // namespace berth::hypervisor
