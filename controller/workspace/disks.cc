#include "controller/workspace/disks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

#include "common/child_fds.h"
#include "common/unique.h"


namespace berth::workspace {

Status RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Fail(ErrnoError(errno, "pipe"));
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  // It dies with berthd (setpriv's parent-death signal, kept across its exec): a qemu-img
  // left running by a killed berthd would go on changing a chain the next berthd reconciles
  // at its start, and hold the image's lock meanwhile. Every command here is safe to cut
  // short (a layer made under a temporary name, a rebase in safe mode).
  std::vector<std::string> wrapped = {"setpriv", "--pdeathsig", "KILL", "--"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  auto spawned = SpawnClean(wrapped, write_end.get(), write_end.get());
  write_end.reset();
  if (!spawned) return Fail(spawned.error());
  pid_t pid = *spawned;

  std::string output;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(read_end.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (output.size() < 8192) output.append(buf, static_cast<size_t>(got));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (timed_out) {
    return Fail(ErrorCode::kDeadlineExceeded,
                fmt::format("{} did not finish within {} s", argv[0], timeout.count()));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail(ErrorCode::kInternal, fmt::format("{} failed: {}", argv[0], output));
  }
  return {};
}

Status CreateOverlay(const std::filesystem::path& backing, const std::filesystem::path& path) {
  return RunCommand({"qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                     backing.string(), path.string()},
                    std::chrono::seconds(60));
}

Status CreateBlankDisk(const std::filesystem::path& path, int size_gib) {
  return RunCommand({"qemu-img", "create", "-q", "-f", "qcow2", path.string(),
                     fmt::format("{}G", size_gib)},
                    std::chrono::seconds(60));
}

Status GrowDisk(const std::filesystem::path& path, int size_gib) {
  // qcow2 header: magic "QFI\xfb" at 0, the virtual size in bytes (big-endian) at 24.
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  unsigned char header[32] = {};
  // Not a qcow2 file (a stand-in in unit tests): nothing to grow; QEMU refuses a real one.
  if (!in.read(reinterpret_cast<char*>(header), sizeof(header))) return {};
  if (header[0] != 'Q' || header[1] != 'F' || header[2] != 'I' || header[3] != 0xfb) return {};
  uint64_t size = 0;
  for (int i = 24; i < 32; ++i) size = (size << 8) | header[i];
  uint64_t want = static_cast<uint64_t>(size_gib) << 30;
  if (size >= want) return {};
  return RunCommand({"qemu-img", "resize", "-q", "-f", "qcow2", path.string(), fmt::format("{}G", size_gib)},
                    std::chrono::seconds(60));
}

std::optional<std::string> BackingFile(const std::filesystem::path& layer) {
  std::ifstream in(layer, std::ios::binary);
  unsigned char header[20];
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) return std::nullopt;
  auto be = [&](int at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | header[at + i];
    return v;
  };
  if (be(0, 4) != 0x514649fb) return std::nullopt;  // "QFI\xfb"
  uint64_t offset = be(8, 8);
  uint64_t size = be(16, 4);
  if (offset == 0 || size == 0) return std::string();
  if (size > 1023) return std::nullopt;  // the format's own limit
  std::string name(size, '\0');
  if (!in.seekg(static_cast<std::streamoff>(offset)) || !in.read(name.data(), static_cast<std::streamsize>(size))) {
    return std::nullopt;
  }
  return name;
}

}  // namespace berth::workspace
