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
  // passt must run as the user QEMU runs as (it connects to passt's socket).
  std::string user = "libvirt-qemu";
  std::chrono::milliseconds ready_timeout{5000};
};

// The command line, for tests and logs.
std::vector<std::string> PasstArgv(const PasstOptions& options);

// Starts passt (it daemonizes) and waits until its socket exists. Returns its pid (from the
// pid file).
Result<pid_t> StartPasst(const PasstOptions& options);

// The pid in `pid_file` if that process is alive and is passt.
Result<pid_t> RunningPasst(const std::string& pid_file);

}  // namespace berth::network
