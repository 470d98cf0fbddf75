#include <fmt/format.h>

#include "common/markup.h"
#include "controller/hypervisor/domain_spec.h"

namespace berth::hypervisor {
namespace {

std::string Escape(std::string_view text) { return EscapeMarkup(text); }

}  // namespace

std::string RenderDomainXml(const DomainSpec& spec) {
  const bool kvm = spec.accel == Accel::kKvm;
  std::string x;
  auto add = [&x](std::string_view line) {
    x.append(line);
    x.push_back('\n');
  };
  add(fmt::format("<domain type='{}' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>",
                  kvm ? "kvm" : "qemu"));
  add(fmt::format("  <name>{}</name>", Escape(spec.name)));
  add(fmt::format("  <uuid>{}</uuid>", Escape(spec.uuid)));
  add(fmt::format("  <memory unit='MiB'>{}</memory>", spec.memory_mib));
  add(fmt::format("  <vcpu>{}</vcpu>", spec.vcpus));
  // fw_cfg carries the agent token (from a file), the hostname and the screen size.
  add("  <sysinfo type='fwcfg'>");
  add(fmt::format("    <entry name='opt/berth/token' file='{}'/>", Escape(spec.token_file)));
  if (!spec.hostname.empty()) {
    add(fmt::format("    <entry name='opt/berth/hostname'>{}</entry>", Escape(spec.hostname)));
  }
  if (!spec.screen.empty()) {
    add(fmt::format("    <entry name='opt/berth/screen'>{}</entry>", Escape(spec.screen)));
  }
  add("  </sysinfo>");
  add("  <os>");
  add("    <type arch='x86_64' machine='pc'>hvm</type>");
  add(fmt::format("    <kernel>{}</kernel>", Escape(spec.kernel)));
  add(fmt::format("    <initrd>{}</initrd>", Escape(spec.initrd)));
  add(fmt::format("    <cmdline>{}</cmdline>", Escape(spec.cmdline)));
  add("  </os>");
  add("  <features>");
  add("    <acpi/>");
  if (!kvm) {
    // Caps QEMU's translation cache: an idle 512 MiB guest drops from ~850 to ~530 MiB of host
    // memory with no slower boot (measured, shared/ENVIRONMENT.md).
    add("    <tcg>");
    add("      <tb-cache unit='MiB'>128</tb-cache>");
    add("    </tcg>");
  }
  add("  </features>");
  add(kvm ? "  <cpu mode='host-passthrough'/>" : "  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>");
  add("  <clock offset='utc'/>");
  // A guest that powers itself off or crashes stops; berthd decides what happens next.
  add("  <on_poweroff>destroy</on_poweroff>");
  add("  <on_reboot>restart</on_reboot>");
  add("  <on_crash>destroy</on_crash>");
  add("  <devices>");
  // cache='none' + io='native' would need O_DIRECT-friendly storage; 'writeback' honours
  // guest flushes (fsync reaches the disk), unlike 'unsafe'.
  add("    <disk type='file' device='disk'>");
  add("      <driver name='qemu' type='qcow2' cache='writeback' discard='unmap'/>");
  add(fmt::format("      <source file='{}'/>", Escape(spec.root_disk)));
  add("      <target dev='vda' bus='virtio'/>");
  add("      <serial>berth-root</serial>");
  add("    </disk>");
  add("    <disk type='file' device='disk'>");
  add("      <driver name='qemu' type='qcow2' cache='writeback' discard='unmap'/>");
  add(fmt::format("      <source file='{}'/>", Escape(spec.data_disk)));
  add("      <target dev='vdb' bus='virtio'/>");
  add("      <serial>berth-data</serial>");
  add("    </disk>");
  add("    <serial type='file'>");
  add(fmt::format("      <source path='{}'/>", Escape(spec.serial_log)));
  add("      <target port='0'/>");
  add("    </serial>");
  add("    <console type='file'>");
  add(fmt::format("      <source path='{}'/>", Escape(spec.serial_log)));
  add("      <target type='serial' port='0'/>");
  add("    </console>");
  add("    <graphics type='vnc'>");
  add(fmt::format("      <listen type='socket' socket='{}'/>", Escape(spec.vnc_socket)));
  add("    </graphics>");
  add("    <video>");
  add("      <model type='vga' vram='16384' heads='1' primary='yes'/>");
  add("    </video>");
  add("    <input type='tablet' bus='usb'/>");
  add("    <rng model='virtio'>");
  add("      <backend model='random'>/dev/urandom</backend>");
  add("    </rng>");
  if (spec.agent_channel == AgentChannel::kVsock) {
    add("    <vsock model='virtio'>");
    add(fmt::format("      <cid auto='no' address='{}'/>", spec.vsock_cid));
    add("    </vsock>");
  }
  add("    <memballoon model='virtio'/>");
  add("  </devices>");
  if (spec.run_as_uid != 0) {
    // Each workspace's QEMU runs as its own uid (issue 12), so one escaped QEMU reads no other
    // workspace's disks or token. "+N" is a numeric id: the workspace uids have no passwd entry.
    // relabel='no': berthd gives the VM's own files (disks, token, run/) to the uid itself;
    // libvirt's relabelling would also chown the image's backing disk, which every workspace
    // shares, to this one uid, and leave it so after the VM stops (measured on libvirt 9.0:
    // while running both the overlay and its backing file were uid:gid, after destroy only the
    // overlay went back to root), making the base writable by one guest's QEMU.
    add("  <seclabel type='static' model='dac' relabel='no'>");
    add(fmt::format("    <label>+{}:+{}</label>", spec.run_as_uid, spec.run_as_gid));
    add("  </seclabel>");
  }
  // The NIC is added on QEMU's command line: libvirt 9.0 has no passt <backend> nor a
  // stream netdev, and the address is pinned so the NIC does not take the VGA's slot.
  add("  <qemu:commandline>");
  std::string netdev;
  if (!spec.passt_socket.empty()) {
    netdev = fmt::format("stream,id=n0,server=off,addr.type=unix,addr.path={}", spec.passt_socket);
  } else {
    netdev = fmt::format("user,id=n0,hostfwd=tcp:127.0.0.1:{}-:{}", spec.forward_port,
                         spec.agent_port);
  }
  add("    <qemu:arg value='-netdev'/>");
  add(fmt::format("    <qemu:arg value='{}'/>", Escape(netdev)));
  add("    <qemu:arg value='-device'/>");
  add(fmt::format("    <qemu:arg value='virtio-net-pci,netdev=n0,addr=0x18{}'/>",
                  spec.mac.empty() ? "" : ",mac=" + Escape(spec.mac)));
  add("  </qemu:commandline>");
  add("</domain>");
  return x;
}

}  // namespace berth::hypervisor
