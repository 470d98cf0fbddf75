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

  // A client for berthd. invalid_argument when no URL is configured or it is malformed.
  Result<client::ApiClient> Client(const client::ClientOptions& options = {});
  // `path` ("/v1/…") below the URL's base path.
  std::string Route(std::string_view path);
  // "/v1/workspaces/{ws}{rest}" with `ws` (an id or a name) percent-encoded: the scope of the
  // typed calls in common/client for this workspace.
  std::string WorkspaceRoute(std::string_view ws, std::string_view rest = {});

  // One JSON call to berthd; `route` comes from Route() or WorkspaceRoute().
  Result<nlohmann::json> Call(boost::beast::http::verb method, std::string_view route,
                              const std::optional<nlohmann::json>& body = std::nullopt,
                              const client::ClientOptions& options = {});

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
