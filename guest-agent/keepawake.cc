#include "guest-agent/keepawake.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "common/client/api_client.h"
#include "common/client/ports.h"
#include "common/duration.h"
#include "common/protocol/ports.h"
#include "common/unique.h"

extern char** environ;

namespace berth::agent {
namespace {

using Steady = std::chrono::steady_clock;
constexpr std::string_view kScope = "/v1";

std::atomic<pid_t> g_child{0};

void ForwardSignal(int sig) {
  pid_t child = g_child.load();
  if (child > 0) kill(child, sig);
}

void Warn(std::string_view message) {
  std::cerr << "berth-agent keepawake: " << message << "\n";
}

std::string DefaultReason(const std::vector<std::string>& command) {
  std::string reason;
  for (const auto& arg : command) {
    if (!reason.empty()) reason += ' ';
    reason += arg;
  }
  if (reason.size() > protocol::kMaxLeaseReason) {
    reason.resize(protocol::kMaxLeaseReason - 3);
    reason += "...";
  }
  return reason.empty() ? "keepawake" : reason;
}

// Starts the command with stdio inherited and the signals the parent ignores or forwards back
// at their defaults.
Result<pid_t> Spawn(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (err != 0) return Fail(ErrnoError(err, fmt::format("start {}", command[0])));
  return pid;
}

// Waits up to `timeout` for the child; its wait status once it has exited.
std::optional<int> WaitChild(pid_t pid, int pidfd, std::chrono::milliseconds timeout) {
  auto deadline = Steady::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return 0;  // not our child any more: nothing to wait for
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now());
    if (left.count() <= 0) return std::nullopt;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      poll(&p, 1, static_cast<int>(left.count()));  // EINTR (a forwarded signal): loop
    } else {
      // Kernels before 5.3 have no pidfd: poll the child a few times a second.
      usleep(static_cast<useconds_t>(std::min<int64_t>(left.count(), 100) * 1000));
    }
  }
}

}  // namespace

void AddKeepAwakeFlags(CLI::App& cmd, KeepAwakeOptions& options) {
  cmd.add_option("--for", options.duration,
                 "how long at most, e.g. 90s, 30m, 2h (with a command: while it runs, up to this)");
  cmd.add_option("--reason", options.reason, "shown in the workspace's activity");
  cmd.add_option("--socket", options.socket, "the agent's local socket");
  cmd.add_option("command", options.command, "command to run while the lease is held (after --)");
}

int RunKeepAwake(const KeepAwakeOptions& options) {
  // --for: common/duration.h's forms ("90s", "30m", "2h", "1h30m", "1d"; a bare number is
  // seconds), more than nothing.
  auto duration = ParseDuration(options.duration);
  if (!duration) {
    Warn(duration.error().message);
    return 2;
  }
  if (duration->count() == 0) {
    Warn("--for must be longer than 0s");
    return 2;
  }
  if (*duration > protocol::kMaxLease) {
    Warn(fmt::format("--for is at most {}s (7 days)", protocol::kMaxLease.count()));
    return 2;
  }
  if (options.reason.size() > protocol::kMaxLeaseReason) {
    Warn(fmt::format("--reason is at most {} bytes", protocol::kMaxLeaseReason));
    return 2;
  }
  Endpoint endpoint;
  endpoint.kind = Endpoint::Kind::kUnix;
  endpoint.path = options.socket;
  client::ClientOptions client_options;
  client_options.connect_timeout = std::chrono::seconds(5);
  client_options.io_timeout = std::chrono::seconds(15);
  client::ApiClient client(endpoint, "", client_options);

  if (options.command.empty()) {
    auto lease = client::TakeLease(client, kScope, {options.reason, *duration});
    if (!lease) {
      Warn(fmt::format("no lease from {}: {}", options.socket, lease.error().message));
      return 1;
    }
    std::cout << fmt::format("lease {} until {}", lease->id, lease->until) << std::endl;
    return 0;
  }

  std::string reason = options.reason.empty() ? DefaultReason(options.command) : options.reason;
  auto deadline = Steady::now() + *duration;
  auto slice = [&] {
    auto left = std::chrono::ceil<std::chrono::seconds>(deadline - Steady::now());
    return std::clamp(left, protocol::kMinLease, std::min(*duration, kLeaseSlice));
  };
  std::optional<uint64_t> lease_id;
  if (auto lease = client::TakeLease(client, kScope, {reason, slice()})) {
    lease_id = lease->id;
  } else {
    Warn(fmt::format("running without a lease: {}", lease.error().message));
  }

  // The terminal sends SIGINT/SIGQUIT to the command itself; we outlive it to release the lease.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction forward {};
  forward.sa_handler = ForwardSignal;
  sigaction(SIGINT, &ignore, nullptr);
  sigaction(SIGQUIT, &ignore, nullptr);
  sigaction(SIGPIPE, &ignore, nullptr);
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGHUP, &forward, nullptr);

  int exit_code = 0;
  auto child = Spawn(options.command);
  if (!child) {
    Warn(child.error().message);
    exit_code = 127;
  } else {
    g_child = *child;
    UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, *child, 0)));
    auto next_renew = Steady::now() + kRenewEvery;
    for (;;) {
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_renew - Steady::now());
      auto status = WaitChild(*child, pidfd.get(), std::max(wait, std::chrono::milliseconds(0)));
      if (status) {
        exit_code = WIFSIGNALED(*status) ? 128 + WTERMSIG(*status) : WEXITSTATUS(*status);
        break;
      }
      next_renew = Steady::now() + kRenewEvery;
      if (Steady::now() >= deadline) continue;  // --for has passed: let the lease lapse
      Result<protocol::Lease> renewed = Fail(ErrorCode::kNotFound, "no lease");
      if (lease_id) renewed = client::RenewLease(client, kScope, *lease_id, slice());
      if (!renewed && renewed.error().code == ErrorCode::kNotFound) {
        // Expired (the agent restarted, or we were stopped for a while): take a new one.
        renewed = client::TakeLease(client, kScope, {reason, slice()});
      }
      if (renewed) {
        lease_id = renewed->id;
      } else {
        Warn(fmt::format("could not renew the lease: {}", renewed.error().message));
      }
    }
    g_child = 0;
  }
  if (lease_id) {
    auto released = client::ReleaseLease(client, kScope, *lease_id);
    if (!released && released.error().code != ErrorCode::kNotFound) {
      Warn(fmt::format("could not release lease {}: {}", *lease_id, released.error().message));
    }
  }
  return exit_code;
}

}  // namespace berth::agent
