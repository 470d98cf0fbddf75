#include "controller/workspace/transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/child_fds.h"
#include "common/unique.h"
#include "controller/network/passt.h"
#include "controller/workspace/disks.h"

namespace berth::workspace {
namespace {

namespace fs = std::filesystem;
constexpr uint16_t kAgentPort = 1024;  // the agent's vsock and TCP port in every image

// run/ belongs to the workspace's uid: QEMU creates the VNC socket there and passt its socket,
// pid file and log. 0700, so those sockets are the workspace's alone.
Status PrepareRunDir(const Layout& layout, uid_t uid, gid_t gid) {
  std::error_code ec;
  fs::create_directories(layout.run_dir(), ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + layout.run_dir().string()));
  if (geteuid() == 0) {
    // lchown: run/ itself is ours (root made it), but never follow a link planted in its place.
    if (lchown(layout.run_dir().c_str(), uid, gid) != 0) {
      return Fail(ErrnoError(errno, "chown " + layout.run_dir().string()));
    }
  }
  if (chmod(layout.run_dir().c_str(), 0700) != 0) {
    return Fail(ErrnoError(errno, "chmod " + layout.run_dir().string()));
  }
  return {};
}

// run/ for the unix transport: QEMU, when a real one runs, is libvirt's user `qemu_user`; a host
// without that user (libvirt's test driver) keeps run/ root's.
Status PrepareRunDir(const Layout& layout, const std::string& qemu_user) {
  passwd* pw = getpwnam(qemu_user.c_str());
  if (pw == nullptr) {
    std::error_code ec;
    fs::create_directories(layout.run_dir(), ec);
    if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + layout.run_dir().string()));
    return {};
  }
  return PrepareRunDir(layout, pw->pw_uid, pw->pw_gid);
}

// Every workspace's QEMU runs as its own uid and libvirt relabels nothing (domain_xml.cc says
// why): the VM's own files become that uid's, 0600, so its QEMU opens them and no other
// workspace's uid reads them. Disks made before berthd's umask was 077 are 0644 (and, from
// libvirt's relabelling under the shared QEMU user, may be libvirt-qemu's): this fixes them at
// their next boot. The workspace directory is root's, so nothing in it is a link the uid
// planted; lchown anyway. The frozen layers under the top (checkpoints.cc) stay root's, 0400,
// with POSIX ACL entries that let the uids that read them do so: the workspace's own, and its
// forks' (forks.cc), whose chains go on into their source's layers. Each QEMU opens them as
// backing files and can neither write them nor change their mode (QEMU runs with the kvm
// group, not the uid's, so a group cannot do this).
//
// The "system.posix_acl_access" value (linux/posix_acl_xattr.h): a version, then entries
// sorted by tag and id: owner r, user:<uid> r for each reader, owning group none, mask r,
// others none.
constexpr uint16_t kAclUserObj = 0x01, kAclUser = 0x02, kAclGroupObj = 0x04, kAclMask = 0x10, kAclOther = 0x20;
constexpr uint32_t kAclUndefined = 0xffffffff;
constexpr size_t kMaxLayerReaders = 1024;

// Adds `uid` to (or, `add` false, removes it from) the readers of the layer at `path`, keeping
// the others.
Status SetLayerReader(const std::filesystem::path& path, uid_t uid, bool add) {
  struct Entry {
    uint16_t tag;
    uint16_t perm;
    uint32_t id;
  };
  static_assert(sizeof(Entry) == 8);
  std::vector<char> raw(4 + (kMaxLayerReaders + 4) * sizeof(Entry));
  std::set<uint32_t> readers;
  ssize_t n = ::lgetxattr(path.c_str(), "system.posix_acl_access", raw.data(), raw.size());
  if (n < 0 && errno != ENODATA) return Fail(ErrnoError(errno, "read the readers of " + path.string()));
  for (ssize_t at = 4; n > 0 && at + static_cast<ssize_t>(sizeof(Entry)) <= n; at += sizeof(Entry)) {
    Entry e;
    std::memcpy(&e, raw.data() + at, sizeof e);
    if (e.tag == kAclUser) readers.insert(e.id);
  }
  if (add) {
    readers.insert(static_cast<uint32_t>(uid));
  } else {
    readers.erase(static_cast<uint32_t>(uid));
  }
  if (readers.size() > kMaxLayerReaders) {
    return Fail(ErrorCode::kResourceExhausted, fmt::format("{} has {} readers already", path.string(), readers.size()));
  }
  if (::lchown(path.c_str(), 0, 0) != 0 || ::chmod(path.c_str(), 0400) != 0) {
    return Fail(ErrnoError(errno, "make " + path.string() + " root's"));
  }
  if (readers.empty()) {
    if (::lremovexattr(path.c_str(), "system.posix_acl_access") != 0 && errno != ENODATA) {
      return Fail(ErrnoError(errno, "drop the readers of " + path.string()));
    }
    return {};
  }
  std::vector<Entry> entries = {{kAclUserObj, 4, kAclUndefined}};
  for (uint32_t id : readers) entries.push_back({kAclUser, 4, id});
  entries.push_back({kAclGroupObj, 0, kAclUndefined});
  entries.push_back({kAclMask, 4, kAclUndefined});
  entries.push_back({kAclOther, 0, kAclUndefined});
  std::string value(4 + entries.size() * sizeof(Entry), '\0');
  uint32_t version = 2;
  std::memcpy(value.data(), &version, 4);
  std::memcpy(value.data() + 4, entries.data(), entries.size() * sizeof(Entry));
  if (::lsetxattr(path.c_str(), "system.posix_acl_access", value.data(), value.size(), 0) != 0) {
    return Fail(ErrnoError(errno, "let the workspace's uid read " + path.string()));
  }
  return {};
}

Status OwnFiles(const Layout& layout, int64_t top_gen, uid_t uid) {
  for (const auto& path : {layout.root_disk(top_gen), layout.data_disk(top_gen), layout.token()}) {
    if (::lchown(path.c_str(), uid, uid) != 0 || ::chmod(path.c_str(), 0600) != 0) {
      if (errno == ENOENT) continue;
      return Fail(ErrnoError(errno, "give " + path.string() + " to the workspace's uid"));
    }
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(layout.dir, ec)) {
    auto gen = Layout::LayerGen(entry.path().filename().string());
    if (!gen || *gen == top_gen || entry.is_symlink()) continue;
    if (auto s = SetLayerReader(entry.path(), uid, true); !s) return s;
  }
  if (ec) return Fail(ErrnoError(ec.value(), "list " + layout.dir.string()));
  // A fork's chains go on into other workspaces' frozen layers.
  for (const auto& path : SharedLayersUnder(layout, top_gen)) {
    if (auto s = SetLayerReader(path, uid, true); !s) return s;
  }
  return {};
}

// The console log is the guest's own output (virtlogd writes it, as root): created 0600 before
// the boot so virtlogd appends to a private file whatever its own mode would be, and narrowed
// when an older berthd left it readable. Never through a link.
Status MakeConsolePrivate(const Layout& layout) {
  int fd = ::open(layout.serial_log().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (fd < 0) return Fail(ErrnoError(errno, "create " + layout.serial_log().string()));
  struct stat st {};
  int rc = ::fstat(fd, &st);
  if (rc == 0 && (st.st_mode & 077) != 0) rc = ::fchmod(fd, 0600);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Fail(ErrnoError(err, "make " + layout.serial_log().string() + " private"));
  return {};
}

// The gid of group `name`, if there is one (read once: getgrnam is not thread-safe).
std::optional<gid_t> GroupId(const std::string& name) {
  if (name.empty()) return std::nullopt;
  struct group* g = ::getgrnam(name.c_str());
  if (g == nullptr) return std::nullopt;
  return g->gr_gid;
}

// Ends the process in `pid_file` if it is alive and its command line mentions `marker` (a
// recycled pid must not be killed), and, when `uid` is given, it runs as that uid. The pid
// file may sit in a directory the QEMU user owns: it is read without following symlinks.
void KillFromPidFile(const fs::path& pid_file, const std::string& marker,
                     std::optional<uid_t> uid = std::nullopt) {
  auto read = network::ReadPidFile(pid_file.string());
  if (!read) return;
  pid_t pid = *read;
  if (uid) {
    auto owner = network::ProcessUid(pid);
    if (!owner || *owner != *uid) return;
  }
  std::ifstream cmdline(fmt::format("/proc/{}/cmdline", pid));
  std::string args;
  std::getline(cmdline, args, '\0');
  std::string rest((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  args += rest;
  if (args.find(marker) == std::string::npos) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 50 && kill(pid, 0) == 0; ++i) {
    // Our own child (unix transport) must be reaped, or it stays a zombie that kill(0) sees.
    waitpid(pid, nullptr, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (kill(pid, 0) == 0) kill(pid, SIGKILL);
  waitpid(pid, nullptr, WNOHANG);
}

class VmTransport : public Transport {
 public:
  VmTransport(bool vsock, TransportOptions options)
      : vsock_(vsock), options_(std::move(options)), qemu_gid_(GroupId(options_.qemu_group)) {}
  std::string_view name() const override { return vsock_ ? "vsock" : "forward"; }

  Status BeforeStart(Workspace& ws, const Layout& layout, bool /*resume*/,
                     hypervisor::DomainSpec& spec) override {
    if (!ws.net_uid) {
      // internal, not failed_precondition: the boot loop reads that as "overtaken" and says nothing.
      return Fail(ErrorCode::kInternal,
                  fmt::format("workspace {} has no uid of its own: NetworkManager::BeforeBoot must run "
                              "before the transport starts passt", ws.id));
    }
    auto uid = static_cast<uid_t>(*ws.net_uid);
    if (auto s = PrepareRunDir(layout, uid, uid); !s) return s;
    if (auto s = OwnFiles(layout, ws.disk_gen, uid); !s) return s;
    if (auto s = MakeConsolePrivate(layout); !s) return s;
    network::PasstOptions passt;
    passt.uid = uid;
    passt.gid = uid;
    if (options_.network_isolation) passt.dns = network::kGuestDnsAddress;
    spec.run_as_uid = uid;
    spec.run_as_gid = qemu_gid_.value_or(uid);
    // A passt left from a VM that never connected (a failed start) holds the socket path.
    KillFromPidFile(layout.passt_pid(), layout.passt_socket().string());
    // A log of an earlier boot under another owner would stop passt from writing it.
    ::unlink(layout.passt_log().c_str());
    passt.binary = options_.passt_binary;
    passt.socket_path = layout.passt_socket().string();
    passt.pid_file = layout.passt_pid().string();
    passt.log_file = layout.passt_log().string();
    // A new port per boot for the agent (forward) and each debug forward: an old one may have
    // been taken meanwhile. Races with another process binding one between our probe and
    // passt's bind are retried.
    std::optional<uint16_t> agent_port;
    for (int attempt = 0;; ++attempt) {
      passt.tcp_forwards.clear();
      if (!vsock_) {
        auto port = PickLoopbackPort();
        if (!port) return Fail(port.error());
        agent_port = *port;
        passt.tcp_forwards.emplace_back(*port, kAgentPort);
      }
      for (uint16_t guest : options_.debug_forwards) {
        auto port = PickLoopbackPort();
        if (!port) return Fail(port.error());
        passt.tcp_forwards.emplace_back(*port, guest);
      }
      auto started = network::StartPasst(passt);
      if (started) break;
      if (attempt == 2 || passt.tcp_forwards.empty()) return Fail(started.error());
      spdlog::warn("passt for {}: {}; retrying with other ports", ws.id, started.error().message);
    }
    if (agent_port) ws.agent_port = *agent_port;
    for (size_t i = agent_port ? 1 : 0; i < passt.tcp_forwards.size(); ++i) {
      const auto& [host, guest] = passt.tcp_forwards[i];
      // The only place the port is told (bench/run-preview-bench reads it here): a warning,
      // because nothing Berth checks stands between it and the guest's server.
      spdlog::warn("workspace {}: debug forward 127.0.0.1:{} -> guest port {} (network.debug_forwards: "
                   "no Berth authentication, for benchmarks and debugging only)", ws.id, host, guest);
    }
    spec.agent_channel = vsock_ ? hypervisor::AgentChannel::kVsock : hypervisor::AgentChannel::kForward;
    spec.vsock_cid = vsock_ ? static_cast<uint32_t>(ws.vsock_cid.value_or(0)) : 0;
    spec.passt_socket = layout.passt_socket().string();
    spec.agent_port = kAgentPort;
    return {};
  }

  void AfterStop(const Workspace&, const Layout& layout, bool) override {
    // passt runs with --one-off and leaves with its VM; this catches a VM that never came up.
    KillFromPidFile(layout.passt_pid(), layout.passt_socket().string());
  }

  Status AdoptLayers(const Workspace& ws, const Layout& layout) override {
    if (!ws.net_uid) return Fail(ErrorCode::kInternal, "workspace " + ws.id + " has no uid to run as");
    return OwnFiles(layout, ws.disk_gen, static_cast<uid_t>(*ws.net_uid));
  }
  Status AdoptScratch(const Workspace& ws, const std::filesystem::path& path) override {
    if (!ws.net_uid) return Fail(ErrorCode::kInternal, "workspace " + ws.id + " has no uid to run as");
    auto uid = static_cast<uid_t>(*ws.net_uid);
    if (::lchown(path.c_str(), uid, uid) != 0 || ::chmod(path.c_str(), 0600) != 0) {
      return Fail(ErrnoError(errno, "give " + path.string() + " to the workspace's uid"));
    }
    return {};
  }
  Result<Endpoint> AgentEndpoint(const Workspace& ws, const Layout&) const override {
    Endpoint ep;
    if (vsock_) {
      if (!ws.vsock_cid) return Fail(ErrorCode::kInternal, "workspace has no vsock CID");
      ep.kind = Endpoint::Kind::kVsock;
      ep.cid = static_cast<uint32_t>(*ws.vsock_cid);
      ep.port = kAgentPort;
    } else {
      if (!ws.agent_port) return Fail(ErrorCode::kUnavailable, "no agent port for this boot yet");
      ep.kind = Endpoint::Kind::kTcp;
      ep.host = "127.0.0.1";
      ep.port = static_cast<uint16_t>(*ws.agent_port);
    }
    return ep;
  }

 private:
  bool vsock_;
  TransportOptions options_;
  std::optional<gid_t> qemu_gid_;
};

// Writes getpid() to `path`, with nothing but async-signal-safe calls (it runs between fork
// and exec in a process that had other threads).
void WritePid(const char* path) {
  char text[24];
  size_t n = sizeof text;
  text[--n] = '\n';
  for (auto pid = static_cast<unsigned long>(getpid()); pid != 0 || n == sizeof text - 1; pid /= 10) {
    text[--n] = static_cast<char>('0' + pid % 10);
  }
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  ssize_t wrote = ::write(fd, text + n, sizeof text - n);
  (void)wrote;  // a pid file that could not be written leaves the agent as before: unnamed
  ::close(fd);
}

// berth-agent as a host process per workspace, for tests: on libvirt's test driver (the
// integration tests), or beside real QEMU domains whose guest never boots (the crash suite,
// tests/crash/): the hypervisor calls are real, the agent answers from the host.
class HostAgentTransport : public Transport {
 public:
  explicit HostAgentTransport(TransportOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "unix"; }
  bool SharesHostCpu() const override { return true; }

  Status BeforeStart(Workspace&, const Layout& layout, bool resume,
                     hypervisor::DomainSpec&) override {
    // A resumed workspace keeps its agent (and its processes), like a resumed VM.
    if (resume && Alive(layout)) return {};
    KillFromPidFile(layout.agent_pid(), layout.agent_socket().string());
    // The hypervisor may be a real one (qemu:///system, the crash suite): QEMU makes its VNC
    // socket in run/, which must be the QEMU user's as under the VM transports.
    if (auto s = PrepareRunDir(layout, options_.qemu_user); !s) return s;
    std::error_code ec;
    fs::create_directories(layout.agent_root(), ec);
    std::vector<std::string> args = {
        options_.agent_binary,
        "--listen", "unix:" + layout.agent_socket().string(),
        "--token-file", layout.token().string(),
        "--local-socket", (layout.dir / "agent-local.sock").string(),
        "--workspace-dir", layout.agent_root().string(),
        // A fork's identity (forks.cc) lands in files here, never on the host's own.
        "--identity-root", (layout.dir / "identity").string()};
    fs::create_directories(layout.dir / "identity" / "etc", ec);
    if (!options_.agent_user.empty()) {
      args.push_back("--default-user");
      args.push_back(options_.agent_user);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string log = layout.agent_log().string();
    std::string pid_path = layout.agent_pid().string();
    pid_t pid = fork();
    if (pid < 0) return Fail(ErrnoError(errno, "fork berth-agent"));
    if (pid == 0) {
      // berthd blocks SIGTERM and SIGINT in every thread (it takes them with sigwait): a
      // child must not inherit that mask, or it could never be stopped politely.
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      setsid();
      int null = open("/dev/null", O_RDONLY);
      int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (null >= 0) dup2(null, 0);
      if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
      }
      // The child writes its own pid file: berthd killed right after the fork would otherwise
      // leave an agent that no pid file names and no later boot or delete ends.
      WritePid(pid_path.c_str());
      CloseInheritedDescriptors();
      execv(argv[0], argv.data());
      _exit(127);
    }
    return {};
  }

  void AfterStop(const Workspace&, const Layout& layout, bool saved) override {
    if (saved) return;  // hibernated: the "guest" keeps its processes
    KillFromPidFile(layout.agent_pid(), layout.agent_socket().string());
  }

  Result<Endpoint> AgentEndpoint(const Workspace&, const Layout& layout) const override {
    Endpoint ep;
    ep.kind = Endpoint::Kind::kUnix;
    ep.path = layout.agent_socket().string();
    return ep;
  }

 private:
  static bool Alive(const Layout& layout) {
    std::ifstream in(layout.agent_pid());
    pid_t pid = 0;
    return (in >> pid) && pid > 1 && kill(pid, 0) == 0 &&
           waitpid(pid, nullptr, WNOHANG) == 0;
  }
  TransportOptions options_;
};

}  // namespace

Result<uint16_t> PickLoopbackPort() {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Fail(ErrnoError(errno, "socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Fail(ErrnoError(errno, "bind 127.0.0.1:0"));
  }
  socklen_t len = sizeof addr;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Fail(ErrnoError(errno, "getsockname"));
  }
  return ntohs(addr.sin_port);
}

Result<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options) {
  std::string name = options.name;
  if (name == "auto") name = access("/dev/vhost-vsock", R_OK | W_OK) == 0 ? "vsock" : "forward";
  if (name == "vsock") return std::make_unique<VmTransport>(true, options);
  if (name == "forward") return std::make_unique<VmTransport>(false, options);
  if (name == "unix") {
    if (options.agent_binary.empty() || access(options.agent_binary.c_str(), X_OK) != 0) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("the unix transport needs an executable --agent-bin (got '{}')",
                              options.agent_binary));
    }
    return std::make_unique<HostAgentTransport>(options);
  }
  return Fail(ErrorCode::kInvalidArgument,
              fmt::format("unknown transport '{}' (auto, vsock, forward or unix)", options.name));
}

std::vector<std::filesystem::path> SharedLayersUnder(const Layout& layout, int64_t top_gen) {
  // Every layer's backing file is an absolute path qemu-img wrote (berthd makes and rebases
  // every layer); the chain ends at the image's disk, outside the workspaces.
  std::vector<std::filesystem::path> out;
  const std::filesystem::path workspaces = layout.dir.parent_path();
  for (const auto& top : {layout.root_disk(top_gen), layout.data_disk(top_gen)}) {
    std::filesystem::path at = top;
    for (int depth = 0; depth < 4096; ++depth) {
      auto backing = BackingFile(at);
      if (!backing || backing->empty()) break;
      std::filesystem::path next = std::filesystem::path(*backing).lexically_normal();
      if (next.parent_path().parent_path() != workspaces) break;  // the image's disk
      if (next.parent_path() != layout.dir) out.push_back(next);
      at = next;
    }
  }
  return out;
}

void ForgetSharedLayers(const Layout& layout, int64_t top_gen, uid_t uid) {
  for (const auto& path : SharedLayersUnder(layout, top_gen)) {
    if (auto s = SetLayerReader(path, uid, false); !s) spdlog::warn("{}", s.error().message);
  }
}

}  // namespace berth::workspace
