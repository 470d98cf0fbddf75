// The filtering resolver on real sockets (loopback, unprivileged ports): answers by policy
// over UDP and TCP, the TCP fallback for answers that do not fit a plain UDP datagram, the
// addresses it hands to the firewall, and the bounds a hostile guest meets on TCP.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <ldns/ldns.h>

#include "common/unique.h"
#include "controller/network/resolver.h"

using namespace berth;
using namespace berth::network;

namespace {

constexpr int kBigRecords = 40;  // 40 A records: ~700 bytes, over the 512 of a plain datagram

uint16_t FreePort() {
  // A port free for both UDP and TCP on 127.0.0.1 right now.
  for (;;) {
    UniqueFd u(socket(AF_INET, SOCK_DGRAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(u.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    getsockname(u.get(), reinterpret_cast<sockaddr*>(&a), &len);
    UniqueFd t(socket(AF_INET, SOCK_STREAM, 0));
    if (bind(t.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return ntohs(a.sin_port);
  }
}

std::vector<uint8_t> Wire(ldns_pkt* p) {
  uint8_t* wire = nullptr;
  size_t size = 0;
  REQUIRE(ldns_pkt2wire(&wire, p, &size) == LDNS_STATUS_OK);
  std::vector<uint8_t> out(wire, wire + size);
  free(wire);
  return out;
}

std::vector<uint8_t> Question(const std::string& name, uint16_t id, uint16_t edns = 0) {
  ldns_pkt* q = ldns_pkt_query_new(ldns_dname_new_frm_str(name.c_str()), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
  ldns_pkt_set_id(q, id);
  if (edns) ldns_pkt_set_edns_udp_size(q, edns);
  auto out = Wire(q);
  ldns_pkt_free(q);
  return out;
}

struct Parsed {
  int rcode = -1;
  bool truncated = false;
  int answers = 0;
  uint16_t id = 0;
};

Parsed ParseAnswer(const std::vector<uint8_t>& wire) {
  ldns_pkt* p = nullptr;
  Parsed out;
  if (ldns_wire2pkt(&p, wire.data(), wire.size()) != LDNS_STATUS_OK) return out;
  out.rcode = ldns_pkt_get_rcode(p);
  out.truncated = ldns_pkt_tc(p);
  out.answers = static_cast<int>(ldns_pkt_ancount(p));
  out.id = ldns_pkt_id(p);
  ldns_pkt_free(p);
  return out;
}

// The upstream: big.test has kBigRecords A records, which it sends whole only to a question
// with an EDNS size of at least 4096, and truncated (TC, no records) to one without; small.test
// has one record.
class Upstream {
 public:
  Upstream() {
    fd_ = UniqueFd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Upstream() {
    stop_ = true;
    thread_.join();
  }
  std::string address() const { return "127.0.0.1#" + std::to_string(port_); }
  std::atomic<int> questions{0};

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      uint8_t buf[4096];
      sockaddr_storage from{};
      socklen_t from_len = sizeof from;
      ssize_t n = recvfrom(fd_.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
      if (n <= 0) continue;
      ++questions;
      ldns_pkt* q = nullptr;
      if (ldns_wire2pkt(&q, buf, static_cast<size_t>(n)) != LDNS_STATUS_OK) continue;
      const ldns_rr* asked = ldns_rr_list_rr(ldns_pkt_question(q), 0);
      char* owner = ldns_rdf2str(ldns_rr_owner(asked));
      std::string name = owner;
      free(owner);
      ldns_pkt* a = ldns_pkt_new();
      ldns_pkt_set_id(a, ldns_pkt_id(q));
      ldns_pkt_set_qr(a, true);
      ldns_pkt_set_rd(a, true);
      ldns_pkt_set_ra(a, true);
      ldns_pkt_push_rr(a, LDNS_SECTION_QUESTION, ldns_rr_clone(asked));
      int records = name == "big.test." ? kBigRecords : 1;
      if (records > 1 && ldns_pkt_edns_udp_size(q) < 4096) {
        ldns_pkt_set_tc(a, true);
      } else {
        for (int i = 0; i < records; ++i) {
          ldns_rr* rr = nullptr;
          std::string text = name + " 300 IN A 10.9." + std::to_string(i / 200) + "." + std::to_string(i % 200 + 1);
          REQUIRE(ldns_rr_new_frm_str(&rr, text.c_str(), 0, nullptr, nullptr) == LDNS_STATUS_OK);
          ldns_pkt_push_rr(a, LDNS_SECTION_ANSWER, rr);
        }
      }
      auto wire = Wire(a);
      (void)sendto(fd_.get(), wire.data(), wire.size(), 0, reinterpret_cast<sockaddr*>(&from), from_len);
      ldns_pkt_free(a);
      ldns_pkt_free(q);
    }
  }
  UniqueFd fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Fixture {
  Fixture() : port(FreePort()) {
    ResolverHostOptions o;
    o.upstreams = {upstream.address()};
    o.upstream_timeout = std::chrono::milliseconds(1000);
    o.port = port;
    o.tcp_question_timeout = std::chrono::milliseconds(400);
    o.clock = [] { return int64_t{1700000000}; };
    o.add_addresses = [this](uid_t uid, const std::vector<std::string>& v4, const std::vector<std::string>&, int ttl) {
      std::lock_guard lock(mutex);
      for (const auto& a : v4) added.push_back(a);
      last_uid = uid;
      last_ttl = ttl;
      return Status{};
    };
    host = std::make_unique<ResolverHost>(std::move(o));
    Policy policy;
    policy.egress = Egress::kAllowlist;
    policy.names = {"big.test", "small.test"};
    REQUIRE(host->Start(kUid, "127.0.0.1", policy));
  }
  ~Fixture() { host.reset(); }

  std::vector<uint8_t> AskUdp(const std::vector<uint8_t>& q) {
    UniqueFd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in a = Address();
    REQUIRE(connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(send(fd.get(), q.data(), q.size(), 0) == static_cast<ssize_t>(q.size()));
    pollfd p{fd.get(), POLLIN, 0};
    REQUIRE(poll(&p, 1, 5000) == 1);
    std::vector<uint8_t> buf(4096);
    ssize_t n = recv(fd.get(), buf.data(), buf.size(), 0);
    REQUIRE(n > 0);
    buf.resize(static_cast<size_t>(n));
    return buf;
  }
  UniqueFd ConnectTcp() {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a = Address();
    REQUIRE(connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return fd;
  }
  // One question on `fd`, length-prefixed; the answer without its prefix (empty: closed).
  static std::vector<uint8_t> AskTcp(int fd, const std::vector<uint8_t>& q) {
    std::vector<uint8_t> framed = {static_cast<uint8_t>(q.size() >> 8), static_cast<uint8_t>(q.size() & 0xff)};
    framed.insert(framed.end(), q.begin(), q.end());
    REQUIRE(send(fd, framed.data(), framed.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(framed.size()));
    auto head = ReadExactly(fd, 2);
    if (head.size() != 2) return {};
    return ReadExactly(fd, (size_t{head[0]} << 8) | head[1]);
  }
  static std::vector<uint8_t> ReadExactly(int fd, size_t n) {
    std::vector<uint8_t> out;
    while (out.size() < n) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5000) != 1) return out;
      uint8_t buf[4096];
      ssize_t got = recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
      if (got <= 0) return out;
      out.insert(out.end(), buf, buf + got);
    }
    return out;
  }
  // True once the peer closed `fd` (EOF), within `within`.
  static bool ClosedWithin(int fd, std::chrono::milliseconds within) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(within.count())) != 1) return false;
    uint8_t b;
    return recv(fd, &b, 1, MSG_DONTWAIT) == 0;
  }
  sockaddr_in Address() const {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  size_t Added() {
    std::lock_guard lock(mutex);
    return added.size();
  }

  static constexpr uid_t kUid = 2000042;
  Upstream upstream;
  uint16_t port;
  std::mutex mutex;
  std::vector<std::string> added;
  uid_t last_uid = 0;
  int last_ttl = 0;
  std::unique_ptr<ResolverHost> host;
};

}  // namespace

TEST_CASE("resolver: an allowed name is answered over UDP and its address handed to the firewall first",
          "[network][resolver]") {
  Fixture f;
  auto a = ParseAnswer(f.AskUdp(Question("small.test.", 7)));
  CHECK(a.rcode == LDNS_RCODE_NOERROR);
  CHECK(a.id == 7);
  CHECK(a.answers == 1);
  std::lock_guard lock(f.mutex);
  CHECK(f.added == std::vector<std::string>{"10.9.0.1"});
  CHECK(f.last_uid == Fixture::kUid);
  CHECK(f.last_ttl == 300 + kTtlGrace);
}

TEST_CASE("resolver: a name the policy does not allow is refused over UDP and TCP, and counted",
          "[network][resolver]") {
  Fixture f;
  CHECK(ParseAnswer(f.AskUdp(Question("denied.test.", 8))).rcode == LDNS_RCODE_REFUSED);
  auto fd = f.ConnectTcp();
  auto a = ParseAnswer(Fixture::AskTcp(fd.get(), Question("denied.test.", 9)));
  CHECK(a.rcode == LDNS_RCODE_REFUSED);
  CHECK(a.id == 9);
  CHECK(f.upstream.questions == 0);
  auto stats = f.host->Stats(Fixture::kUid);
  REQUIRE(stats.has_value());
  CHECK(stats->refused == 2);
  REQUIRE(stats->recent_refused.size() == 1);
  CHECK(stats->recent_refused[0].name == "denied.test.");
}

TEST_CASE("resolver: an answer too big for a plain datagram comes whole over TCP", "[network][resolver]") {
  Fixture f;
  // A stub resolver asks over UDP without EDNS, gets TC, and asks again over TCP.
  auto udp = ParseAnswer(f.AskUdp(Question("big.test.", 10)));
  CHECK(udp.truncated);
  CHECK(udp.answers == 0);
  auto fd = f.ConnectTcp();
  auto tcp = ParseAnswer(Fixture::AskTcp(fd.get(), Question("big.test.", 11)));
  CHECK(tcp.rcode == LDNS_RCODE_NOERROR);
  CHECK_FALSE(tcp.truncated);
  CHECK(tcp.id == 11);
  CHECK(tcp.answers == kBigRecords);
  CHECK(f.Added() == static_cast<size_t>(kBigRecords));
  // The same connection takes the next question.
  CHECK(ParseAnswer(Fixture::AskTcp(fd.get(), Question("small.test.", 12))).answers == 1);
}

TEST_CASE("resolver: a TCP question sent a byte at a time is cut at its deadline", "[network][resolver]") {
  Fixture f;
  auto fd = f.ConnectTcp();
  auto q = Question("small.test.", 13);
  std::vector<uint8_t> framed = {0, static_cast<uint8_t>(q.size())};
  framed.insert(framed.end(), q.begin(), q.end());
  // One byte every 100 ms: each read is prompt, the question as a whole is not (deadline 400 ms).
  bool closed = false;
  for (size_t i = 0; i < framed.size() && !closed; ++i) {
    if (send(fd.get(), &framed[i], 1, MSG_NOSIGNAL) != 1) break;
    closed = Fixture::ClosedWithin(fd.get(), std::chrono::milliseconds(100));
  }
  CHECK((closed || Fixture::ClosedWithin(fd.get(), std::chrono::milliseconds(3000))));
  CHECK(f.upstream.questions == 0);
}

TEST_CASE("resolver: a guest holds at most kMaxTcpPerWorkspace TCP connections, and bad lengths close",
          "[network][resolver]") {
  Fixture f;
  std::vector<UniqueFd> held;
  for (size_t i = 0; i < kMaxTcpPerWorkspace; ++i) held.push_back(f.ConnectTcp());
  // The ones held are served...
  CHECK(ParseAnswer(Fixture::AskTcp(held[0].get(), Question("small.test.", 14))).answers == 1);
  // ...and one more is closed at once.
  auto extra = f.ConnectTcp();
  CHECK(Fixture::ClosedWithin(extra.get(), std::chrono::milliseconds(2000)));
  // A length of zero, or more than any question needs, closes the connection.
  uint8_t zero[2] = {0, 0};
  REQUIRE(send(held[1].get(), zero, 2, MSG_NOSIGNAL) == 2);
  CHECK(Fixture::ClosedWithin(held[1].get(), std::chrono::milliseconds(2000)));
  uint8_t huge[2] = {0xff, 0xff};
  REQUIRE(send(held[2].get(), huge, 2, MSG_NOSIGNAL) == 2);
  CHECK(Fixture::ClosedWithin(held[2].get(), std::chrono::milliseconds(2000)));
  // Garbage that is not a DNS question closes it too, unanswered.
  std::vector<uint8_t> junk = {0, 4, 'j', 'u', 'n', 'k'};
  REQUIRE(send(held[3].get(), junk.data(), junk.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(junk.size()));
  CHECK(Fixture::ClosedWithin(held[3].get(), std::chrono::milliseconds(2000)));
}

TEST_CASE("resolver: stopping a workspace's resolver closes its TCP connections", "[network][resolver]") {
  Fixture f;
  auto fd = f.ConnectTcp();
  CHECK(ParseAnswer(Fixture::AskTcp(fd.get(), Question("small.test.", 15))).answers == 1);
  f.host->Stop(Fixture::kUid);
  CHECK(Fixture::ClosedWithin(fd.get(), std::chrono::milliseconds(2000)));
  CHECK_FALSE(f.host->Running(Fixture::kUid));
}
