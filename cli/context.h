// What a command runs with: the global options, the process environment (streams, terminals,
// variables, clock), the resolved configuration and clients for berthd. One per invocation,
// used from the main thread.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/config.h"
#include "common/client/api_client.h"
#include "common/client/berth_client.h"
#include "common/error.h"

namespace berth::cli {

// The process around a command, injectable for tests.
struct Environment {
  GetEnvFn getenv;
  std::istream* in = nullptr;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  bool stdin_tty = false;
  bool stdout_tty = false;
  bool stderr_tty = false;
  std::function<std::chrono::system_clock::time_point()> now;

  // The real process: std::cin/cout/cerr, getenv, isatty on fds 0-2, the system clock.
  static Environment FromProcess();
};

// Flags every command takes (`berth --url U ls`, `berth ls --json`).
struct GlobalOptions {
  std::string url;          // --url
  std::string api_key;      // --api-key
  std::string config_path;  // --config
  bool json = false;        // --json on listing and get commands
  bool quiet = false;       // -q: no progress or notes on stderr
};

// How long a command waits for a workspace to run before it opens a stream: a shutdown under
// way, then a cold boot (a minute or two under TCG, more on a loaded host).
inline constexpr std::chrono::seconds kConnectTimeout{600};

class Context {
 public:
  Context(GlobalOptions options, Environment env);

  const GlobalOptions& options() const { return options_; }
  const Environment& env() const { return env_; }
  std::ostream& out() { return *env_.out; }
  std::ostream& err() { return *env_.err; }
  bool json() const { return options_.json; }
  std::chrono::system_clock::time_point now() const { return env_.now(); }
  // `value` as indented JSON on stdout (the --json output).
  void PrintJson(const nlohmann::json& value);
  // A note for people on stderr ("waiting for ws to start…"), unless -q.
  void Note(std::string_view message);

  // The config file's path (--config, $BERTH_CONFIG, XDG, ~/.config).
  std::string ConfigPath() const;
  // URL and key from flags, environment and the config file. Fails on a malformed file.
  Result<ResolvedConfig> Config();

  // Uses this URL and key from now on (`berth login` checks them before saving).
  void UseServer(std::string url, Source url_source, std::string api_key, Source key_source);

  // The typed client for berthd (common/client/berth_client.h) with the configured URL, key
  // and base path. invalid_argument when no URL is configured or it is malformed.
  Result<client::BerthClient> Berth();

  // Before an exec, a session, a copy or a tunnel: the workspace's agent through berthd, once
  // the workspace runs (a booting one is waited for, a stopped or hibernated one started, with
  // a note on stderr; see BerthClient::EnsureRunning). Its calls have no deadline of their own:
  // they last as long as the command does. `running`, when given, gets the workspace.
  Result<client::WorkspaceAgent> Connect(std::string_view ws, v1::Workspace* running = nullptr);

  // The error with a hint for people: cannot reach berthd (which URL, from where), a refused
  // API key (where it came from), no key at all. Other errors pass unchanged.
  Error Explain(Error error);
  // Prints "berth: <explained message>" on stderr and returns the error's exit code; for
  // commands that go on after one of several targets failed.
  int Report(const Error& error);

 private:
  Result<const ServerUrl*> Server();

  GlobalOptions options_;
  Environment env_;
  std::optional<ResolvedConfig> config_;
  std::optional<ServerUrl> server_;
};

}  // namespace berth::cli
