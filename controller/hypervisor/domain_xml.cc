#include <optional>
#include <utility>

#include <fmt/format.h>

#include "common/markup.h"
#include "controller/hypervisor/domain_spec.h"

namespace berth::hypervisor {
namespace {

std::string Escape(std::string_view text) { return EscapeMarkup(text); }

// The value of attribute `name` in the tag that starts at `tag` (libvirt writes attributes in
// single quotes and escapes the five XML entities), or nothing.
std::optional<std::string> Attribute(std::string_view tag, std::string_view name) {
  std::string key = fmt::format(" {}='", name);
  size_t at = tag.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  size_t begin = at + key.size();
  size_t end = tag.find('\'', begin);
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view raw = tag.substr(begin, end - begin);
  std::string value;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      value.push_back(raw[i]);
      continue;
    }
    static constexpr std::pair<std::string_view, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}, {"&quot;", '"'}};
    bool known = false;
    for (const auto& [entity, c] : kEntities) {
      if (raw.substr(i).starts_with(entity)) {
        value.push_back(c);
        i += entity.size() - 1;
        known = true;
        break;
      }
    }
    if (!known) value.push_back('&');
  }
  return value;
}

// The opening tag `<element ...>` first found in `xml` from `from`, or an empty view.
std::string_view Tag(std::string_view xml, std::string_view element, size_t from = 0) {
  std::string open = fmt::format("<{} ", element);
  size_t begin = xml.find(open, from);
  if (begin == std::string_view::npos) return {};
  size_t end = xml.find('>', begin);
  if (end == std::string_view::npos) return {};
  return xml.substr(begin, end + 1 - begin);
}

}  // namespace

std::string RenderSnapshotXml(const SnapshotSpec& snapshot) {
  std::string x;
  auto add = [&x](std::string_view line) {
    x.append(line);
    x.push_back('\n');
  };
  add("<domainsnapshot>");
  add(fmt::format("  <name>{}</name>", Escape(snapshot.name)));
  if (snapshot.memory_file.empty()) {
    add("  <memory snapshot='no'/>");
  } else {
    add(fmt::format("  <memory snapshot='external' file='{}'/>", Escape(snapshot.memory_file)));
  }
  add("  <disks>");
  for (const auto& [dev, file] : {std::pair{"vda", &snapshot.root_disk}, std::pair{"vdb", &snapshot.data_disk}}) {
    add(fmt::format("    <disk name='{}' snapshot='external' type='file'>", dev));
    add("      <driver type='qcow2'/>");
    add(fmt::format("      <source file='{}'/>", Escape(*file)));
    add("    </disk>");
  }
  add("  </disks>");
  add("</domainsnapshot>");
  return x;
}

namespace {

// The span of a disk's <backingStore> chain in `disk` (the outermost element, nested ones in
// it; `<backingStore/>` alone at the chain's end), or nothing.
std::optional<std::pair<size_t, size_t>> BackingSpan(std::string_view disk) {
  size_t begin = disk.find("<backingStore");
  if (begin == std::string_view::npos) return std::nullopt;
  size_t open_end = disk.find('>', begin);
  if (open_end == std::string_view::npos) return std::nullopt;
  if (disk[open_end - 1] == '/') return std::pair{begin, open_end + 1};
  size_t closed = disk.rfind("</backingStore>");
  if (closed == std::string_view::npos || closed < begin) return std::nullopt;
  return std::pair{begin, closed + std::string_view("</backingStore>").size()};
}

}  // namespace

Result<std::string> RetargetDisks(std::string_view domain_xml, const std::map<std::string, std::string>& files) {
  std::string out;
  std::map<std::string, bool> done;
  size_t at = 0;
  while (true) {
    size_t begin = domain_xml.find("<disk ", at);
    size_t end = begin == std::string_view::npos ? begin : domain_xml.find("</disk>", begin);
    if (begin == std::string_view::npos || end == std::string_view::npos) break;
    out.append(domain_xml.substr(at, begin - at));
    std::string disk(domain_xml.substr(begin, end - begin));
    at = end;
    std::string own = disk;
    auto backing = BackingSpan(own);
    if (backing) own.erase(backing->first, backing->second - backing->first);
    auto dev = Attribute(Tag(own, "target"), "dev");
    auto it = dev ? files.find(*dev) : files.end();
    if (it == files.end()) {
      out.append(disk);
      continue;
    }
    // Its own <source> comes before its chain: its file attribute gets the new file.
    std::string_view source = Tag(own, "source");
    size_t key = source.empty() ? std::string::npos : source.find(" file='");
    if (key == std::string::npos) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("disk {} has no file source to retarget", *dev));
    }
    size_t value = static_cast<size_t>(source.data() - own.data()) + key + std::string_view(" file='").size();
    size_t value_end = own.find('\'', value);
    own.replace(value, value_end - value, Escape(it->second));
    out.append(own);
    done[*dev] = true;
  }
  out.append(domain_xml.substr(at));
  for (const auto& [dev, file] : files) {
    if (!done.contains(dev)) return Fail(ErrorCode::kNotFound, fmt::format("the domain has no disk {}", dev));
  }
  return out;
}

std::string RenderDiskXml(const DiskAttachment& disk) {
  std::string x;
  auto add = [&x](std::string_view line) {
    x.append(line);
    x.push_back('\n');
  };
  add("<disk type='file' device='disk'>");
  add("  <driver name='qemu' type='qcow2' cache='writeback'/>");
  add(fmt::format("  <source file='{}'/>", Escape(disk.file)));
  add(fmt::format("  <target dev='{}' bus='virtio'/>", Escape(disk.target)));
  add(fmt::format("  <serial>{}</serial>", Escape(disk.serial)));
  add(fmt::format("  <alias name='ua-{}'/>", Escape(disk.serial)));
  add(fmt::format("  <address type='pci' domain='0x0000' bus='0x00' slot='{:#04x}' function='0x0'/>", disk.pci_slot));
  add("</disk>");
  return x;
}

std::optional<std::string> DiskAlias(std::string_view domain_xml, std::string_view target) {
  size_t at = 0;
  while (true) {
    size_t begin = domain_xml.find("<disk ", at);
    if (begin == std::string_view::npos) return std::nullopt;
    size_t end = domain_xml.find("</disk>", begin);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view disk = domain_xml.substr(begin, end - begin);
    at = end;
    // The disk's own <target> and <alias> follow its <backingStore> chain, if it has one.
    size_t closed = disk.rfind("</backingStore>");
    std::string_view own = closed == std::string_view::npos ? disk : disk.substr(closed);
    if (Attribute(Tag(own, "target"), "dev") != target) continue;
    return Attribute(Tag(own, "alias"), "name");
  }
}

std::map<std::string, std::string> ParseDiskSources(std::string_view domain_xml) {
  std::map<std::string, std::string> sources;
  size_t at = 0;
  while (true) {
    size_t begin = domain_xml.find("<disk ", at);
    if (begin == std::string_view::npos) break;
    size_t end = domain_xml.find("</disk>", begin);
    if (end == std::string_view::npos) break;
    std::string_view disk = domain_xml.substr(begin, end - begin);
    at = end;
    // Its <backingStore> (nested, one per layer under it) holds the lower layers' sources:
    // cut out, so what is left is the disk's own <source> and <target>.
    std::string own(disk);
    size_t backing = own.find("<backingStore");
    size_t closed = own.rfind("</backingStore>");
    if (backing != std::string::npos && closed != std::string::npos && closed > backing) {
      own.erase(backing, closed + std::string_view("</backingStore>").size() - backing);
    }
    auto file = Attribute(Tag(own, "source"), "file");
    auto dev = Attribute(Tag(own, "target"), "dev");
    if (file && dev) sources[*dev] = *file;
  }
  return sources;
}

namespace {

// QEMU's -netdev and -device arguments for the NIC (the qemu:commandline libvirt passes as
// is): passt's socket, or slirp with the agent's port forwarded; the MAC.
std::pair<std::string, std::string> NicArgs(const DomainSpec& spec) {
  std::string netdev;
  if (!spec.passt_socket.empty()) {
    netdev = fmt::format("stream,id=n0,server=off,addr.type=unix,addr.path={}", spec.passt_socket);
  } else {
    netdev = fmt::format("user,id=n0,hostfwd=tcp:127.0.0.1:{}-:{}", spec.forward_port, spec.agent_port);
  }
  std::string device = "virtio-net-pci,netdev=n0,addr=0x18" + (spec.mac.empty() ? "" : ",mac=" + spec.mac);
  return {netdev, device};
}

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
  // A VM generation ID device (libvirt picks the value): a memory image taken of this machine
  // can be resumed with another value, and the guest's kernel then reseeds its random number
  // generator (RebindDomainXml). The device must be in the machine the image was taken of.
  add("  <genid/>");
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
  auto [netdev, nic] = NicArgs(spec);
  add("    <qemu:arg value='-netdev'/>");
  add(fmt::format("    <qemu:arg value='{}'/>", Escape(netdev)));
  add("    <qemu:arg value='-device'/>");
  add(fmt::format("    <qemu:arg value='{}'/>", Escape(nic)));
  add("  </qemu:commandline>");
  add("</domain>");
  return x;
}

}  // namespace berth::hypervisor

namespace berth::hypervisor {
namespace {

// Edits of a domain XML as libvirt writes it (single-quoted attributes): each finds what it
// edits or fails, so an image whose machine berthd did not render is refused rather than
// resumed half-rebound.
class XmlEdit {
 public:
  explicit XmlEdit(std::string xml) : xml_(std::move(xml)) {}

  // [begin, end) of the first element from `from` whose opening tag starts with `open`
  // (through its `close`), or nothing.
  std::optional<std::pair<size_t, size_t>> Find(std::string_view open, std::string_view close, size_t from = 0) const {
    size_t begin = xml_.find(open, from);
    if (begin == std::string::npos) return std::nullopt;
    size_t end = xml_.find(close, begin);
    if (end == std::string::npos) return std::nullopt;
    return std::pair{begin, end + close.size()};
  }

  // The text of the first <element>…</element> in `within`.
  Status Text(std::string_view element, std::string_view text, std::pair<size_t, size_t> within) {
    std::string open = fmt::format("<{}>", element);
    auto found = Find(open, fmt::format("</{}>", element), within.first);
    if (!found || found->second > within.second) return Missing(open);
    size_t begin = found->first + open.size();
    size_t end = found->second - element.size() - 3;
    xml_.replace(begin, end - begin, EscapeMarkup(text));
    return {};
  }

  // Attribute `name` of the first tag in `within` that starts with `tag`.
  Status Attribute(std::string_view tag, std::string_view name, std::string_view value, std::pair<size_t, size_t> within) {
    size_t at = xml_.find(tag, within.first);
    size_t tag_end = at == std::string::npos ? at : xml_.find('>', at);
    if (tag_end == std::string::npos || tag_end > within.second) return Missing(std::string(tag));
    std::string key = fmt::format(" {}='", name);
    size_t attr = xml_.find(key, at);
    if (attr == std::string::npos || attr > tag_end) return Missing(fmt::format("{} with {}=", tag, name));
    size_t begin = attr + key.size();
    size_t end = xml_.find('\'', begin);
    if (end == std::string::npos || end > tag_end) return Missing(fmt::format("{} with {}=", tag, name));
    xml_.replace(begin, end - begin, EscapeMarkup(value));
    return {};
  }

  // The first tag from `from` that starts with `tag` has attribute `name`.
  bool HasAttribute(std::string_view tag, std::string_view name, size_t from = 0) const {
    size_t at = xml_.find(tag, from);
    size_t tag_end = at == std::string::npos ? at : xml_.find('>', at);
    if (tag_end == std::string::npos) return false;
    size_t attr = xml_.find(fmt::format(" {}='", name), at);
    return attr != std::string::npos && attr < tag_end;
  }

  static Status Missing(const std::string& what) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("the memory image's machine has no {} where berthd's machines have one", what));
  }

  std::string& xml() { return xml_; }

 private:
  std::string xml_;
};

constexpr std::pair<size_t, size_t> kAll{0, std::string::npos};

}  // namespace

Result<std::string> RebindDomainXml(std::string_view image_xml, const DomainSpec& spec, std::string_view genid) {
  auto retargeted = RetargetDisks(image_xml, {{"vda", spec.root_disk}, {"vdb", spec.data_disk}});
  if (!retargeted) return Fail(retargeted.error());
  XmlEdit x(std::move(*retargeted));
  auto ok = [](const Status& s) { return s.has_value(); };
  // The machine's own name, uuid and generation ID come before its devices.
  size_t devices = x.xml().find("<devices>");
  if (devices == std::string::npos) return Fail(XmlEdit::Missing("<devices>").error());
  std::pair<size_t, size_t> head{0, devices};
  if (!x.Find("<genid>", "</genid>") || x.Find("<genid>", "</genid>")->second > devices) {
    return Fail(ErrorCode::kFailedPrecondition,
                "the memory image's machine has no generation ID device (it was taken before berthd gave its machines "
                "one): resumed as another machine, its guest would not know to reseed its random numbers");
  }
  for (auto [element, value] : {std::pair{"name", std::string_view(spec.name)},
                                std::pair{"uuid", std::string_view(spec.uuid)}, std::pair{"genid", genid}}) {
    if (auto done = x.Text(element, value, head); !ok(done)) return Fail(done.error());
  }
  // fw_cfg: QEMU opens the token file as it starts, under the new uid.
  if (auto done = x.Attribute("<entry name='opt/berth/token'", "file", spec.token_file, kAll); !ok(done)) {
    return Fail(done.error());
  }
  if (auto hostname = x.Find("<entry name='opt/berth/hostname'>", "</entry>"); hostname && !spec.hostname.empty()) {
    size_t begin = hostname->first + std::string_view("<entry name='opt/berth/hostname'>").size();
    x.xml().replace(begin, hostname->second - std::string_view("</entry>").size() - begin, EscapeMarkup(spec.hostname));
  }
  // The console's file, in <serial> and in <console>.
  for (auto [open, close] : {std::pair{"<serial type='file'>", "</serial>"}, std::pair{"<console type='file'>", "</console>"}}) {
    auto block = x.Find(open, close);
    if (!block) return Fail(XmlEdit::Missing(open).error());
    if (auto done = x.Attribute("<source ", "path", spec.serial_log, *block); !ok(done)) return Fail(done.error());
  }
  // The VNC server's socket: on <graphics> itself (a save image's XML has only that: libvirt
  // leaves the <listen> out of the migratable form, measured), and on its <listen> where
  // there is one (the live form has both).
  auto graphics = x.Find("<graphics type='vnc'", "</graphics>");
  if (!graphics) return Fail(XmlEdit::Missing("<graphics type='vnc'>").error());
  bool listen = x.Find("<listen type='socket'", "/>", graphics->first).has_value() &&
                x.Find("<listen type='socket'", "/>", graphics->first)->second <= graphics->second;
  if (!x.HasAttribute("<graphics type='vnc'", "socket") && !listen) {
    return Fail(XmlEdit::Missing("<graphics type='vnc'> socket").error());
  }
  if (x.HasAttribute("<graphics type='vnc'", "socket")) {
    if (auto done = x.Attribute("<graphics type='vnc'", "socket", spec.vnc_socket, kAll); !ok(done)) return Fail(done.error());
  }
  if (listen) {
    auto block = x.Find("<graphics type='vnc'", "</graphics>");
    if (auto done = x.Attribute("<listen type='socket'", "socket", spec.vnc_socket, *block); !ok(done)) {
      return Fail(done.error());
    }
  }
  if (spec.agent_channel == AgentChannel::kVsock) {
    auto vsock = x.Find("<vsock ", "</vsock>");
    if (!vsock) return Fail(XmlEdit::Missing("<vsock>").error());
    if (auto done = x.Attribute("<cid ", "address", std::to_string(spec.vsock_cid), *vsock); !ok(done)) {
      return Fail(done.error());
    }
  }
  // QEMU's uid: the new workspace's, for the process and (in libvirt's live XML) its images.
  if (spec.run_as_uid != 0) {
    std::string label = fmt::format("+{}:+{}", spec.run_as_uid, spec.run_as_gid);
    for (std::string_view element : {"label", "imagelabel"}) {
      auto seclabel = x.Find("<seclabel type='static' model='dac'", "</seclabel>");
      if (!seclabel) return Fail(XmlEdit::Missing("<seclabel type='static' model='dac'>").error());
      if (element == "imagelabel" && !x.Find("<imagelabel>", "</imagelabel>", seclabel->first)) break;
      if (auto done = x.Text(element, label, *seclabel); !ok(done)) return Fail(done.error());
    }
  }
  // The NIC's arguments: the value after -netdev and the one after -device (libvirt passes
  // them to QEMU as they are and checks neither).
  auto [netdev, nic] = NicArgs(spec);
  for (auto [flag, value] : {std::pair{"-netdev", std::string_view(netdev)}, std::pair{"-device", std::string_view(nic)}}) {
    std::string flag_tag = fmt::format("<qemu:arg value='{}'/>", flag);
    auto at = x.Find(flag_tag, "/>");
    if (!at) return Fail(XmlEdit::Missing(flag_tag).error());
    if (auto done = x.Attribute("<qemu:arg ", "value", value, {at->second, x.xml().find("/>", at->second) + 2}); !ok(done)) {
      return Fail(done.error());
    }
  }
  return std::move(x.xml());
}

}  // namespace berth::hypervisor
