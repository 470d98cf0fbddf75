#include "tests/support/test_berthd.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "tests/support/test_agent.h"

namespace berth::testing {

namespace fs = std::filesystem;

std::string AgentBinary() {
  const char* bin = std::getenv("BERTH_AGENT_BIN");
  if (bin == nullptr || access(bin, X_OK) != 0) {
    throw std::runtime_error("BERTH_AGENT_BIN must name the berth-agent binary");
  }
  return bin;
}

void MakeFakeImage(const fs::path& images_dir, const std::string& name) {
  fs::path dir = images_dir / name / "v1";
  fs::create_directories(dir);
  std::string cmd = "qemu-img create -q -f qcow2 " + (dir / "disk.qcow2").string() + " 1G";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("qemu-img failed");
  std::ofstream(dir / "vmlinuz") << "";
  std::ofstream(dir / "initrd.img") << "";
  std::ofstream(dir / "image.json") << "{}";
  std::error_code ec;
  fs::create_directory_symlink("v1", images_dir / name / "current", ec);
}

TestBerthd::TestBerthd(const std::function<void(Config&)>& customize) : dir_("berthd-test") {
  MakeFakeImage(dir_.path() / "images");
  config_.listen = "127.0.0.1:0";
  config_.data_dir = dir_.path();
  config_.libvirt_uri = "test:///default";
  config_.transport = "unix";
  config_.accel = "tcg";
  config_.agent_binary = AgentBinary();
  config_.agent_user = CurrentUserName();
  config_.boot_timeout_s = 20;
  config_.stop_grace_s = 2;
  config_.idle_poll_ms = 200;
  config_.reconcile_every_s = 3600;  // tests call it themselves when they mean it
  // Tests do not depend on the free space of the machine they run on (the disk floor's own
  // test sets one, with a fake free space).
  config_.min_free_disk = workspace::DiskFloor{0, 0.0};
  // Nor do berthd's default limits stand in the way of tests that make many workspaces; the
  // quota tests set tenants' own limits, or these by `customize`.
  config_.limits = workspace::Limits{workspace::kMaxLimit, workspace::kMaxLimit,
                                     workspace::kMaxLimit, workspace::kMaxLimit};
  if (customize) customize(config_);
  daemon_ = std::make_unique<Daemon>(config_);
  if (auto s = daemon_->Start(); !s) throw std::runtime_error("berthd: " + s.error().message);
  std::ifstream in(daemon_->admin_key_file());
  std::getline(in, admin_key_);
}

TestBerthd::~TestBerthd() {
  daemon_.reset();
  // berthd leaves workspaces running when it stops (VMs outlive it); here they are host
  // agents, which must not outlive the test. Only processes that name our directory.
  std::string marker = dir_.path().string();
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(marker) != std::string::npos && cmdline.find("berth-agent") != std::string::npos) {
      kill(std::stoi(pid), SIGKILL);
      waitpid(std::stoi(pid), nullptr, 0);
    }
  }
}

void TestBerthd::Restart() {
  daemon_.reset();
  daemon_ = std::make_unique<Daemon>(config_);
  if (auto s = daemon_->Start(); !s) throw std::runtime_error("berthd: " + s.error().message);
}

}  // namespace berth::testing
