// berth-agent: flags → options → Agent → run. Everything else lives in the library.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include "guest-agent/agent.h"
#include "guest-agent/keepawake.h"
#include "guest-agent/process_spawn.h"
#include "guest-agent/token.h"

namespace {

// Tells systemd (Type=notify) that the agent is ready; a no-op outside systemd.
void NotifyReady() {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string p = path;
  if (p[0] == '@') p[0] = '\0';  // abstract namespace
  std::memcpy(addr.sun_path, p.data(), std::min(p.size(), sizeof(addr.sun_path) - 1));
  static constexpr char kMsg[] = "READY=1";
  sendto(fd, kMsg, sizeof(kMsg) - 1, 0, reinterpret_cast<sockaddr*>(&addr),
         static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + p.size()));
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-agent: shell, processes, files and ports of a Berth workspace"};
  app.set_config("--config", "", "read options from a TOML/INI file");
  app.set_version_flag("--version", "berth-agent " BERTH_VERSION);
  std::vector<std::string> listen;
  std::string token_file;
  std::string token_source = "auto";
  berth::agent::AgentOptions options;
  std::string log_level = "info";
  app.add_option("--listen", listen, "unix:PATH | tcp:HOST:PORT | vsock:PORT (repeatable)");
  app.add_option("--token-file", token_file, "read the API token from this file");
  app.add_option("--token-source", token_source,
                 "auto (file, then $BERTH_AGENT_TOKEN, then firmware) | file | env | firmware")
      ->check(CLI::IsMember({"auto", "file", "env", "firmware"}));
  app.add_option("--default-user", options.default_user, "user for exec and files by default");
  app.add_option("--local-socket", options.local_socket,
                 "token-less unix socket for keep-awake leases ('' to disable)");
  app.add_option("--workspace-dir", options.workspace_dir, "mount point of the data disk");
  app.add_option("--identity-root", options.identity_root,
                 "where a fork's new identity applies: / in a guest, a directory on a host ('' refuses it)");
  app.add_option("--max-connections", options.server.max_connections, "cap on open connections");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");

  berth::agent::KeepAwakeOptions keepawake;
  auto* keepawake_cmd = app.add_subcommand(
      "keepawake", "keep this workspace from idling out, for a while or while COMMAND runs");
  berth::agent::AddKeepAwakeFlags(*keepawake_cmd, keepawake);

  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  if (*keepawake_cmd) return berth::agent::RunKeepAwake(keepawake);

  // Many tunnels at once need many descriptors; what the agent starts keeps the usual limit.
  if (auto files = berth::agent::RaiseOwnFileLimit(); files) {
    spdlog::debug("file limit {}", *files);
  } else {
    spdlog::warn("file limit: {}", files.error().message);
  }

  if (listen.empty()) listen.push_back("vsock:1024");
  for (const auto& text : listen) {
    auto endpoint = berth::Endpoint::Parse(text);
    if (!endpoint) {
      std::cerr << "berth-agent: " << endpoint.error().message << "\n";
      return 2;
    }
    options.listen.push_back(*endpoint);
  }

  berth::agent::TokenSources sources;
  sources.source = token_source;
  sources.file = token_file;
  if (const char* env = std::getenv(berth::agent::kTokenEnv)) sources.env = env;
  auto token = berth::agent::ChooseToken(sources);
  unsetenv(berth::agent::kTokenEnv);  // children must not inherit it
  if (!token) {
    std::cerr << "berth-agent: " << token.error().message << "\n";
    return 2;
  }
  options.token = std::move(*token);

  signal(SIGPIPE, SIG_IGN);
  boost::asio::io_context io(1);
  berth::agent::Agent agent(io, options);
  auto bound = agent.Start();
  if (!bound) {
    std::cerr << "berth-agent: " << bound.error().message << "\n";
    return 1;
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: shutting down", sig);
    agent.Stop();
    io.stop();
  });
  for (const auto& ep : *bound) std::cout << "berth-agent listening on " << ep.ToString() << "\n";
  std::cout << "berth-agent ready" << std::endl;
  NotifyReady();
  io.run();
  return 0;
}
