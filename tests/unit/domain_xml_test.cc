// Golden-file tests of the domain XML (libvirt's qemuxml2argvtest style): any change to the
// XML shows up as a diff to review. BERTH_UPDATE_GOLDEN=1 rewrites the files.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "controller/hypervisor/domain_spec.h"

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
