#include "guest-agent/keepawake.h"

namespace berth::agent {

void AddKeepAwakeFlags(CLI::App& cmd, KeepAwakeOptions& options) {
  cmd.add_option("--for", options.duration, "how long, e.g. 90s, 30m, 2h");
  cmd.add_option("--reason", options.reason, "shown in the workspace's activity");
  cmd.add_option("--socket", options.socket, "the agent's local socket");
  cmd.add_option("command", options.command, "command to run while the lease is held");
}

int RunKeepAwake(const KeepAwakeOptions&) { return 1; }

}  // namespace berth::agent
