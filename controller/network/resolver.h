// The filtering resolvers: one UDP socket and one TCP listener per workspace on its own
// loopback address (ResolverAddress), all served by one thread. TCP is what a stub resolver
// falls back to when an answer comes back truncated (glibc asks without EDNS, so anything over
// 512 bytes does); its questions go upstream over UDP with an EDNS size of kMaxDatagram, and
// an answer that is truncated even then goes back as it came (TC set). A question for a name the workspace's policy
// allows goes to the upstream servers; the addresses in the answer are added to the
// workspace's nftables set for the record's TTL (plus a grace, see kTtlGrace) *before* the
// answer is relayed, so the guest's connection that follows is already allowed. Any other
// question is answered REFUSED, counted and remembered (the last kRecentNames, with times).
//
// Why our own and not dnsmasq: dnsmasq's domain patterns always include subdomains ("/github.com/"
// also allows "x.github.com"), its --nftset adds elements with the set's fixed timeout rather
// than the record's TTL, and it has no per-name refusal count. ldns parses every packet (the
// guest's questions and the upstream answers are untrusted); nothing here builds DNS by hand.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "controller/network/policy.h"

namespace berth::network {

// The guest caches an answer for its TTL and may connect a little after it runs out; the set
// entry outlives it by this much. Very short TTLs are raised to kMinTtl so a set entry is
// not gone before the connection the answer was for.
inline constexpr int kTtlGrace = 60;
inline constexpr int kMinTtl = 30;
inline constexpr int kMaxTtl = 24 * 3600;
inline constexpr size_t kRecentNames = 16;
// TCP connections a workspace may hold open to its resolver at once; more are closed at accept.
inline constexpr size_t kMaxTcpPerWorkspace = 8;

struct RefusedName {
  std::string name;
  int64_t at = 0;  // unix seconds
};

struct ResolverStats {
  uint64_t answered = 0;  // questions forwarded and answered
  uint64_t refused = 0;   // questions refused by the policy
  uint64_t failed = 0;    // upstream did not answer (SERVFAIL to the guest)
  std::vector<RefusedName> recent_refused;  // newest first
};

struct ResolverHostOptions {
  std::vector<std::string> upstreams;  // IPv4/IPv6 addresses, port 53 (or "addr#port" for tests)
  std::chrono::milliseconds upstream_timeout{2000};
  // Adds resolved addresses to the workspace's set; called on the resolver thread before the
  // answer goes out. A failure is logged and the answer still goes out (the connection will be
  // refused, which the guest sees).
  std::function<Status(uid_t uid, const std::vector<std::string>& v4, const std::vector<std::string>& v6,
                       int ttl_s)>
      add_addresses;
  std::function<int64_t()> clock;  // unix seconds
  uint16_t port = 53;  // tests use another
  // A TCP connection is closed when it has been this long without a whole question arriving
  // (one total deadline per question, so a byte at a time does not keep it open).
  std::chrono::milliseconds tcp_question_timeout{10000};
};

class ResolverHost {
 public:
  explicit ResolverHost(ResolverHostOptions options);
  ~ResolverHost();  // stops the thread and closes every socket
  ResolverHost(const ResolverHost&) = delete;
  ResolverHost& operator=(const ResolverHost&) = delete;

  // Starts (or re-points) the resolver of `uid` on `address`:53 with `policy`. Binding happens
  // here, so a port conflict is this call's error. Idempotent: a resolver already there only
  // takes the new policy.
  Status Start(uid_t uid, const std::string& address, const Policy& policy);
  // The policy for the next question; questions in flight finish under the old one.
  Status SetPolicy(uid_t uid, const Policy& policy);
  // Closes the resolver's socket. Unknown uids are fine.
  void Stop(uid_t uid);
  std::optional<ResolverStats> Stats(uid_t uid) const;
  bool Running(uid_t uid) const;

 private:
  struct Workspace;
  struct Pending;
  struct TcpClient;
  void Loop();
  void Wake();
  void OnQuery(const std::shared_ptr<Workspace>& ws);
  void OnAccept(const std::shared_ptr<Workspace>& ws);
  void OnTcpReadable(const std::shared_ptr<TcpClient>& client);
  void OnTcpWritable(TcpClient& client);
  // Queues `answer` (empty: none, the connection closes) with its length prefix and writes
  // what the socket takes now.
  void SendTcp(TcpClient& client, const std::vector<uint8_t>& answer);
  // One question from the guest, over UDP (client address) or TCP (client connection): the
  // policy, the refusal count, or upstream. Loop thread only.
  void Answer(const std::shared_ptr<Workspace>& ws, const uint8_t* data, size_t size, const sockaddr_storage* from,
              socklen_t from_len, const std::shared_ptr<TcpClient>& tcp);
  void SendToUpstream(std::unique_ptr<Pending> pending);
  void OnUpstreamReply(Pending& pending);
  void Finish(Pending& pending, const std::vector<uint8_t>& answer);

  ResolverHostOptions options_;
  mutable std::mutex mutex_;
  std::map<uid_t, std::shared_ptr<Workspace>> workspaces_;
  std::vector<std::unique_ptr<Pending>> pending_;  // loop thread only
  std::vector<std::shared_ptr<TcpClient>> tcp_clients_;  // loop thread only
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace berth::network
