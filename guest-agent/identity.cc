#include "guest-agent/identity.h"

#include <fcntl.h>
#include <signal.h>
#include <linux/random.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

extern char** environ;

namespace berth::agent {
namespace {

namespace fs = std::filesystem;

Error Failed(std::string what, int err) {
  return Error{ErrorCode::kInternal, fmt::format("{}: {}", what, std::strerror(err))};
}

// Replaces `path`'s content: through a new file renamed over it, or, where it is a mount point
// (systemd bind-mounts a transient /etc/machine-id), in place.
Status WriteFile(const fs::path& path, const std::string& content, mode_t mode, bool in_place) {
  fs::path target = in_place ? path : fs::path(path.string() + ".berth-new");
  int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Fail(Failed("open " + target.string(), errno));
  bool ok = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) && fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok) return Fail(Failed("write " + target.string(), err));
  if (!in_place && rename(target.c_str(), path.c_str()) != 0) return Fail(Failed("rename onto " + path.string(), errno));
  return {};
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

// /etc/hosts with the 127.0.1.1 line (Debian's own name for the machine) naming `hostname`.
std::string HostsWith(const std::string& hosts, const std::string& hostname) {
  std::istringstream in(hosts);
  std::string out, line;
  bool done = false;
  while (std::getline(in, line)) {
    if (line.starts_with("127.0.1.1") && !done) {
      line = "127.0.1.1\t" + hostname;
      done = true;
    }
    out += line + "\n";
  }
  if (!done) out += "127.0.1.1\t" + hostname + "\n";
  return out;
}

// Runs a tool with a fixed argument list (no shell) and waits for it.
Status Run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) return Fail(Failed("run " + argv[0], rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail(ErrorCode::kInternal, fmt::format("{} failed (status {})", argv[0], status));
  }
  return {};
}

// The guest's NICs: every non-loopback Ethernet interface backed by a device.
std::vector<std::string> Nics() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
    std::string name = entry.path().filename();
    if (name == "lo" || !fs::exists(entry.path() / "device")) continue;
    if (ReadFile(entry.path() / "type").starts_with("1")) out.push_back(name);  // ARPHRD_ETHER
  }
  return out;
}

Status SetMac(const std::string& nic, const std::string& mac) {
  ifreq req{};
  std::strncpy(req.ifr_name, nic.c_str(), IFNAMSIZ - 1);
  req.ifr_hwaddr.sa_family = ARPHRD_ETHER;
  for (int i = 0; i < 6; ++i) {
    req.ifr_hwaddr.sa_data[i] = static_cast<char>(std::stoi(mac.substr(static_cast<size_t>(i) * 3, 2), nullptr, 16));
  }
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Fail(Failed("socket", errno));
  int rc = ioctl(s, SIOCSIFHWADDR, &req);
  int err = errno;
  close(s);
  if (rc != 0) return Fail(Failed("set the MAC of " + nic, err));
  return {};
}

// Mixes `hex` (32 bytes) into the kernel's input pool, credited, and reseeds the CRNG from it
// (random(4): RNDADDENTROPY, RNDRESEEDCRNG; root's).
Status AddEntropy(const std::string& hex) {
  alignas(rand_pool_info) unsigned char raw[sizeof(rand_pool_info) + 32] = {};
  auto* info = reinterpret_cast<rand_pool_info*>(raw);
  info->entropy_count = 256;
  info->buf_size = 32;
  for (size_t i = 0; i < 32; ++i) {
    raw[sizeof(rand_pool_info) + i] = static_cast<unsigned char>(std::stoi(hex.substr(i * 2, 2), nullptr, 16));
  }
  int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Fail(Failed("open /dev/urandom", errno));
  int rc = ioctl(fd, RNDADDENTROPY, info);
  if (rc == 0) rc = ioctl(fd, RNDRESEEDCRNG);
  int err = errno;
  close(fd);
  if (rc != 0) return Fail(Failed("reseed the kernel's random number generator", err));
  return {};
}

// Has a running sshd load the host keys there are now: SIGHUP, as ssh.service's reload does
// (systemctl itself costs seconds in a guest just resumed under TCG). No sshd: nothing to do.
void ReloadSshd() {
  pid_t pid = 0;
  std::ifstream("/run/sshd.pid") >> pid;
  if (pid <= 1) return;
  if (!ReadFile(fmt::format("/proc/{}/comm", pid)).starts_with("sshd")) return;
  (void)kill(pid, SIGHUP);
}

}  // namespace

Status GenerateHostKeys(const std::vector<HostKey>& keys, bool guest) {
  if (keys.empty()) return {};
  for (const auto& key : keys) {
    if (auto done = Run({"ssh-keygen", "-q", "-t", key.type, "-N", "", "-C", key.comment, "-f", key.path.string()});
        !done) {
      return done;
    }
  }
  if (guest) ReloadSshd();
  return {};
}

Result<AppliedIdentity> ApplyIdentity(const protocol::IdentityRequest& request, const std::string& root) {
  AppliedIdentity out;
  const bool guest = root == "/";
  fs::path etc = fs::path(root) / "etc";
  // First: the SSH host keys made below come from the reseeded generator, not from the state
  // every fork of one memory image shares.
  if (!request.entropy.empty() && guest) {
    if (auto done = AddEntropy(request.entropy); !done) return Fail(done.error());
    out.applied.applied.push_back("entropy");
  }
  if (!request.hostname.empty()) {
    if (auto done = WriteFile(etc / "hostname", request.hostname + "\n", 0644, false); !done) return Fail(done.error());
    if (auto done = WriteFile(etc / "hosts", HostsWith(ReadFile(etc / "hosts"), request.hostname), 0644, false); !done) {
      return Fail(done.error());
    }
    if (guest && sethostname(request.hostname.data(), request.hostname.size()) != 0) {
      return Fail(Failed("sethostname", errno));
    }
    out.applied.applied.push_back("hostname");
  }
  if (!request.machine_id.empty()) {
    if (auto done = WriteFile(etc / "machine-id", request.machine_id + "\n", 0444, true); !done) return Fail(done.error());
    out.applied.applied.push_back("machine_id");
  }
  if (!request.mac.empty() && guest) {
    auto nics = Nics();
    if (nics.empty()) return Fail(ErrorCode::kFailedPrecondition, "the guest has no NIC to give the new MAC");
    for (const auto& nic : nics) {
      if (auto done = SetMac(nic, request.mac); !done) return Fail(done.error());
    }
    out.applied.applied.push_back("mac");
  }
  if (request.regenerate_ssh_host_keys) {
    // Every host key the parent had is gone before this answers; each is made anew, of the
    // same type: the quick ones (Ed25519, ECDSA: milliseconds) now, RSA's prime search
    // (seconds under TCG) after the answer (GenerateHostKeys), so a fork is handed out without
    // waiting for it. Until then sshd offers the others.
    std::error_code ec;
    std::vector<fs::path> keys;
    for (const auto& entry : fs::directory_iterator(etc / "ssh", ec)) {
      std::string name = entry.path().filename();
      if (name.starts_with("ssh_host_") && (name.ends_with("_key") || name.ends_with("_key.pub"))) {
        keys.push_back(entry.path());
      }
    }
    if (!keys.empty()) {
      std::string comment = "root@" + (request.hostname.empty() ? ReadFile(etc / "hostname") : request.hostname);
      if (comment.ends_with('\n')) comment.pop_back();
      std::vector<HostKey> quick;
      for (const auto& key : keys) {
        std::string name = key.filename();
        if (!fs::remove(key, ec) && ec) return Fail(Failed("remove " + key.string(), ec.value()));
        if (!name.ends_with("_key")) continue;
        // ssh_host_<type>_key; a type ssh-keygen would not know is removed and not made again.
        std::string type = name.substr(9, name.size() - 9 - 4);
        if (type != "ed25519" && type != "ecdsa" && type != "rsa" && type != "dsa") continue;
        HostKey made{type, key, comment};
        (type == "rsa" || type == "dsa" ? out.later : quick).push_back(std::move(made));
      }
      if (auto done = GenerateHostKeys(quick, guest); !done) return Fail(done.error());
      out.applied.applied.push_back("ssh_host_keys");
    }
  }
  return out;
}

}  // namespace berth::agent
