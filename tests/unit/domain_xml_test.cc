// Golden-file tests of the domain XML (libvirt's qemuxml2argvtest style): any change to the
// XML shows up as a diff to review. BERTH_UPDATE_GOLDEN=1 rewrites the files.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <catch2/catch.hpp>

#include "controller/hypervisor/domain_spec.h"
#include "controller/hypervisor/domain_spec_json.h"

using namespace berth::hypervisor;

namespace {

std::string GoldenPath(const std::string& name) {
  return std::string(BERTH_SOURCE_DIR) + "/tests/unit/golden/" + name;
}

void CheckGolden(const std::string& name, const std::string& actual) {
  if (std::getenv("BERTH_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(GoldenPath(name)) << actual;
  }
  std::ifstream in(GoldenPath(name));
  REQUIRE(in.good());
  std::stringstream expected;
  expected << in.rdbuf();
  CHECK(actual == expected.str());
}

DomainSpec BaseSpec() {
  DomainSpec spec;
  spec.name = "berth-ws_0123456789ab";
  spec.uuid = "6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
  spec.vcpus = 2;
  spec.memory_mib = 2048;
  spec.kernel = "/var/lib/berth/images/base/abc123/vmlinuz";
  spec.initrd = "/var/lib/berth/images/base/abc123/initrd.img";
  spec.root_disk = "/var/lib/berth/workspaces/ws_0123456789ab/root.qcow2";
  spec.data_disk = "/var/lib/berth/workspaces/ws_0123456789ab/data.qcow2";
  spec.token_file = "/var/lib/berth/run/ws_0123456789ab/token";
  spec.hostname = "my-project";
  spec.serial_log = "/var/lib/berth/workspaces/ws_0123456789ab/serial.log";
  spec.vnc_socket = "/var/lib/berth/run/ws_0123456789ab/vnc.sock";
  spec.mac = "52:54:00:12:34:56";
  // Every VM transport sets these, isolated or not (the gid is Debian's kvm group).
  spec.run_as_uid = 2000007;
  spec.run_as_gid = 107;
  return spec;
}

}  // namespace

TEST_CASE("domain XML: KVM with vsock and passt", "[xml]") {
  DomainSpec spec = BaseSpec();
  spec.accel = Accel::kKvm;
  spec.agent_channel = AgentChannel::kVsock;
  spec.vsock_cid = 1000;
  spec.passt_socket = "/var/lib/berth/run/ws_0123456789ab/passt.sock";
  std::string xml = RenderDomainXml(spec);
  CHECK(xml.find("<domain type='kvm'") == 0);
  CHECK(xml.find("<cid auto='no' address='1000'/>") != std::string::npos);
  CHECK(xml.find("tb-cache") == std::string::npos);
  CheckGolden("domain_kvm_vsock.xml", xml);
}

TEST_CASE("domain XML: TCG with the forward transport over slirp", "[xml]") {
  DomainSpec spec = BaseSpec();
  spec.accel = Accel::kTcg;
  spec.agent_channel = AgentChannel::kForward;
  spec.forward_port = 40123;
  std::string xml = RenderDomainXml(spec);
  CHECK(xml.find("<domain type='qemu'") == 0);
  CHECK(xml.find("<vsock") == std::string::npos);
  CHECK(xml.find("hostfwd=tcp:127.0.0.1:40123-:1024") != std::string::npos);
  CheckGolden("domain_tcg_forward.xml", xml);
}

TEST_CASE("domain XML: TCG with the forward transport over passt", "[xml]") {
  DomainSpec spec = BaseSpec();
  spec.passt_socket = "/var/lib/berth/run/ws_0123456789ab/passt.sock";
  std::string xml = RenderDomainXml(spec);
  CHECK(xml.find("stream,id=n0,server=off,addr.type=unix") != std::string::npos);
  CHECK(xml.find("hostfwd") == std::string::npos);
  CheckGolden("domain_tcg_passt.xml", xml);
}

TEST_CASE("domain XML: the token is referenced by file, never inline, and text is escaped",
          "[xml]") {
  DomainSpec spec = BaseSpec();
  spec.hostname = "a<b>&'c\"";
  std::string xml = RenderDomainXml(spec);
  CHECK(xml.find("<entry name='opt/berth/token' file='/var/lib/berth/run/ws_0123456789ab/token'/>") !=
        std::string::npos);
  CHECK(xml.find("a&lt;b&gt;&amp;&apos;c&quot;") != std::string::npos);
  CHECK(xml.find("a<b>") == std::string::npos);
}

TEST_CASE("domain XML: QEMU runs as the workspace's own uid, relabelling nothing", "[xml]") {
  DomainSpec spec = BaseSpec();
  spec.passt_socket = "/var/lib/berth/workspaces/ws_0123456789ab/run/passt.sock";
  std::string xml = RenderDomainXml(spec);
  CHECK(xml.find("<seclabel type='static' model='dac' relabel='no'>\n"
                 "    <label>+2000007:+107</label>\n"
                 "  </seclabel>") != std::string::npos);
  // One seclabel, a child of <domain>, after the devices; no per-disk relabel could chown the
  // shared backing file.
  CHECK(xml.find("</devices>") < xml.find("<seclabel"));
  CHECK(xml.find("<seclabel") == xml.rfind("<seclabel"));
  CHECK(xml.find("relabel='yes'") == std::string::npos);
  CHECK(xml.find("<label>+2000007:+107</label>") == xml.rfind("<label>"));
}

TEST_CASE("domain XML: no seclabel without a workspace uid (a spec that runs no QEMU)", "[xml]") {
  DomainSpec spec = BaseSpec();
  spec.run_as_uid = 0;
  spec.run_as_gid = 0;
  spec.passt_socket = "/var/lib/berth/run/ws_0123456789ab/passt.sock";
  CHECK(RenderDomainXml(spec).find("seclabel") == std::string::npos);
}

// `berthd domain-xml` (images/lib/vm.sh boots the image checks through it) reads the spec as
// JSON: the same fields give the same XML as the spec berthd builds itself.
TEST_CASE("domain spec JSON: every field read gives the XML of the same DomainSpec", "[xml][json]") {
  DomainSpec spec = BaseSpec();
  spec.accel = Accel::kKvm;
  spec.agent_channel = AgentChannel::kVsock;
  spec.vsock_cid = 1000;
  spec.passt_socket = "/var/lib/berth/run/ws_0123456789ab/passt.sock";
  spec.cmdline = "root=/dev/vda rw console=ttyS0";
  spec.screen = "1024x768";
  spec.agent_port = 2024;
  nlohmann::json j = {
      {"name", spec.name}, {"uuid", spec.uuid}, {"vcpus", 2}, {"memory_mib", 2048},
      {"accel", "kvm"}, {"kernel", spec.kernel}, {"initrd", spec.initrd},
      {"cmdline", spec.cmdline}, {"root_disk", spec.root_disk}, {"data_disk", spec.data_disk},
      {"token_file", spec.token_file}, {"hostname", spec.hostname}, {"screen", "1024x768"},
      {"serial_log", spec.serial_log}, {"vnc_socket", spec.vnc_socket},
      {"agent_channel", "vsock"}, {"vsock_cid", 1000}, {"passt_socket", spec.passt_socket},
      {"agent_port", 2024}, {"mac", spec.mac}, {"run_as_uid", 2000007}, {"run_as_gid", 107}};
  auto read = DomainSpecFromJson(j);
  REQUIRE(read.has_value());
  CHECK(RenderDomainXml(*read) == RenderDomainXml(spec));

  // The image checks' shape: TCG, QEMU's user network forwarding a port, the golden XML's.
  DomainSpec slirp = BaseSpec();
  slirp.forward_port = 40123;
  nlohmann::json k = j;
  k.erase("agent_channel"), k.erase("vsock_cid"), k.erase("passt_socket"), k.erase("agent_port");
  k.erase("cmdline"), k.erase("screen");
  k["accel"] = "tcg";
  k["forward_port"] = 40123;
  auto forward = DomainSpecFromJson(k);
  REQUIRE(forward.has_value());
  CHECK(RenderDomainXml(*forward) == RenderDomainXml(slirp));
}

TEST_CASE("domain spec JSON: unknown keys, wrong types and missing fields are refused by name",
          "[xml][json]") {
  nlohmann::json ok = {{"name", "berth-check-base-1"}, {"kernel", "/i/vmlinuz"},
                       {"root_disk", "/v/root.qcow2"}, {"token_file", "/v/token"},
                       {"forward_port", 40000}};
  REQUIRE(DomainSpecFromJson(ok).has_value());
  auto refused = [&](nlohmann::json j, std::string_view says) {
    auto r = DomainSpecFromJson(j);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == berth::ErrorCode::kInvalidArgument);
    INFO(r.error().message);
    CHECK(r.error().message.find(says) != std::string::npos);
  };
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json j = ok;
    j[key] = std::move(value);
    return j;
  };
  refused(with("memroy_mib", 512), "memroy_mib: not a field");
  refused(with("vcpus", "2"), "vcpus: want an integer");
  refused(with("vcpus", 0), "vcpus: want an integer in [1,");
  refused(with("forward_port", 70000), "forward_port: want an integer in [1, 65535]");
  refused(with("run_as_uid", -1), "run_as_uid: want an integer");
  refused(with("accel", "hvf"), "accel: want kvm or tcg");
  refused(with("agent_channel", "serial"), "agent_channel: want forward or vsock");
  refused(with("kernel", 7), "kernel: want a string");
  nlohmann::json no_net = ok;
  no_net.erase("forward_port");
  refused(no_net, "needs passt_socket or forward_port");
  nlohmann::json no_token = ok;
  no_token.erase("token_file");
  refused(no_token, "needs name, kernel, root_disk and token_file");
  refused(nlohmann::json::array(), "a domain spec is a JSON object");
}

TEST_CASE("disk snapshot XML: both disks external onto the given files, no memory", "[xml][checkpoints]") {
  SnapshotSpec snapshot;
  snapshot.name = "cp_0123456789abcdef";
  snapshot.root_disk = "/var/lib/berth/workspaces/ws_0123456789ab/root.g3.qcow2";
  snapshot.data_disk = "/var/lib/berth/workspaces/ws_0123456789ab/data.g3.qcow2";
  CheckGolden("disk_snapshot.xml", RenderSnapshotXml(snapshot));
}

TEST_CASE("snapshot XML with memory: the memory to its own file, external, beside both disks", "[xml][checkpoints]") {
  SnapshotSpec snapshot;
  snapshot.name = "cp_0123456789abcdef";
  snapshot.root_disk = "/var/lib/berth/workspaces/ws_0123456789ab/root.g3.qcow2";
  snapshot.data_disk = "/var/lib/berth/workspaces/ws_0123456789ab/data.g3.qcow2";
  snapshot.memory_file = "/var/lib/berth/workspaces/ws_0123456789ab/checkpoints/cp_0123456789abcdef/memory.save";
  std::string xml = RenderSnapshotXml(snapshot);
  CHECK(xml.find("<memory snapshot='no'/>") == std::string::npos);
  CheckGolden("memory_snapshot.xml", xml);
}

TEST_CASE("retarget disks: the named disks' own files change and their chains go; the rest is as it was",
          "[xml][checkpoints]") {
  std::string saved = R"(<domain type='qemu'>
  <name>berth-ws_1</name>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/w/ws_1/root.g2.qcow2' index='3'/>
      <backingStore type='file' index='2'>
        <format type='qcow2'/>
        <source file='/w/ws_1/root.g1.qcow2'/>
        <backingStore type='file' index='1'>
          <format type='qcow2'/>
          <source file='/images/base/disk.qcow2'/>
          <backingStore/>
        </backingStore>
      </backingStore>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/w/ws_1/data.g2.qcow2'/>
      <backingStore/>
      <target dev='vdb' bus='virtio'/>
      <serial>berth-data</serial>
    </disk>
    <disk type='file' device='cdrom'>
      <source file='/isos/x.iso'/>
      <target dev='sda' bus='sata'/>
    </disk>
  </devices>
</domain>
)";
  auto out = RetargetDisks(saved, {{"vda", "/w/ws_1/root.g3.qcow2"}, {"vdb", "/w/ws_1/it's.qcow2"}});
  REQUIRE(out.has_value());
  auto sources = ParseDiskSources(*out);
  CHECK(sources.at("vda") == "/w/ws_1/root.g3.qcow2");
  CHECK(sources.at("vdb") == "/w/ws_1/it's.qcow2");
  CHECK(sources.at("sda") == "/isos/x.iso");
  CHECK(out->find("backingStore") == std::string::npos);
  CHECK(out->find("root.g1") == std::string::npos);
  CHECK(out->find("it&apos;s.qcow2") != std::string::npos);
  CHECK(out->find("<serial>berth-data</serial>") != std::string::npos);
  CHECK(out->find("<name>berth-ws_1</name>") != std::string::npos);
  CHECK(out->ends_with("</domain>\n"));
  // A disk it does not have is an error, not a silent no-op.
  auto missing = RetargetDisks(saved, {{"vdc", "/x"}});
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == berth::ErrorCode::kNotFound);
}

TEST_CASE("disk sources: each disk's own file from libvirt's live XML, not its backing layers'", "[xml][checkpoints]") {
  // As libvirt 9.0 writes a running domain's disks: the backing chain nested under the top,
  // and <target> after it.
  std::string live = R"(<domain type='qemu' id='7'>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='writeback' discard='unmap'/>
      <source file='/var/lib/berth/workspaces/ws_1/root.g2.qcow2' index='3'/>
      <backingStore type='file' index='2'>
        <format type='qcow2'/>
        <source file='/var/lib/berth/workspaces/ws_1/root.g1.qcow2'/>
        <backingStore type='file' index='1'>
          <format type='qcow2'/>
          <source file='/var/lib/berth/images/base/v1/disk.qcow2'/>
          <backingStore/>
        </backingStore>
      </backingStore>
      <target dev='vda' bus='virtio'/>
      <serial>berth-root</serial>
    </disk>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/data/it&apos;s &amp; more/data.g2.qcow2' index='4'/>
      <backingStore/>
      <target dev='vdb' bus='virtio'/>
    </disk>
    <disk type='network' device='cdrom'>
      <source protocol='nbd' name='x'/>
      <target dev='sda' bus='sata'/>
    </disk>
  </devices>
</domain>
)";
  auto sources = ParseDiskSources(live);
  CHECK(sources == std::map<std::string, std::string>{{"vda", "/var/lib/berth/workspaces/ws_1/root.g2.qcow2"},
                                                      {"vdb", "/data/it's & more/data.g2.qcow2"}});
  // Our own domain XML (inactive, no chain) reads the same way.
  DomainSpec spec = BaseSpec();
  auto own = ParseDiskSources(RenderDomainXml(spec));
  CHECK(own.at("vda") == spec.root_disk);
  CHECK(own.at("vdb") == spec.data_disk);
  CHECK(ParseDiskSources("<domain><devices><disk type='file'><source file='/x'/>").empty());
}

namespace {

std::string ReadGolden(const std::string& name) {
  std::ifstream in(GoldenPath(name));
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

size_t Count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The fork's spec, as berthd would render it: every name, file, id and port its own.
DomainSpec ForkSpec() {
  DomainSpec spec = BaseSpec();
  spec.name = "berth-ws_fork00000002";
  spec.uuid = "99999999-8888-4777-8666-555555555555";
  spec.accel = Accel::kKvm;
  spec.agent_channel = AgentChannel::kVsock;
  spec.vsock_cid = 1042;
  spec.root_disk = "/var/lib/berth/workspaces/ws_fork00000002/root.qcow2";
  spec.data_disk = "/var/lib/berth/workspaces/ws_fork00000002/data.qcow2";
  spec.token_file = "/var/lib/berth/run/ws_fork00000002/token";
  spec.hostname = "fork-2";
  spec.serial_log = "/var/lib/berth/workspaces/ws_fork00000002/serial.log";
  spec.vnc_socket = "/var/lib/berth/run/ws_fork00000002/vnc.sock";
  spec.passt_socket = "/var/lib/berth/run/ws_fork00000002/passt.sock";
  spec.mac = "52:54:00:00:00:02";
  spec.run_as_uid = 2000042;
  spec.run_as_gid = 107;
  return spec;
}

}  // namespace

TEST_CASE("domain XML: every machine has a generation ID device (a resumed memory can reseed its guest)", "[xml]") {
  CHECK(Count(RenderDomainXml(BaseSpec()), "<genid/>") == 1);
}

TEST_CASE("rebind: a saved machine becomes the fork's: identity, files, uid and NIC; devices and addresses stay",
          "[xml][checkpoints]") {
  // The live form of a KVM machine with vsock and passt: <graphics> with its socket both as an
  // attribute and on its <listen>, and the seclabel's image label.
  std::string saved = ReadGolden("saved_machine_vsock.xml");
  REQUIRE(saved.find("ws_parent0001") != std::string::npos);
  auto out = RebindDomainXml(saved, ForkSpec(), "abcdefab-cdef-4abc-8def-abcdefabcdef");
  REQUIRE(out.has_value());
  CheckGolden("rebound_machine_vsock.xml", *out);
  // Nothing of the parent is left: no path, name, port, CID, uid or MAC of it.
  CHECK(out->find("ws_parent0001") == std::string::npos);
  CHECK(out->find("11111111-2222") == std::string::npos);
  CHECK(out->find("0f0e0d0c") == std::string::npos);
  CHECK(out->find("1007") == std::string::npos);
  CHECK(out->find("2000007") == std::string::npos);
  CHECK(out->find("00:00:01") == std::string::npos);
  CHECK(out->find("backingStore") == std::string::npos);
  CHECK(Count(*out, "<genid>abcdefab-cdef-4abc-8def-abcdefabcdef</genid>") == 1);
  CHECK(Count(*out, "+2000042:+107") == 2);  // the label and the image label
  CHECK(Count(*out, "/var/lib/berth/run/ws_fork00000002/vnc.sock") == 2);
  CHECK(ParseDiskSources(*out) == std::map<std::string, std::string>{
                                      {"vda", "/var/lib/berth/workspaces/ws_fork00000002/root.qcow2"},
                                      {"vdb", "/var/lib/berth/workspaces/ws_fork00000002/data.qcow2"}});
  // The machine QEMU loads the device state into is the image's: every address and model.
  CHECK(Count(*out, "<address ") == Count(saved, "<address "));
  CHECK(out->find("<controller type='usb' index='0' model='piix3-uhci'>") != std::string::npos);
  CHECK(out->find("machine='pc-i440fx-7.2'") != std::string::npos);
  // The same workspace again (an in-place restore) changes only the genid and the disks.
  auto self = RebindDomainXml(saved, [] {
    DomainSpec spec = ForkSpec();
    spec.name = "berth-ws_parent0001";
    spec.uuid = "11111111-2222-4333-8444-555555555555";
    return spec;
  }(), "0f0e0d0c-0b0a-4908-8706-050403020100");
  REQUIRE(self.has_value());
  CHECK(self->find("<name>berth-ws_parent0001</name>") != std::string::npos);
}

TEST_CASE("rebind: the machine in a real save image (libvirt 9.0, the forward transport) becomes the fork's",
          "[xml][checkpoints]") {
  // saved_machine_forward.xml is the header XML of an image `virsh save` wrote of berthd's own
  // TCG machine (paths and ids replaced): the migratable form, whose <graphics> has its
  // socket as an attribute and no <listen>, and whose seclabel has no image label.
  std::string saved = ReadGolden("saved_machine_forward.xml");
  DomainSpec spec = ForkSpec();
  spec.accel = Accel::kTcg;
  spec.agent_channel = AgentChannel::kForward;
  spec.passt_socket.clear();
  spec.forward_port = 40124;
  auto out = RebindDomainXml(saved, spec, "abcdefab-cdef-4abc-8def-abcdefabcdef");
  REQUIRE(out.has_value());
  CheckGolden("rebound_machine_forward.xml", *out);
  CHECK(out->find("ws_parent0001") == std::string::npos);
  CHECK(out->find("11111111-2222") == std::string::npos);
  CHECK(out->find("2000007") == std::string::npos);
  CHECK(out->find("00:00:01") == std::string::npos);
  CHECK(out->find("<graphics type='vnc' socket='/var/lib/berth/run/ws_fork00000002/vnc.sock'>") != std::string::npos);
  CHECK(out->find("<label>+2000042:+107</label>") != std::string::npos);
  CHECK(out->find("hostfwd=tcp:127.0.0.1:40124-:1024") != std::string::npos);
  CHECK(Count(*out, "<address ") == Count(saved, "<address "));
}

TEST_CASE("rebind: the forward transport's NIC gets the fork's forwarded port and MAC", "[xml][checkpoints]") {
  std::string saved = ReadGolden("saved_machine_vsock.xml");
  DomainSpec spec = ForkSpec();
  spec.passt_socket.clear();
  spec.forward_port = 40123;
  spec.agent_channel = AgentChannel::kForward;
  auto out = RebindDomainXml(saved, spec, "abcdefab-cdef-4abc-8def-abcdefabcdef");
  REQUIRE(out.has_value());
  CHECK(out->find("<qemu:arg value='user,id=n0,hostfwd=tcp:127.0.0.1:40123-:1024'/>") != std::string::npos);
  CHECK(out->find("<qemu:arg value='virtio-net-pci,netdev=n0,addr=0x18,mac=52:54:00:00:00:02'/>") != std::string::npos);
  CHECK(out->find("passt.sock") == std::string::npos);
}

TEST_CASE("rebind: a path with markup in it is escaped, not spliced into the XML", "[xml][checkpoints]") {
  DomainSpec spec = ForkSpec();
  spec.serial_log = "/srv/it's <here>/serial.log";
  auto out = RebindDomainXml(ReadGolden("saved_machine_vsock.xml"), spec, "abcdefab-cdef-4abc-8def-abcdefabcdef");
  REQUIRE(out.has_value());
  CHECK(Count(*out, "<source path='/srv/it&apos;s &lt;here&gt;/serial.log'/>") == 2);
}

TEST_CASE("rebind: an image without a generation ID device is refused: its guest could not know to reseed",
          "[xml][checkpoints]") {
  std::string saved = ReadGolden("saved_machine_vsock.xml");
  size_t at = saved.find("  <genid>");
  saved.erase(at, saved.find('\n', at) + 1 - at);
  auto out = RebindDomainXml(saved, ForkSpec(), "abcdefab-cdef-4abc-8def-abcdefabcdef");
  REQUIRE_FALSE(out.has_value());
  CHECK(out.error().code == berth::ErrorCode::kFailedPrecondition);
  CHECK(out.error().message.find("generation ID") != std::string::npos);
}

TEST_CASE("rebind: a machine without an element berthd's have is refused, naming it", "[xml][checkpoints]") {
  for (auto [cut_from, cut_to, named] :
       {std::tuple{"    <graphics", "</graphics>\n", "graphics"}, std::tuple{"    <vsock", "</vsock>\n", "vsock"},
        std::tuple{"    <entry name='opt/berth/token'", "/>\n", "opt/berth/token"},
        std::tuple{"    <qemu:arg value='-netdev'/>", "/>\n", "-netdev"}}) {
    std::string saved = ReadGolden("saved_machine_vsock.xml");
    size_t at = saved.find(cut_from);
    REQUIRE(at != std::string::npos);
    saved.erase(at, saved.find(cut_to, at) + std::string_view(cut_to).size() - at);
    auto out = RebindDomainXml(saved, ForkSpec(), "abcdefab-cdef-4abc-8def-abcdefabcdef");
    INFO(named);
    REQUIRE_FALSE(out.has_value());
    CHECK(out.error().code == berth::ErrorCode::kFailedPrecondition);
    CHECK(out.error().message.find(named) != std::string::npos);
  }
}

TEST_CASE("attached disk XML: a qcow2 on the given file, its serial, a user alias and a pinned PCI slot",
          "[xml][checkpoints]") {
  DiskAttachment disk{.file = "/var/lib/berth/workspaces/ws_1/diff.from-root.qcow2", .target = "vdw",
                      .serial = "berth-from-root", .pci_slot = 0x1c};
  CheckGolden("attached_disk.xml", RenderDiskXml(disk));
  // Text is escaped like the domain's.
  disk.file = "/x/it's <a>.qcow2";
  CHECK(RenderDiskXml(disk).find("<source file='/x/it&apos;s &lt;a&gt;.qcow2'/>") != std::string::npos);
}

TEST_CASE("disk alias: the alias of the disk with a target, past its backing chain; none for a missing one",
          "[xml][checkpoints]") {
  std::string live = R"(<domain type='qemu' id='7'>
  <devices>
    <disk type='file' device='disk'>
      <source file='/w/root.g2.qcow2' index='3'/>
      <backingStore type='file' index='2'>
        <format type='qcow2'/>
        <source file='/w/root.g1.qcow2'/>
        <backingStore/>
      </backingStore>
      <target dev='vda' bus='virtio'/>
      <alias name='virtio-disk0'/>
    </disk>
    <disk type='file' device='disk'>
      <source file='/w/diff.from-root.qcow2' index='5'/>
      <backingStore type='file' index='6'>
        <format type='qcow2'/>
        <source file='/w/root.g1.qcow2'/>
        <backingStore/>
      </backingStore>
      <target dev='vdw' bus='virtio'/>
      <serial>berth-from-root</serial>
      <alias name='ua-berth-from-root'/>
    </disk>
  </devices>
</domain>
)";
  CHECK(DiskAlias(live, "vda") == "virtio-disk0");
  CHECK(DiskAlias(live, "vdw") == "ua-berth-from-root");
  CHECK_FALSE(DiskAlias(live, "vdx").has_value());
  CHECK(ParseDiskSources(live).at("vdw") == "/w/diff.from-root.qcow2");
}
