// A guest network that cannot reach the host: one passt process per VM, started by berthd as
// the QEMU user and attached to QEMU as a stream netdev. `--no-map-gw` keeps the guest from
// reaching the host's loopback through the gateway address (plain slirp maps 10.0.2.2 to the
// host's 127.0.0.1, so every loopback service, berthd included, would be one connection away
// from untrusted code). `--one-off` makes passt exit when its VM disconnects, so a stopped VM
// leaves no process behind. Measured here: DHCP, DNS and outbound HTTP to the Debian mirror
// work; the gateway address does not answer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include "common/error.h"

namespace berth::network {

struct PasstOptions {
  std::string binary = "/usr/bin/passt";
  std::string socket_path;  // where QEMU connects
  std::string pid_file;
  std::string log_file;
  // Host 127.0.0.1:first → guest port second (the agent's TCP port for the forward
  // transport). Loopback only: nothing is exposed beyond this host.
  std::vector<std::pair<uint16_t, uint16_t>> tcp_forwards;
  // passt must run as the user QEMU runs as (it connects to passt's socket): `uid`/`gid` when
  // set (network isolation: the workspace's own uid, which QEMU runs as too through the
  // domain's DAC seclabel), else the account `user`. berthd drops to it before exec, so passt
  // never runs as root.
  std::string user = "libvirt-qemu";
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  // The DNS server passt tells the guest about (DHCP/NDP). Under isolation every port-53
  // packet of the workspace's uid is turned into its filtering resolver by nftables, so this
  // only has to be an address the guest sends out through passt (kGuestDnsAddress). Empty:
  // passt's default (the host's resolv.conf).
  std::string dns;
  std::chrono::milliseconds ready_timeout{5000};
};

// The command line, for tests and logs.
std::vector<std::string> PasstArgv(const PasstOptions& options);

// Starts passt (it daemonizes) and waits until its socket exists. Returns its pid (from the
// pid file).
Result<pid_t> StartPasst(const PasstOptions& options);

// What the guest is told its DNS server is, under isolation: TEST-NET-1 (RFC 5737), which is
// nobody's, so nothing but berthd's rewrite to the workspace's resolver ever answers it.
inline constexpr const char* kGuestDnsAddress = "192.0.2.53";

// The pid in `pid_file` if that process is alive, is passt and (when `uid` is given) runs as
// that uid. The pid file lives in a directory the QEMU user owns: it is opened without
// following symlinks and read with a size bound, and the pid is checked before anyone acts on it.
Result<pid_t> RunningPasst(const std::string& pid_file, std::optional<uid_t> uid = std::nullopt);

// The pid in a pid file opened with O_NOFOLLOW (a symlink planted by the directory's owner
// is refused); not_found when missing or malformed.
Result<pid_t> ReadPidFile(const std::string& pid_file);
// The real uid of a live process; not_found when it is gone.
Result<uid_t> ProcessUid(pid_t pid);

}  // namespace berth::network
