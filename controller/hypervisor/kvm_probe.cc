#include "controller/hypervisor/kvm_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/child_fds.h"


namespace berth::hypervisor {
namespace {

namespace fs = std::filesystem;

// mov dx,0x3f8; mov al,'K'; out dx,al; mov al,1; out 0xf4,al (isa-debug-exit); hlt; jmp $
constexpr unsigned char kCode[] = {0xBA, 0xF8, 0x03, 0xB0, 0x4B, 0xEE, 0xB0, 0x01,
                                   0xE6, 0xF4, 0xF4, 0xEB, 0xFD};

struct Run {
  bool ran = false;  // exited through isa-debug-exit with status 3 and wrote 'K'
  double seconds = 0;
  std::string why;
};

Run Boot(const std::string& qemu, const fs::path& dir, const std::string& accel, bool host_cpu,
         std::chrono::milliseconds timeout) {
  Run out;
  auto serial = dir / ("serial-" + accel);
  std::vector<std::string> argv = {qemu, "-accel", accel, "-display", "none", "-nodefaults",
                                   "-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
                                   "-m", "16", "-serial", "file:" + serial.string(),
                                   "-drive", "file=" + (dir / "boot.img").string() + ",format=raw,if=ide"};
  if (host_cpu) {
    argv.push_back("-cpu");
    argv.push_back("host");
  }
  auto t0 = std::chrono::steady_clock::now();
  auto spawned = SpawnClean(argv, -1, -1);
  if (!spawned) {
    out.why = fmt::format("cannot run {}: {}", qemu, spawned.error().message);
    return out;
  }
  pid_t pid = *spawned;
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() - t0 > timeout) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      out.why = fmt::format("the probe guest did not finish within {} ms under {}", timeout.count(), accel);
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream in(serial);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // isa-debug-exit makes QEMU exit with (1 << 1) | 1 once the guest ran.
  out.ran = WIFEXITED(status) && WEXITSTATUS(status) == 3 && written.find('K') != std::string::npos;
  if (!out.ran) out.why = fmt::format("QEMU under {} failed the probe guest (status {})", accel, status);
  return out;
}

}  // namespace

Result<KvmProbe> ProbeKvm(std::chrono::milliseconds budget, const std::string& qemu) {
  if (access("/dev/kvm", R_OK | W_OK) != 0) {
    return Fail(ErrorCode::kUnavailable, "/dev/kvm is missing or not accessible");
  }
  char tmpl[] = "/tmp/berth-kvm-probe-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Fail(ErrnoError(errno, "mkdtemp"));
  fs::path dir = tmpl;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  {
    std::string image(reinterpret_cast<const char*>(kCode), sizeof kCode);
    image.resize(510, '\0');
    image += "\x55\xaa";
    std::ofstream(dir / "boot.img", std::ios::binary) << image;
  }
  auto tcg = Boot(qemu, dir, "tcg", false, std::chrono::seconds(10));
  // A working KVM runs this in about the time QEMU takes to start, as TCG does; one that takes
  // five times as long (seen: 13 s against 0.3 s, and 1.4 s against 0.1 s) is a shim that will
  // not run a Linux guest usefully. The limit is the larger of 5x TCG's time and TCG's plus
  // 0.5 s (as berth_accel's), within the budget.
  std::chrono::milliseconds limit = budget;
  if (tcg.ran) {
    auto tcg_ms = static_cast<int64_t>(tcg.seconds * 1000);
    limit = std::min(budget, std::chrono::milliseconds(std::max(tcg_ms * 5, tcg_ms + 500)));
  }
  auto kvm = Boot(qemu, dir, "kvm", true, limit);
  if (!kvm.ran) return Fail(ErrorCode::kUnavailable, kvm.why);
  return KvmProbe{kvm.seconds, tcg.seconds};
}

}  // namespace berth::hypervisor
