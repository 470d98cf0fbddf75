// `berth-agent keepawake`: takes a keep-awake lease through the agent's local socket, for a
// duration or for as long as a command runs.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace berth::agent {

struct KeepAwakeOptions {
  std::string duration = "1h";  // --for: "90s", "30m", "2h"
  std::string reason;
  std::string socket = "/run/berth/agent.sock";
  std::vector<std::string> command;  // after "--"
};

void AddKeepAwakeFlags(CLI::App& cmd, KeepAwakeOptions& options);
// Exit code: the command's, or 0/1 when there is no command.
int RunKeepAwake(const KeepAwakeOptions& options);

}  // namespace berth::agent
