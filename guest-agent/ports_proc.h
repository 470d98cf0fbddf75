// Listening TCP sockets of the guest, read from /proc: the pure parsers (unit-tested on sample
// text) and the blocking scan that joins sockets to their owning processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/protocol/ports.h"

namespace berth::agent {

// One row of /proc/net/tcp{,6} in the LISTEN state.
struct ListeningSocket {
  uint16_t port = 0;
  std::string address;  // numeric, e.g. "127.0.0.1", "::"
  std::string family;   // "ipv4" | "ipv6"
  uint32_t uid = 0;
  uint64_t inode = 0;
};

// Parses the text of /proc/net/tcp (ipv6 = false) or /proc/net/tcp6 (ipv6 = true) and returns
// the sockets in state 0A (LISTEN). Malformed lines are skipped, never fatal. Addresses are in
// the kernel's host byte order, as /proc prints them on the machine that produced the text.
std::vector<ListeningSocket> ParseProcNetTcp(std::string_view text, bool ipv6);

// The inode of a "/proc/PID/fd/N" link target "socket:[12345]"; 0 for anything else.
uint64_t SocketInodeFromLink(std::string_view link);

// "a\0b\0c\0" -> "a b c", truncated to `max` bytes.
std::string JoinCmdline(std::string_view raw, size_t max = 4096);

// Limits on the /proc walk so a guest with huge numbers of processes or descriptors cannot
// make one request take unbounded time.
struct PortScanLimits {
  size_t max_fds = 200'000;             // readlink calls over all processes
  std::chrono::milliseconds deadline{2000};  // stop attributing owners after this
};

// Blocking: reads /proc/net/tcp{,6}, finds owners in /proc/*/fd, resolves user names. Sorted
// by port, then family and address. Run it on the blocking pool.
std::vector<protocol::PortInfo> ListListeningPorts(const PortScanLimits& limits = {});

}  // namespace berth::agent
