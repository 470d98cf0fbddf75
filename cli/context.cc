#include "cli/context.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "common/json.h"

namespace berth::cli {
namespace {

bool IsNumericHost(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  return host == "localhost" || inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

// The client library connects to literal addresses: resolve a host name first.
Result<std::string> ResolveHost(const std::string& host) {
  if (IsNumericHost(host)) return host;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("connect {}: cannot resolve the name: {}", host, gai_strerror(rc)));
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr =
      found->ai_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr);
  inet_ntop(found->ai_family, addr, text, sizeof(text));
  freeaddrinfo(found);
  return std::string(text);
}

}  // namespace

Environment Environment::FromProcess() {
  Environment env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  env.in = &std::cin;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.stdin_tty = isatty(0) == 1;
  env.stdout_tty = isatty(1) == 1;
  env.stderr_tty = isatty(2) == 1;
  env.now = [] { return std::chrono::system_clock::now(); };
  return env;
}

Context::Context(GlobalOptions options, Environment env)
    : options_(std::move(options)), env_(std::move(env)) {}

void Context::PrintJson(const nlohmann::json& value) {
  out() << DumpJson(value, 2) << "\n";
}

void Context::Note(std::string_view message) {
  if (options_.quiet) return;
  err() << "berth: " << message << std::endl;
}

std::string Context::ConfigPath() const {
  if (!options_.config_path.empty()) return options_.config_path;
  return DefaultConfigPath(env_.getenv);
}

Result<ResolvedConfig> Context::Config() {
  if (config_) return *config_;
  ConfigInputs inputs;
  inputs.flag_url = options_.url;
  inputs.flag_api_key = options_.api_key;
  inputs.env_url = env_.getenv(kUrlEnv);
  inputs.env_api_key = env_.getenv(kApiKeyEnv);
  inputs.file_path = ConfigPath();
  // The file is only read when the flags and environment leave something open.
  bool need_file = (inputs.flag_url.empty() && !(inputs.env_url && !inputs.env_url->empty())) ||
                   (inputs.flag_api_key.empty() &&
                    !(inputs.env_api_key && !inputs.env_api_key->empty()));
  if (need_file) {
    auto file = LoadConfigFile(inputs.file_path);
    if (!file) return Fail(file.error());
    inputs.file = *file;
  }
  config_ = ResolveConfig(inputs);
  return *config_;
}

void Context::UseServer(std::string url, Source url_source, std::string api_key,
                        Source key_source) {
  ResolvedConfig config;
  config.url = std::move(url);
  config.url_source = url_source;
  config.api_key = std::move(api_key);
  config.api_key_source = key_source;
  config.config_path = ConfigPath();
  config_ = std::move(config);
  server_.reset();
}

Result<const ServerUrl*> Context::Server() {
  if (server_) return &*server_;
  auto config = Config();
  if (!config) return Fail(config.error());
  if (config->url.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "no berthd URL: pass --url, set BERTH_URL, or run `berth login --url URL`");
  }
  auto parsed = ParseServerUrl(config->url);
  if (!parsed) return Fail(parsed.error());
  server_ = *parsed;
  return &*server_;
}

Result<client::BerthClient> Context::Berth() {
  auto server = Server();
  if (!server) return Fail(server.error());
  Endpoint endpoint;
  if ((*server)->kind == Endpoint::Kind::kUnix) {
    endpoint.kind = Endpoint::Kind::kUnix;
    endpoint.path = (*server)->socket_path;
  } else {
    auto host = ResolveHost((*server)->host);
    if (!host) return Fail(host.error());
    endpoint.kind = Endpoint::Kind::kTcp;
    endpoint.host = *host;
    endpoint.port = (*server)->port;
  }
  return client::BerthClient(endpoint, config_->api_key, (*server)->base_path);
}

Result<client::WorkspaceAgent> Context::Connect(std::string_view ws, v1::Workspace* running) {
  auto berth = Berth();
  if (!berth) return Fail(berth.error());
  auto note = [this](std::string_view text) { Note(text); };
  auto got = berth->EnsureRunning(ws, DeadlineIn(kConnectTimeout), note);
  if (!got && got.error().code == ErrorCode::kFailedPrecondition &&
      got.error().message.find("auto_start is off") != std::string::npos) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{} (`berth start {}`)", got.error().message, ws));
  }
  if (!got) return Fail(got.error());
  if (running) *running = *got;
  // By id: the name could be given to another workspace meanwhile.
  return berth->Agent(got->id, kNoDeadline);
}

Error Context::Explain(Error error) {
  std::string url = config_ ? config_->url : std::string();
  switch (error.code) {
    case ErrorCode::kUnavailable:
      // The client library's connection failures read "connect ADDRESS: reason".
      if (error.message.starts_with("connect ") && config_) {
        auto colon = error.message.find(": ");
        std::string reason =
            colon == std::string::npos ? error.message : error.message.substr(colon + 2);
        error.message = fmt::format("cannot reach berthd at {} ({}): {}; is it running?", url,
                                    fmt::format("URL from {}", SourceName(config_->url_source)),
                                    reason);
      }
      break;
    case ErrorCode::kUnauthenticated:
      if (config_ && config_->api_key.empty()) {
        error.message = fmt::format(
            "no API key for {}: pass --api-key, set BERTH_API_KEY, or run `berth login`", url);
      } else if (config_) {
        error.message = fmt::format(
            "berthd at {} refused the API key from {}: {} (run `berth login` with a valid key)",
            url, SourceName(config_->api_key_source), error.message);
      }
      break;
    case ErrorCode::kPermissionDenied:
      error.message += " (this API key's scope does not allow it)";
      break;
    default:
      break;
  }
  return error;
}

int Context::Report(const Error& error) {
  Error explained = Explain(error);
  out().flush();
  err() << "berth: " << explained.message << std::endl;
  return ExitCodeFor(explained.code);
}

}  // namespace berth::cli
