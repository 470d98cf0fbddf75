// Where `berth` finds berthd and its API key: flags, then the environment (BERTH_URL,
// BERTH_API_KEY), then the config file that `berth login` writes. Pure except for the file
// functions at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/endpoint.h"
#include "common/error.h"

namespace berth::cli {

inline constexpr char kUrlEnv[] = "BERTH_URL";
inline constexpr char kApiKeyEnv[] = "BERTH_API_KEY";
inline constexpr char kConfigEnv[] = "BERTH_CONFIG";

// Looks up an environment variable; nullopt when unset.
using GetEnvFn = std::function<std::optional<std::string>(const std::string& name)>;

// A parsed server URL: "http://HOST[:PORT][/PREFIX]" or "unix:/PATH" (a unix socket).
struct ServerUrl {
  std::string text;          // normalised: no trailing slash, explicit port
  Endpoint::Kind kind = Endpoint::Kind::kTcp;
  std::string host;          // kTcp: a name or a literal address (brackets removed)
  uint16_t port = 80;        // kTcp
  std::string socket_path;   // kUnix
  std::string base_path;     // "" or "/prefix": routes go below it
};
Result<ServerUrl> ParseServerUrl(std::string_view url);

// Where a setting came from, for messages such as "the API key from $BERTH_API_KEY".
enum class Source { kNone, kFlag, kEnv, kFile };
std::string_view SourceName(Source source);

// The config file's contents (JSON: {"url": ..., "api_key": ...}).
struct ConfigFile {
  std::string url;
  std::string api_key;
};

struct ConfigInputs {
  std::string flag_url;  // empty: not given
  std::string flag_api_key;
  std::optional<std::string> env_url;
  std::optional<std::string> env_api_key;
  std::optional<ConfigFile> file;
  std::string file_path;
};

struct ResolvedConfig {
  std::string url;
  Source url_source = Source::kNone;
  std::string api_key;
  Source api_key_source = Source::kNone;
  std::string config_path;
};

// Each setting from the first place that has it: flag, environment, config file. The file's
// key is only used for the file's own server: a key saved for one berthd is never sent to
// another one named by --url or $BERTH_URL.
ResolvedConfig ResolveConfig(const ConfigInputs& inputs);

// $BERTH_CONFIG, else $XDG_CONFIG_HOME/berth/config.json, else ~/.config/berth/config.json;
// empty when none of them can be formed.
std::string DefaultConfigPath(const GetEnvFn& getenv);

// Reads the config file; nullopt when it does not exist, invalid_argument when malformed.
Result<std::optional<ConfigFile>> LoadConfigFile(const std::string& path);
// Writes the config file atomically with mode 0600 (its directory 0700 when created), keeping
// any other fields an existing file has.
Status SaveConfigFile(const std::string& path, const ConfigFile& config);
// Removes url and api_key from the config file; a missing file is fine.
Status ClearConfigFile(const std::string& path);

}  // namespace berth::cli
