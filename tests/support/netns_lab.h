// A network of our own for the guest-network tests and benchmark: the test process moves into a
// fresh network namespace (the "host", where berthd's table goes), joined by a veth pair to a
// second one (the "peer", standing for the internet, a private network and the metadata
// service). Every address used lives in one of these two namespaces, and the host namespace has
// no other interface, so no packet leaves the machine.
//
//   host ns: lo 127.0.0.1, ::1, 198.51.100.1 (the host's own public address);
//            bth0 10.254.0.1/24 (a private address of the host); default via 10.254.0.2
//   peer ns: btp0 10.254.0.2/24 (a private address elsewhere); on lo 169.254.169.254 (metadata),
//            203.0.113.10 (allowed.test), 203.0.113.20 (denied.test), 203.0.113.53 (DNS)
// Echo servers listen on port kEchoPort at every address; the DNS server answers allowed.test
// and denied.test (TTL 300) and NXDOMAIN otherwise.
//
// Needs root, `ip` (iproute2). Create it once per process, before any other thread starts
// (unshare moves only the calling thread, and threads started later inherit its namespace).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace berth::testing {

inline constexpr uint16_t kEchoPort = 8080;

class NetnsLab {
 public:
  // The lab of this process, made on first use; an error (not root, no iproute2) is returned
  // every time.
  static Result<NetnsLab*> Get();
  ~NetnsLab();

  const std::string& peer_name() const { return peer_; }
  // Runs `fn` as `uid` (and gid `uid`, no supplementary groups) in a forked child; its return
  // value is the exit code (255 when it could not become the uid, 254 on a timeout).
  static int RunAs(uid_t uid, const std::function<int()>& fn, std::chrono::seconds limit = std::chrono::seconds(20));
  // Connects to addr:port (v4 or v6 literal) with a deadline, writes a byte and reads it back:
  // true when the echo came.
  static bool Echo(const std::string& addr, uint16_t port, std::chrono::milliseconds limit = std::chrono::milliseconds(3000));
  // A DNS question for `name` (type A) sent over UDP to server:53; the rcode and the A records
  // of the answer, or an error after `limit`.
  struct DnsAnswer {
    int rcode = -1;
    std::vector<std::string> addresses;
  };
  static Result<DnsAnswer> Query(const std::string& server, const std::string& name,
                                 std::chrono::milliseconds limit = std::chrono::milliseconds(3000));
  // Runs argv in the peer namespace (e.g. a sink for the benchmark); its exit code.
  int RunInPeer(const std::vector<std::string>& argv);

 private:
  NetnsLab() = default;
  Status Setup();
  void Serve(const std::string& addr, bool v6, bool peer);
  void ServeDns();

  std::string peer_;
  std::atomic<bool> stop_{false};
  std::vector<int> listeners_;
  std::vector<std::thread> threads_;
};

}  // namespace berth::testing
