#include "tests/support/netns_lab.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>

#include <fmt/format.h>
#include <ldns/ldns.h>

namespace berth::testing {
namespace {

int Sh(const std::string& command) {
  int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

bool JoinPeer(const std::string& peer) {
  int fd = open(("/run/netns/" + peer).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = setns(fd, CLONE_NEWNET) == 0;
  close(fd);
  return ok;
}

bool Fill(sockaddr_storage& ss, socklen_t& len, const std::string& addr, uint16_t port) {
  ss = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof *v4;
    return true;
  }
  if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof *v6;
    return true;
  }
  return false;
}

void EchoConnection(int fd) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    // A sink for the benchmark's throughput: a first byte 'S' means "do not echo".
    if (buf[0] == 'S') {
      while (read(fd, buf, sizeof buf) > 0) {
      }
      break;
    }
    if (write(fd, buf, static_cast<size_t>(n)) != n) break;
  }
  close(fd);
}

}  // namespace

Result<NetnsLab*> NetnsLab::Get() {
  static std::once_flag once;
  static NetnsLab* lab = nullptr;
  static Error error;
  std::call_once(once, [] {
    auto* l = new NetnsLab();
    if (auto s = l->Setup(); !s) {
      error = s.error();
      delete l;
      return;
    }
    lab = l;
    // The peer namespace is named (in /run/netns): remove it at exit. The host one dies with us.
    std::atexit([] { delete lab; });
  });
  if (!lab) return Fail(error);
  return lab;
}

NetnsLab::~NetnsLab() {
  stop_ = true;
  for (int fd : listeners_) shutdown(fd, SHUT_RDWR);
  for (auto& t : threads_) t.join();
  for (int fd : listeners_) close(fd);
  if (!peer_.empty()) Sh(fmt::format("ip netns del {} 2>/dev/null", peer_));
}

Status NetnsLab::Setup() {
  if (geteuid() != 0) return Fail(ErrorCode::kPermissionDenied, "the network lab needs root");
  if (Sh("command -v ip >/dev/null") != 0) return Fail(ErrorCode::kFailedPrecondition, "no ip (iproute2)");
  if (unshare(CLONE_NEWNET) != 0) return Fail(ErrnoError(errno, "unshare(CLONE_NEWNET)"));
  peer_ = fmt::format("btpeer-{}", getpid());
  const std::vector<std::string> commands = {
      "ip link set lo up",
      "ip addr add 198.51.100.1/32 dev lo",
      fmt::format("ip netns add {}", peer_),
      fmt::format("ip link add bth0 type veth peer name btp0 netns {}", peer_),
      "ip addr add 10.254.0.1/24 dev bth0",
      "ip link set bth0 up",
      "ip route add default via 10.254.0.2",
      fmt::format("ip -n {} link set lo up", peer_),
      fmt::format("ip -n {} addr add 10.254.0.2/24 dev btp0", peer_),
      fmt::format("ip -n {} link set btp0 up", peer_),
      fmt::format("ip -n {} route add default via 10.254.0.1", peer_),
  };
  for (const auto& c : commands) {
    if (Sh(c + " >/dev/null 2>&1") != 0) return Fail(ErrorCode::kFailedPrecondition, "failed: " + c);
  }
  for (const char* a : {"169.254.169.254", "203.0.113.10", "203.0.113.20", "203.0.113.53"}) {
    if (Sh(fmt::format("ip -n {} addr add {}/32 dev lo", peer_, a)) != 0) {
      return Fail(ErrorCode::kFailedPrecondition, fmt::format("cannot add {} in the peer namespace", a));
    }
  }
  Serve("0.0.0.0", false, false);
  Serve("::", true, false);
  Serve("0.0.0.0", false, true);
  threads_.emplace_back([this] { ServeDns(); });
  // The peer's listener is bound once its thread got there: wait for an answer.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!Echo("10.254.0.2", kEchoPort, std::chrono::milliseconds(200))) {
    if (std::chrono::steady_clock::now() > until) return Fail(ErrorCode::kUnavailable, "the peer's echo server did not start");
  }
  return {};
}

void NetnsLab::Serve(const std::string& addr, bool v6, bool peer) {
  // Bound here for the host's listeners; the peer's is bound by its thread after setns.
  auto bind_listener = [addr, v6]() -> int {
    int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    sockaddr_storage ss{};
    socklen_t len = 0;
    Fill(ss, len, addr, kEchoPort);
    if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 128) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  };
  auto accept_loop = [this](int fd) {
    for (;;) {
      int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      std::thread(EchoConnection, c).detach();
    }
  };
  if (!peer) {
    int fd = bind_listener();
    if (fd < 0) return;
    listeners_.push_back(fd);
    threads_.emplace_back(accept_loop, fd);
    return;
  }
  // The peer's listener: reserve its slot now so the destructor can shut it down.
  listeners_.push_back(-1);
  size_t slot = listeners_.size() - 1;
  int ready[2];
  if (pipe(ready) != 0) return;
  threads_.emplace_back([this, bind_listener, accept_loop, slot, ready] {
    int fd = JoinPeer(peer_) ? bind_listener() : -1;
    listeners_[slot] = fd;
    char c = 1;
    (void)!write(ready[1], &c, 1);
    if (fd >= 0) accept_loop(fd);
  });
  char c = 0;
  (void)!read(ready[0], &c, 1);
  close(ready[0]);
  close(ready[1]);
}

void NetnsLab::ServeDns() {
  if (!JoinPeer(peer_)) return;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_storage ss{};
  socklen_t len = 0;
  Fill(ss, len, "203.0.113.53", 53);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return;
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (!stop_) {
    uint8_t buf[4096];
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    ssize_t n = recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n <= 0) continue;
    ldns_pkt* q = nullptr;
    if (ldns_wire2pkt(&q, buf, static_cast<size_t>(n)) != LDNS_STATUS_OK) continue;
    ldns_pkt* a = ldns_pkt_new();
    ldns_pkt_set_id(a, ldns_pkt_id(q));
    ldns_pkt_set_qr(a, true);
    ldns_pkt_set_aa(a, true);
    ldns_rr* question = ldns_rr_clone(ldns_rr_list_rr(ldns_pkt_question(q), 0));
    char* name = ldns_rdf2str(ldns_rr_owner(question));
    std::string qname = name ? name : "";
    free(name);
    ldns_pkt_push_rr(a, LDNS_SECTION_QUESTION, question);
    std::string answer;
    if (qname == "allowed.test.") answer = "allowed.test. 300 IN A 203.0.113.10";
    if (qname == "denied.test.") answer = "denied.test. 300 IN A 203.0.113.20";
    if (!answer.empty() && ldns_rr_get_type(question) == LDNS_RR_TYPE_A) {
      ldns_rr* rr = nullptr;
      if (ldns_rr_new_frm_str(&rr, answer.c_str(), 300, nullptr, nullptr) == LDNS_STATUS_OK) {
        ldns_pkt_push_rr(a, LDNS_SECTION_ANSWER, rr);
      }
    } else if (answer.empty()) {
      ldns_pkt_set_rcode(a, LDNS_RCODE_NXDOMAIN);
    }
    uint8_t* wire = nullptr;
    size_t size = 0;
    if (ldns_pkt2wire(&wire, a, &size) == LDNS_STATUS_OK) {
      sendto(fd, wire, size, 0, reinterpret_cast<sockaddr*>(&from), from_len);
      free(wire);
    }
    ldns_pkt_free(a);
    ldns_pkt_free(q);
  }
  close(fd);
}

int NetnsLab::RunAs(uid_t uid, const std::function<int()>& fn, std::chrono::seconds limit) {
  pid_t pid = fork();
  if (pid < 0) return 253;
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(255);
    _exit(fn() & 0xFF);
  }
  auto until = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 254;
    }
    usleep(2000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool NetnsLab::Echo(const std::string& addr, uint16_t port, std::chrono::milliseconds limit) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!Fill(ss, len, addr, port)) return false;
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  bool ok = false;
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  pollfd p{fd, POLLOUT, 0};
  if (rc == 0 || (errno == EINPROGRESS && poll(&p, 1, static_cast<int>(limit.count())) == 1)) {
    int err = 0;
    socklen_t elen = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    char c = 'x';
    if (err == 0 && write(fd, &c, 1) == 1) {
      p = {fd, POLLIN, 0};
      char back = 0;
      ok = poll(&p, 1, static_cast<int>(limit.count())) == 1 && read(fd, &back, 1) == 1 && back == 'x';
    }
  }
  close(fd);
  return ok;
}

Result<NetnsLab::DnsAnswer> NetnsLab::Query(const std::string& server, const std::string& name,
                                            std::chrono::milliseconds limit) {
  ldns_pkt* q = nullptr;
  if (ldns_pkt_query_new_frm_str(&q, name.c_str(), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD) != LDNS_STATUS_OK) {
    return Fail(ErrorCode::kInvalidArgument, "bad name");
  }
  ldns_pkt_set_id(q, 0x4242);
  uint8_t* wire = nullptr;
  size_t size = 0;
  ldns_pkt2wire(&wire, q, &size);
  ldns_pkt_free(q);
  sockaddr_storage ss{};
  socklen_t len = 0;
  Fill(ss, len, server, 53);
  int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ssize_t sent = sendto(fd, wire, size, 0, reinterpret_cast<sockaddr*>(&ss), len);
  free(wire);
  if (sent < 0) {
    int err = errno;
    close(fd);
    return Fail(ErrnoError(err, "send the DNS question"));
  }
  pollfd p{fd, POLLIN, 0};
  uint8_t buf[4096];
  ssize_t n = -1;
  if (poll(&p, 1, static_cast<int>(limit.count())) == 1) n = recv(fd, buf, sizeof buf, 0);
  close(fd);
  if (n <= 0) return Fail(ErrorCode::kDeadlineExceeded, "no DNS answer");
  ldns_pkt* a = nullptr;
  if (ldns_wire2pkt(&a, buf, static_cast<size_t>(n)) != LDNS_STATUS_OK) return Fail(ErrorCode::kInternal, "bad answer");
  DnsAnswer out;
  out.rcode = ldns_pkt_get_rcode(a);
  const ldns_rr_list* rrs = ldns_pkt_answer(a);
  for (size_t i = 0; i < ldns_rr_list_rr_count(rrs); ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(rrs, i);
    if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_A) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, ldns_rdf_data(ldns_rr_rdf(rr, 0)), text, sizeof text);
    out.addresses.push_back(text);
  }
  ldns_pkt_free(a);
  return out;
}

int NetnsLab::RunInPeer(const std::vector<std::string>& argv) {
  std::string command = "ip netns exec " + peer_;
  for (const auto& a : argv) command += " '" + a + "'";
  return Sh(command);
}

}  // namespace berth::testing
