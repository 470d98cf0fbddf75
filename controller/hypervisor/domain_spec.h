// What Berth asks of a VM, in Berth's words. The libvirt implementation turns it into domain
// XML with RenderDomainXml(); nothing above the hypervisor layer sees XML.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace berth::hypervisor {

enum class Accel { kKvm, kTcg };
// How berthd reaches the guest's agent: a virtio-vsock device, or a TCP port that passt
// forwards (no device). The workspace layer's Transport decides; this is what the VM needs.
enum class AgentChannel { kVsock, kForward };

struct DomainSpec {
  std::string name;  // libvirt domain name, "berth-<workspace id>"
  std::string uuid;  // stable per workspace: redefining without it fails in libvirt
  int vcpus = 1;
  int memory_mib = 1024;
  Accel accel = Accel::kTcg;

  // Direct kernel boot from the image: no bootloader, the image's kernel and initrd.
  std::string kernel;
  std::string initrd;
  std::string cmdline = "root=/dev/vda rw console=ttyS0 quiet";

  std::string root_disk;  // qcow2 overlay on the image
  std::string data_disk;  // qcow2, mounted at /workspace; serial "berth-data"

  // fw_cfg entries: the token comes from a file only berthd (and, once libvirt chowns it, QEMU)
  // can read, so it never appears on QEMU's command line.
  std::string token_file;
  std::string hostname;
  std::string screen = "1280x800";

  std::string serial_log;  // the guest's console, for boot diagnostics
  std::string vnc_socket;  // QEMU's VNC server, on a unix socket only berthd connects to

  AgentChannel agent_channel = AgentChannel::kForward;
  uint32_t vsock_cid = 0;  // kVsock

  // Guest networking: a passt process berthd runs per VM (no route from the guest to the
  // host's loopback), attached as a stream netdev. Empty: QEMU's slirp with `forward_port`
  // forwarded to the agent (development only: slirp lets the guest reach the host's
  // loopback).
  std::string passt_socket;
  uint16_t forward_port = 0;  // host 127.0.0.1 port forwarded to the agent (slirp only)
  uint16_t agent_port = 1024;
  std::string mac;  // stable per workspace, e.g. 52:54:00:xx:xx:xx

  // QEMU runs as the workspace's own uid (the one its passt runs as, isolated or not), set
  // through libvirt's DAC seclabel without relabelling: the caller gives the VM's files to the
  // uid (disks and token 0600, run/ 0700) and the image's files stay root's, world-readable.
  // The gid is the host's kvm group where there is one (/dev/kvm is root:kvm 0660), else the
  // uid's own. 0: libvirt's default user (libvirt-qemu); only specs that run no QEMU (the unix
  // transport on libvirt's test driver) leave it so.
  uint32_t run_as_uid = 0;
  uint32_t run_as_gid = 0;
};

// Pure: the same spec gives the same XML, byte for byte (golden-file tested).
std::string RenderDomainXml(const DomainSpec& spec);

// The new top layers a running domain's two disks move onto: qcow2 overlays on the current
// tops, made beforehand by the caller and given to the domain's uid; and, for a checkpoint with
// memory, the file the memory goes to (made by the hypervisor, root's).
struct SnapshotSpec {
  std::string name;       // for libvirt's messages only: no snapshot metadata is kept
  std::string root_disk;  // vda's new top
  std::string data_disk;  // vdb's new top
  std::string memory_file;  // empty: disks only
};

struct SnapshotTaken {
  // How long the guest's vCPUs were stopped (0 for disks only); none when it could not be
  // measured.
  std::optional<int64_t> paused_ms;
};

// Pure, golden-file tested: the <domainsnapshot> of an external snapshot onto the given files:
// the disks, and the memory when there is a memory file.
std::string RenderSnapshotXml(const SnapshotSpec& snapshot);

// `domain_xml` (as libvirt writes it) with the files of the disks named in `files` (target dev
// -> new file) replaced and their <backingStore> chains dropped (libvirt reads the new files'
// chains from the files). Fails when a named disk has no file source.
Result<std::string> RetargetDisks(std::string_view domain_xml, const std::map<std::string, std::string>& files);

// The machine a memory image holds (`image_xml`: the domain XML libvirt wrote into the image),
// bound to the workspace `spec` describes, itself or another: its name, uuid and a new
// generation ID `genid` (the guest's kernel reseeds its random number generator when the value
// changes), the disks' files, fw_cfg's token file and hostname, the console's file, the VNC
// socket, the vsock CID, the uid QEMU runs as and the NIC's arguments (passt's socket or the
// forwarded port, the MAC). Device models and addresses stay the image's: QEMU loads the
// image's device state into them. Pure. Fails (failed_precondition) on an image without a
// generation ID device, or without an element berthd's machines have.
Result<std::string> RebindDomainXml(std::string_view image_xml, const DomainSpec& spec, std::string_view genid);

// A disk plugged into a running domain for a while (diff.cc: a checkpoint's layers under a
// scratch overlay, for the guest's agent to read). Live only: the stored definition never has
// it, so a stop or a crash drops it.
struct DiskAttachment {
  std::string file;    // qcow2, the domain's uid's; its backing chain is opened read-only
  std::string target;  // "vdw": none of the machine's own (vda, vdb)
  std::string serial;  // how the guest finds it (/sys/block/vdX/serial): 1-20 of [a-z0-9-]
  // Pinned, 0x19-0x1f: clear of the slots libvirt gives the machine's own devices (from 0x02
  // up) and of the NIC's (0x18, which libvirt does not know of: it is on QEMU's command line).
  int pci_slot = 0x19;
};

// Pure, golden-file tested: the <disk> device of an attachment, with a user alias ("ua-" and
// its serial) that libvirt's device-removed event names.
std::string RenderDiskXml(const DiskAttachment& disk);
// The alias libvirt gives the disk with target dev `target` in a domain's XML, if it has one.
std::optional<std::string> DiskAlias(std::string_view domain_xml, std::string_view target);

// The file each disk of a domain's XML (as libvirt writes it) reads and writes, by target dev
// ("vda" -> ".../root.g3.qcow2"); disks without a file source are left out.
std::map<std::string, std::string> ParseDiskSources(std::string_view domain_xml);

}  // namespace berth::hypervisor
