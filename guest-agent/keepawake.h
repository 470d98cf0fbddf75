// `berth-agent keepawake`: takes a keep-awake lease through the agent's local socket, for a
// duration or for as long as a command runs.
//
//   berth-agent keepawake --for 2h [--reason R]          takes a 2 h lease, prints
//                                                         "lease ID until ISO8601", exits 0
//   berth-agent keepawake --for 2h [--reason R] -- CMD…  runs CMD (stdio inherited) and keeps
//                                                         the workspace awake while it runs
//
// With a command, --for is the most it keeps the workspace awake: it holds a short lease
// (kLeaseSlice) and renews it every kRenewEvery while the command runs and --for has not
// passed, then releases it when the command exits. If keepawake itself is killed, the lease
// lapses within kLeaseSlice instead of holding the workspace up for all of --for. Exit code:
// the command's, 128+N if a signal N killed it, 127 if it could not be started. If the agent is
// unreachable the command still runs (with a warning): the work matters more than the lease.
// SIGINT and SIGQUIT reach the command from the terminal; SIGTERM and SIGHUP are forwarded.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/error.h"

namespace berth::agent {

struct KeepAwakeOptions {
  std::string duration = "1h";  // --for: "90s", "30m", "2h", "1h30m", "1d"; a bare number is seconds
  std::string reason;
  std::string socket = "/run/berth/agent.sock";
  std::vector<std::string> command;  // after "--"
};

// While a command runs: the lease held at a time, and how often it is renewed.
inline constexpr std::chrono::seconds kLeaseSlice{180};
inline constexpr std::chrono::seconds kRenewEvery{60};

void AddKeepAwakeFlags(CLI::App& cmd, KeepAwakeOptions& options);
// Exit code: the command's; without a command 0 on success, 1 if the lease failed, 2 for
// bad flags.
int RunKeepAwake(const KeepAwakeOptions& options);

}  // namespace berth::agent
