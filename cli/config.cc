#include "cli/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/unique.h"

namespace berth::cli {
namespace {

namespace fs = std::filesystem;

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::optional<std::string> NonEmpty(const std::optional<std::string>& value) {
  if (value && !value->empty()) return value;
  return std::nullopt;
}

// Two spellings of one server compare equal ("http://h" and "http://h:80/").
bool SameServer(const std::string& a, const std::string& b) {
  auto pa = ParseServerUrl(a);
  auto pb = ParseServerUrl(b);
  if (pa && pb) return pa->text == pb->text;
  return a == b;
}

Result<nlohmann::json> ReadJsonObject(const std::string& path, bool* exists) {
  std::ifstream in(path);
  *exists = false;
  if (!in) {
    if (errno == ENOENT) return nlohmann::json::object();
    return Fail(ErrnoError(errno, "open " + path));
  }
  *exists = true;
  std::stringstream text;
  text << in.rdbuf();
  auto json = ParseJson(text.str());
  if (!json || !json->is_object()) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("config file {} is not a JSON object; fix or remove it", path));
  }
  return json;
}

Status WriteJsonAtomically(const std::string& path, const nlohmann::json& json) {
  fs::path target(path);
  fs::path dir = target.parent_path();
  if (!dir.empty()) {
    // Directories created here are private: the file below holds a secret.
    std::vector<fs::path> missing;
    for (fs::path p = dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) {
        return Fail(ErrnoError(errno, "mkdir " + it->string()));
      }
    }
  }
  std::string tmp = (dir.empty() ? fs::path(".") : dir).string() + "/.config.json.XXXXXX";
  int raw = mkstemp(tmp.data());  // mode 0600
  if (raw < 0) return Fail(ErrnoError(errno, "create a file in " + dir.string()));
  UniqueFd fd(raw);
  std::string text = DumpJson(json, 2) + "\n";
  auto cleanup_fail = [&](int err, const std::string& what) {
    unlink(tmp.c_str());
    return Fail(ErrnoError(err, what));
  };
  if (fchmod(fd.get(), 0600) != 0) return cleanup_fail(errno, "chmod " + tmp);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cleanup_fail(errno, "write " + tmp);
    off += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0) return cleanup_fail(errno, "fsync " + tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) return cleanup_fail(errno, "rename to " + path);
  return {};
}

}  // namespace

Result<ServerUrl> ParseServerUrl(std::string_view url) {
  ServerUrl out;
  auto bad = [&](std::string_view why) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("bad berthd URL '{}': {} (expected http://HOST[:PORT] or unix:/PATH)",
                            url, why));
  };
  if (StartsWith(url, "unix:")) {
    std::string_view path = url.substr(5);
    while (StartsWith(path, "//")) path.remove_prefix(1);  // unix:///run/x.sock
    if (path.empty() || path[0] != '/') return bad("the socket path must be absolute");
    out.kind = Endpoint::Kind::kUnix;
    out.socket_path = std::string(path);
    out.text = "unix:" + out.socket_path;
    return out;
  }
  if (StartsWith(url, "https://")) {
    return bad("https is not supported by this berth yet; reach berthd over http (for example "
               "through an SSH tunnel)");
  }
  if (!StartsWith(url, "http://")) return bad("unknown scheme");
  std::string_view rest = url.substr(7);
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) return bad("credentials do not go in the URL");
  std::string_view port_text;
  if (StartsWith(authority, "[")) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed [");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("junk after ]");
      port_text = after.substr(1);
    }
  } else {
    auto colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return bad("no host");
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return bad("bad port");
    }
    out.port = static_cast<uint16_t>(port);
  }
  if (path.find_first_of("?#") != std::string_view::npos) return bad("no query or fragment");
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.base_path = std::string(path);
  bool v6 = out.host.find(':') != std::string::npos;
  out.text = fmt::format("http://{}{}{}:{}{}", v6 ? "[" : "", out.host, v6 ? "]" : "", out.port,
                         out.base_path);
  return out;
}

std::string_view SourceName(Source source) {
  switch (source) {
    case Source::kNone: return "nowhere";
    case Source::kFlag: return "the command line";
    case Source::kEnv: return "the environment";
    case Source::kFile: return "the config file";
  }
  return "nowhere";
}

ResolvedConfig ResolveConfig(const ConfigInputs& inputs) {
  ResolvedConfig out;
  out.config_path = inputs.file_path;
  std::optional<std::string> env_url = NonEmpty(inputs.env_url);
  std::optional<std::string> env_key = NonEmpty(inputs.env_api_key);
  if (!inputs.flag_url.empty()) {
    out.url = inputs.flag_url;
    out.url_source = Source::kFlag;
  } else if (env_url) {
    out.url = *env_url;
    out.url_source = Source::kEnv;
  } else if (inputs.file && !inputs.file->url.empty()) {
    out.url = inputs.file->url;
    out.url_source = Source::kFile;
  }
  if (!inputs.flag_api_key.empty()) {
    out.api_key = inputs.flag_api_key;
    out.api_key_source = Source::kFlag;
  } else if (env_key) {
    out.api_key = *env_key;
    out.api_key_source = Source::kEnv;
  } else if (inputs.file && !inputs.file->api_key.empty() &&
             (out.url_source == Source::kFile || SameServer(out.url, inputs.file->url))) {
    out.api_key = inputs.file->api_key;
    out.api_key_source = Source::kFile;
  }
  return out;
}

std::string DefaultConfigPath(const GetEnvFn& getenv) {
  if (auto explicit_path = NonEmpty(getenv(kConfigEnv))) return *explicit_path;
  if (auto xdg = NonEmpty(getenv("XDG_CONFIG_HOME"))) return *xdg + "/berth/config.json";
  if (auto home = NonEmpty(getenv("HOME"))) return *home + "/.config/berth/config.json";
  return "";
}

Result<std::optional<ConfigFile>> LoadConfigFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  bool exists = false;
  auto json = ReadJsonObject(path, &exists);
  if (!json) return Fail(json.error());
  if (!exists) return std::nullopt;
  ConfigFile out;
  auto field = [&](const char* name, std::string& into) -> Status {
    if (!json->contains(name)) return {};
    if (!(*json)[name].is_string()) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("config file {}: {} must be a string", path, name));
    }
    into = (*json)[name].get<std::string>();
    return {};
  };
  if (auto s = field("url", out.url); !s) return Fail(s.error());
  if (auto s = field("api_key", out.api_key); !s) return Fail(s.error());
  return out;
}

Status SaveConfigFile(const std::string& path, const ConfigFile& config) {
  if (path.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "no config file path: set $HOME or $BERTH_CONFIG");
  }
  bool exists = false;
  auto json = ReadJsonObject(path, &exists);
  if (!json) return Fail(json.error());
  (*json)["url"] = config.url;
  (*json)["api_key"] = config.api_key;
  return WriteJsonAtomically(path, *json);
}

Status ClearConfigFile(const std::string& path) {
  bool exists = false;
  auto json = ReadJsonObject(path, &exists);
  if (!json) return Fail(json.error());
  if (!exists) return {};
  json->erase("url");
  json->erase("api_key");
  return WriteJsonAtomically(path, *json);
}

}  // namespace berth::cli
