// Configuration of berth-agent: every field has a default that suits a workspace VM.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/endpoint.h"
#include "common/http/server.h"

namespace berth::agent {

struct AgentOptions {
  // Where the authenticated API listens (vsock in production, TCP for the forward transport,
  // unix in tests). A vsock listener the kernel does not support is skipped with a warning.
  std::vector<Endpoint> listen;
  // The shared secret every request but GET /v1/health must carry. Never logged.
  std::string token;
  // The user that exec and file operations run as when the request names none.
  std::string default_user = "agent";
  // A local, token-less unix socket for code inside the guest (keep-awake leases). Empty: off.
  std::string local_socket = "/run/berth/agent.sock";
  // Directory that holds the workspace's data disk; reported by /v1/info.
  std::string workspace_dir = "/workspace";
  // Where POST /v1/identity (a fork's new hostname, machine-id, MAC and SSH host keys) applies:
  // "/" in a guest (its image's unit says so), a directory of its own for an agent on a host
  // (files under it; no hostname or NIC of the host changes). Empty: the call is refused.
  std::string identity_root;
  // Its connections: every exec stream, session and tunnel (each preview WebSocket is one) holds
  // one. berthd, its only client, caps each client address (512) and key itself; this cap is
  // for all of them together, so that a thousand preview WebSockets of several clients fit
  // (bench/run-preview-bench). The file limit is no bound here: RaiseOwnFileLimit.
  http::ServerOptions server = [] {
    http::ServerOptions o;
    o.max_connections = 4096;
    return o;
  }();
  // Threads for blocking file-system work (fsync, tar, directory walks).
  int blocking_threads = 4;
};

}  // namespace berth::agent
