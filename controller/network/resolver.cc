#include "controller/network/resolver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>

#include <fmt/format.h>
#include <ldns/ldns.h>
#include <spdlog/spdlog.h>

#include "common/unique.h"

namespace berth::network {
namespace {

// A datagram of a well-behaved client is under 512 bytes, or the EDNS size it announced:
// 4096 is what every common resolver offers.
constexpr size_t kMaxDatagram = 4096;
// Questions per workspace waiting for upstream at once; more are dropped (the guest retries).
constexpr size_t kMaxPendingPerWorkspace = 64;
// Datagrams read per socket per loop pass, so one busy guest cannot starve the others.
constexpr int kReadsPerPass = 32;

struct PktDeleter {
  void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
using Pkt = std::unique_ptr<ldns_pkt, PktDeleter>;

Pkt Parse(const uint8_t* data, size_t size) {
  ldns_pkt* p = nullptr;
  if (ldns_wire2pkt(&p, data, size) != LDNS_STATUS_OK) return nullptr;
  return Pkt(p);
}

std::string OwnerName(const ldns_rr* question) {
  char* text = ldns_rdf2str(ldns_rr_owner(question));
  std::string name = text ? text : "";
  free(text);
  return name;
}

// An answer with no records and `rcode`, echoing the question.
std::vector<uint8_t> Reply(const ldns_pkt* query, ldns_pkt_rcode rcode) {
  Pkt reply(ldns_pkt_new());
  if (!reply) return {};
  ldns_pkt_set_id(reply.get(), ldns_pkt_id(query));
  ldns_pkt_set_qr(reply.get(), true);
  ldns_pkt_set_opcode(reply.get(), ldns_pkt_get_opcode(query));
  ldns_pkt_set_rd(reply.get(), ldns_pkt_rd(query));
  ldns_pkt_set_ra(reply.get(), true);
  ldns_pkt_set_rcode(reply.get(), static_cast<uint8_t>(rcode));
  if (ldns_pkt_qdcount(query) >= 1) {
    ldns_pkt_push_rr(reply.get(), LDNS_SECTION_QUESTION,
                     ldns_rr_clone(ldns_rr_list_rr(ldns_pkt_question(query), 0)));
  }
  uint8_t* wire = nullptr;
  size_t size = 0;
  if (ldns_pkt2wire(&wire, reply.get(), &size) != LDNS_STATUS_OK) return {};
  std::vector<uint8_t> out(wire, wire + size);
  free(wire);
  return out;
}

// "192.0.2.1", "2001:db8::1", and for tests "127.0.0.1#5353".
bool ParseServer(const std::string& text, sockaddr_storage& out, socklen_t& len) {
  std::string addr = text;
  uint16_t port = 53;
  if (auto hash = text.find('#'); hash != std::string::npos) {
    addr = text.substr(0, hash);
    port = static_cast<uint16_t>(std::atoi(text.c_str() + hash + 1));
  }
  out = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
    return true;
  }
  if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

}  // namespace

struct ResolverHost::Workspace {
  uid_t uid = 0;
  std::string address;
  UniqueFd fd;      // UDP
  UniqueFd tcp_fd;  // TCP listener
  std::atomic<bool> stopped{false};
  std::mutex mutex;  // policy and stats
  Policy policy;
  ResolverStats stats;
  size_t pending = 0;      // loop thread only
  size_t tcp_clients = 0;  // loop thread only
};

// One TCP connection of a guest: questions one at a time (RFC 7766 allows answering them in
// order; a stub resolver sends one), each a two-byte length and the message.
struct ResolverHost::TcpClient {
  std::shared_ptr<Workspace> ws;
  UniqueFd fd;
  std::vector<uint8_t> in;   // the question being read, its length prefix included
  std::vector<uint8_t> out;  // the answer not yet written
  std::chrono::steady_clock::time_point deadline;  // for the question being read and its answer
  bool busy = false;    // its question is upstream: nothing is read meanwhile
  bool closed = false;
};

struct ResolverHost::Pending {
  std::shared_ptr<Workspace> ws;
  sockaddr_storage client{};
  socklen_t client_len = 0;
  std::vector<uint8_t> query;
  Pkt parsed;
  std::shared_ptr<TcpClient> tcp;  // the answer goes there, not to `client`
  bool allowlist = false;  // add the answer's addresses to the set
  size_t upstream = 0;     // index of the server being tried
  UniqueFd fd;
  std::chrono::steady_clock::time_point deadline;
  bool done = false;
};

ResolverHost::ResolverHost(ResolverHostOptions options) : options_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { Loop(); });
}

ResolverHost::~ResolverHost() {
  stop_ = true;
  Wake();
  thread_.join();
  close(wake_fd_);
}

void ResolverHost::Wake() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);  // a full counter already wakes the loop
}

Status ResolverHost::Start(uid_t uid, const std::string& address, const Policy& policy) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = workspaces_.find(uid); it != workspaces_.end() && it->second->address == address) {
      std::lock_guard ws_lock(it->second->mutex);
      it->second->policy = policy;
      return {};
    }
  }
  Stop(uid);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(options_.port);
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("resolver address '{}' is not IPv4", address));
  }
  UniqueFd fd(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Fail(ErrnoError(errno, "resolver socket"));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Fail(ErrnoError(errno, fmt::format("bind the resolver of uid {} to {}:{}", uid, address, options_.port)));
  }
  UniqueFd tcp(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!tcp) return Fail(ErrnoError(errno, "resolver TCP socket"));
  int one = 1;
  (void)setsockopt(tcp.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restart finds TIME_WAITs
  if (bind(tcp.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(tcp.get(), 16) != 0) {
    return Fail(ErrnoError(errno, fmt::format("listen for the resolver of uid {} on TCP {}:{}", uid, address,
                                              options_.port)));
  }
  auto ws = std::make_shared<Workspace>();
  ws->uid = uid;
  ws->address = address;
  ws->fd = std::move(fd);
  ws->tcp_fd = std::move(tcp);
  ws->policy = policy;
  {
    std::lock_guard lock(mutex_);
    workspaces_[uid] = ws;
  }
  Wake();
  return {};
}

Status ResolverHost::SetPolicy(uid_t uid, const Policy& policy) {
  std::lock_guard lock(mutex_);
  auto it = workspaces_.find(uid);
  if (it == workspaces_.end()) return Fail(ErrorCode::kNotFound, fmt::format("no resolver for uid {}", uid));
  std::lock_guard ws_lock(it->second->mutex);
  it->second->policy = policy;
  return {};
}

void ResolverHost::Stop(uid_t uid) {
  std::shared_ptr<Workspace> ws;
  {
    std::lock_guard lock(mutex_);
    auto it = workspaces_.find(uid);
    if (it == workspaces_.end()) return;
    ws = it->second;
    workspaces_.erase(it);
  }
  ws->stopped = true;
  // The loop and its pending questions let go of it within a pass; wait for that, so the
  // address is free for a resolver started right after.
  Wake();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ws.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::optional<ResolverStats> ResolverHost::Stats(uid_t uid) const {
  std::lock_guard lock(mutex_);
  auto it = workspaces_.find(uid);
  if (it == workspaces_.end()) return std::nullopt;
  std::lock_guard ws_lock(it->second->mutex);
  return it->second->stats;
}

bool ResolverHost::Running(uid_t uid) const {
  std::lock_guard lock(mutex_);
  return workspaces_.contains(uid);
}

void ResolverHost::Loop() {
  while (!stop_) {
    std::vector<std::shared_ptr<Workspace>> live;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [uid, ws] : workspaces_) live.push_back(ws);
    }
    // Polled, in this order: the wake fd, each workspace's UDP socket and TCP listener, the
    // questions upstream, the guests' TCP connections.
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_, POLLIN, 0});
    for (const auto& ws : live) fds.push_back({ws->fd.get(), POLLIN, 0});
    for (const auto& ws : live) fds.push_back({ws->tcp_fd.get(), POLLIN, 0});
    size_t pending_count = pending_.size();
    for (const auto& p : pending_) fds.push_back({p->fd.get(), POLLIN, 0});
    size_t tcp_count = tcp_clients_.size();
    for (const auto& c : tcp_clients_) {
      short events = c->out.empty() ? (c->busy ? 0 : POLLIN) : POLLOUT;
      fds.push_back({c->fd.get(), events, 0});
    }
    auto now = std::chrono::steady_clock::now();
    auto wait = std::chrono::milliseconds(1000);
    auto until = [&](std::chrono::steady_clock::time_point t) {
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(t - now) + std::chrono::milliseconds(1));
    };
    for (const auto& p : pending_) until(p->deadline);
    for (const auto& c : tcp_clients_) {
      if (!c->busy) until(c->deadline);
    }
    int rc = poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (rc < 0 && errno != EINTR) {
      spdlog::error("resolver loop: poll: {}", strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t n = 0;
      (void)!read(wake_fd_, &n, sizeof n);
    }
    for (size_t i = 0; i < live.size(); ++i) {
      if ((fds[1 + i].revents & POLLIN) && !live[i]->stopped) OnQuery(live[i]);
      if ((fds[1 + live.size() + i].revents & POLLIN) && !live[i]->stopped) OnAccept(live[i]);
    }
    size_t base = 1 + 2 * live.size();
    for (size_t i = 0; i < pending_count; ++i) {
      auto& p = *pending_[i];
      if (!p.done && (fds[base + i].revents & POLLIN)) OnUpstreamReply(p);
    }
    base += pending_count;
    for (size_t i = 0; i < tcp_count; ++i) {
      auto c = tcp_clients_[i];  // a copy: Answer may add clients
      short revents = fds[base + i].revents;
      if (c->closed) continue;
      if (revents & POLLOUT) OnTcpWritable(*c);
      if (!c->closed && (revents & (POLLIN | POLLHUP | POLLERR))) OnTcpReadable(c);
    }
    now = std::chrono::steady_clock::now();
    for (auto& c : tcp_clients_) {
      if (c->ws->stopped || (!c->busy && now >= c->deadline)) c->closed = true;
    }
    std::erase_if(tcp_clients_, [](const std::shared_ptr<TcpClient>& c) {
      if (c->closed) --c->ws->tcp_clients;
      return c->closed;
    });
    std::vector<std::unique_ptr<Pending>> retry;
    for (auto& p : pending_) {
      if (p->done) continue;
      if (p->ws->stopped) {
        p->done = true;
      } else if (now >= p->deadline) {
        ++p->upstream;
        p->done = true;
        auto again = std::make_unique<Pending>();
        again->ws = p->ws;
        again->client = p->client;
        again->client_len = p->client_len;
        again->query = std::move(p->query);
        again->parsed = std::move(p->parsed);
        again->tcp = std::move(p->tcp);
        again->allowlist = p->allowlist;
        again->upstream = p->upstream;
        ++again->ws->pending;  // the done one gives its count back below
        retry.push_back(std::move(again));
      }
    }
    std::erase_if(pending_, [](const std::unique_ptr<Pending>& p) {
      if (p->done) --p->ws->pending;
      return p->done;
    });
    for (auto& r : retry) SendToUpstream(std::move(r));
  }
  pending_.clear();
  tcp_clients_.clear();
}

void ResolverHost::OnQuery(const std::shared_ptr<Workspace>& ws) {
  for (int i = 0; i < kReadsPerPass; ++i) {
    uint8_t buf[kMaxDatagram];
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    ssize_t n = recvfrom(ws->fd.get(), buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) return;
    Answer(ws, buf, static_cast<size_t>(n), &from, from_len, nullptr);
  }
}

void ResolverHost::OnAccept(const std::shared_ptr<Workspace>& ws) {
  for (int i = 0; i < kReadsPerPass; ++i) {
    UniqueFd fd(accept4(ws->tcp_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;
    if (ws->tcp_clients >= kMaxTcpPerWorkspace) continue;  // closed: the guest has enough open
    auto c = std::make_shared<TcpClient>();
    c->ws = ws;
    c->fd = std::move(fd);
    c->deadline = std::chrono::steady_clock::now() + options_.tcp_question_timeout;
    ++ws->tcp_clients;
    tcp_clients_.push_back(std::move(c));
  }
}

void ResolverHost::OnTcpReadable(const std::shared_ptr<TcpClient>& c) {
  while (!c->busy && !c->closed) {
    size_t want = c->in.size() < 2 ? 2 : 2 + ((size_t{c->in[0]} << 8) | c->in[1]);
    if (c->in.size() == 2 && (want == 2 || want - 2 > kMaxDatagram)) {
      c->closed = true;  // empty, or more than any question needs
      return;
    }
    size_t have = c->in.size();
    c->in.resize(want);
    ssize_t n = recv(c->fd.get(), c->in.data() + have, want - have, MSG_DONTWAIT);
    if (n <= 0) {
      c->in.resize(have);
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) c->closed = true;
      return;
    }
    c->in.resize(have + static_cast<size_t>(n));
    if (c->in.size() > 2 && c->in.size() == want) {
      std::vector<uint8_t> question(c->in.begin() + 2, c->in.end());
      c->in.clear();
      c->busy = true;
      Answer(c->ws, question.data(), question.size(), nullptr, 0, c);
    }
  }
}

void ResolverHost::OnTcpWritable(TcpClient& c) {
  while (!c.out.empty()) {
    ssize_t n = send(c.fd.get(), c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.closed = true;
      return;
    }
    c.out.erase(c.out.begin(), c.out.begin() + n);
  }
  // Answered: the next question has a deadline of its own.
  c.deadline = std::chrono::steady_clock::now() + options_.tcp_question_timeout;
}

void ResolverHost::SendTcp(TcpClient& c, const std::vector<uint8_t>& answer) {
  c.busy = false;
  if (answer.empty()) {
    c.closed = true;
    return;
  }
  c.out = {static_cast<uint8_t>(answer.size() >> 8), static_cast<uint8_t>(answer.size() & 0xff)};
  c.out.insert(c.out.end(), answer.begin(), answer.end());
  OnTcpWritable(c);
}

void ResolverHost::Answer(const std::shared_ptr<Workspace>& ws, const uint8_t* data, size_t size,
                          const sockaddr_storage* from, socklen_t from_len, const std::shared_ptr<TcpClient>& tcp) {
  auto query = Parse(data, size);
  // Not a question we understand: no answer at all (an answer would help a scanner).
  if (!query || ldns_pkt_qr(query.get()) || ldns_pkt_qdcount(query.get()) != 1) {
    if (tcp) tcp->closed = true;
    return;
  }
  auto send = [&](const std::vector<uint8_t>& answer) {
    if (tcp) {
      SendTcp(*tcp, answer);
    } else if (!answer.empty()) {
      (void)sendto(ws->fd.get(), answer.data(), answer.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(from),
                   from_len);
    }
  };
  if (ldns_pkt_get_opcode(query.get()) != LDNS_PACKET_QUERY) {
    send(Reply(query.get(), LDNS_RCODE_NOTIMPL));
    return;
  }
  std::string name = OwnerName(ldns_rr_list_rr(ldns_pkt_question(query.get()), 0));
  Policy policy;
  {
    std::lock_guard lock(ws->mutex);
    policy = ws->policy;
  }
  if (!NameAllowed(policy, name)) {
    {
      std::lock_guard lock(ws->mutex);
      ++ws->stats.refused;
      auto& recent = ws->stats.recent_refused;
      std::erase_if(recent, [&](const RefusedName& r) { return r.name == name; });
      recent.insert(recent.begin(), RefusedName{name.substr(0, kMaxNameBytes + 1), options_.clock()});
      if (recent.size() > kRecentNames) recent.resize(kRecentNames);
    }
    send(Reply(query.get(), LDNS_RCODE_REFUSED));
    return;
  }
  if (ws->pending >= kMaxPendingPerWorkspace) {
    if (tcp) tcp->closed = true;  // over UDP the guest retries; over TCP it reconnects
    return;
  }
  auto p = std::make_unique<Pending>();
  p->ws = ws;
  if (from) {
    p->client = *from;
    p->client_len = from_len;
  }
  p->query.assign(data, data + size);
  if (tcp && ldns_pkt_edns_udp_size(query.get()) < kMaxDatagram) {
    // The guest came over TCP because a UDP answer did not fit: ask upstream with room for it.
    ldns_pkt_set_edns_udp_size(query.get(), static_cast<uint16_t>(kMaxDatagram));
    uint8_t* wire = nullptr;
    size_t wire_size = 0;
    if (ldns_pkt2wire(&wire, query.get(), &wire_size) == LDNS_STATUS_OK) p->query.assign(wire, wire + wire_size);
    free(wire);
  }
  p->parsed = std::move(query);
  p->tcp = tcp;
  p->allowlist = policy.egress == Egress::kAllowlist;
  ++ws->pending;
  SendToUpstream(std::move(p));
}

void ResolverHost::SendToUpstream(std::unique_ptr<Pending> p) {
  while (p->upstream < options_.upstreams.size()) {
    sockaddr_storage server{};
    socklen_t len = 0;
    if (!ParseServer(options_.upstreams[p->upstream], server, len)) {
      ++p->upstream;
      continue;
    }
    UniqueFd fd(socket(server.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd && connect(fd.get(), reinterpret_cast<sockaddr*>(&server), len) == 0 &&
        send(fd.get(), p->query.data(), p->query.size(), MSG_DONTWAIT) ==
            static_cast<ssize_t>(p->query.size())) {
      p->fd = std::move(fd);
      p->deadline = std::chrono::steady_clock::now() + options_.upstream_timeout;
      pending_.push_back(std::move(p));
      return;
    }
    ++p->upstream;
  }
  {
    std::lock_guard lock(p->ws->mutex);
    ++p->ws->stats.failed;
  }
  Finish(*p, Reply(p->parsed.get(), LDNS_RCODE_SERVFAIL));
  --p->ws->pending;
}

void ResolverHost::OnUpstreamReply(Pending& p) {
  uint8_t buf[kMaxDatagram];
  ssize_t n = recv(p.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
  if (n <= 0) return;  // ICMP unreachable and the like: the deadline moves on to the next server
  auto answer = Parse(buf, static_cast<size_t>(n));
  if (!answer || !ldns_pkt_qr(answer.get()) || ldns_pkt_id(answer.get()) != ldns_pkt_id(p.parsed.get()) ||
      ldns_pkt_qdcount(answer.get()) != 1) {
    return;  // not the answer to this question; keep waiting
  }
  const ldns_rr* asked = ldns_rr_list_rr(ldns_pkt_question(p.parsed.get()), 0);
  const ldns_rr* echoed = ldns_rr_list_rr(ldns_pkt_question(answer.get()), 0);
  if (ldns_dname_compare(ldns_rr_owner(asked), ldns_rr_owner(echoed)) != 0 ||
      ldns_rr_get_type(asked) != ldns_rr_get_type(echoed) ||
      ldns_rr_get_class(asked) != ldns_rr_get_class(echoed)) {
    return;
  }
  if (p.allowlist && options_.add_addresses) {
    // Grouped by TTL: one batch per distinct TTL (almost always one).
    std::map<int, std::pair<std::vector<std::string>, std::vector<std::string>>> by_ttl;
    const ldns_rr_list* records = ldns_pkt_answer(answer.get());
    for (size_t i = 0; i < ldns_rr_list_rr_count(records); ++i) {
      const ldns_rr* rr = ldns_rr_list_rr(records, i);
      auto type = ldns_rr_get_type(rr);
      if ((type != LDNS_RR_TYPE_A && type != LDNS_RR_TYPE_AAAA) || ldns_rr_rd_count(rr) != 1) continue;
      const ldns_rdf* rdf = ldns_rr_rdf(rr, 0);
      size_t want = type == LDNS_RR_TYPE_A ? 4 : 16;
      if (ldns_rdf_size(rdf) != want) continue;
      char text[INET6_ADDRSTRLEN] = {};
      inet_ntop(type == LDNS_RR_TYPE_A ? AF_INET : AF_INET6, ldns_rdf_data(rdf), text, sizeof text);
      int ttl = std::clamp(static_cast<int>(std::min<uint32_t>(ldns_rr_ttl(rr), kMaxTtl)), kMinTtl, kMaxTtl) + kTtlGrace;
      auto& lists = by_ttl[ttl];
      (type == LDNS_RR_TYPE_A ? lists.first : lists.second).push_back(text);
    }
    for (const auto& [ttl, lists] : by_ttl) {
      if (auto s = options_.add_addresses(p.ws->uid, lists.first, lists.second, ttl); !s) {
        spdlog::warn("resolver of uid {}: adding addresses: {}", p.ws->uid, s.error().message);
      }
    }
  }
  {
    std::lock_guard lock(p.ws->mutex);
    ++p.ws->stats.answered;
  }
  Finish(p, std::vector<uint8_t>(buf, buf + n));
}

void ResolverHost::Finish(Pending& p, const std::vector<uint8_t>& answer) {
  p.done = true;
  if (p.tcp) {
    if (!p.tcp->closed && !p.ws->stopped) SendTcp(*p.tcp, answer);
    return;
  }
  if (answer.empty() || p.ws->stopped) return;
  (void)sendto(p.ws->fd.get(), answer.data(), answer.size(), MSG_DONTWAIT,
               reinterpret_cast<sockaddr*>(&p.client), p.client_len);
}

}  // namespace berth::network
