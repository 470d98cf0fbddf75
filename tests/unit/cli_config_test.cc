// Where `berth` finds berthd and its key: flags, then environment, then the config file.
#include <catch2/catch.hpp>

#include "cli/config.h"

using namespace berth;
using namespace berth::cli;

TEST_CASE("server URLs") {
  auto u = ParseServerUrl("http://127.0.0.1:7780");
  REQUIRE(u);
  CHECK(u->kind == Endpoint::Kind::kTcp);
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == 7780);
  CHECK(u->base_path.empty());
  CHECK(u->text == "http://127.0.0.1:7780");

  u = ParseServerUrl("http://berth.example.com/api/");
  REQUIRE(u);
  CHECK(u->host == "berth.example.com");
  CHECK(u->port == 80);
  CHECK(u->base_path == "/api");
  CHECK(u->text == "http://berth.example.com:80/api");

  u = ParseServerUrl("http://[::1]:9000");
  REQUIRE(u);
  CHECK(u->host == "::1");
  CHECK(u->text == "http://[::1]:9000");

  u = ParseServerUrl("unix:///run/berth/api.sock");
  REQUIRE(u);
  CHECK(u->kind == Endpoint::Kind::kUnix);
  CHECK(u->socket_path == "/run/berth/api.sock");

  CHECK_FALSE(ParseServerUrl("127.0.0.1:7780"));
  CHECK_FALSE(ParseServerUrl("http://"));
  CHECK_FALSE(ParseServerUrl("http://host:0"));
  CHECK_FALSE(ParseServerUrl("http://host:99999"));
  CHECK_FALSE(ParseServerUrl("http://user:pw@host"));
  CHECK_FALSE(ParseServerUrl("unix:relative.sock"));
  auto https = ParseServerUrl("https://berth.example.com");
  REQUIRE_FALSE(https);
  CHECK(https.error().message.find("https") != std::string::npos);
}

TEST_CASE("flags beat the environment, which beats the config file") {
  ConfigInputs in;
  in.file = ConfigFile{"http://127.0.0.1:1000", "file-key"};
  auto r = ResolveConfig(in);
  CHECK(r.url == "http://127.0.0.1:1000");
  CHECK(r.url_source == Source::kFile);
  CHECK(r.api_key == "file-key");
  CHECK(r.api_key_source == Source::kFile);

  in.env_url = "http://127.0.0.1:2000";
  in.env_api_key = "env-key";
  r = ResolveConfig(in);
  CHECK(r.url == "http://127.0.0.1:2000");
  CHECK(r.url_source == Source::kEnv);
  CHECK(r.api_key == "env-key");
  CHECK(r.api_key_source == Source::kEnv);

  in.flag_url = "http://127.0.0.1:3000";
  in.flag_api_key = "flag-key";
  r = ResolveConfig(in);
  CHECK(r.url == "http://127.0.0.1:3000");
  CHECK(r.url_source == Source::kFlag);
  CHECK(r.api_key == "flag-key");
  CHECK(r.api_key_source == Source::kFlag);

  // Empty variables count as unset.
  ConfigInputs empty_env;
  empty_env.env_url = "";
  empty_env.file = ConfigFile{"http://127.0.0.1:1000", "file-key"};
  CHECK(ResolveConfig(empty_env).url_source == Source::kFile);
}

TEST_CASE("the saved key only goes to the server it was saved for") {
  ConfigInputs in;
  in.file = ConfigFile{"http://127.0.0.1:1000", "file-key"};
  in.flag_url = "http://10.1.2.3:1000";
  auto r = ResolveConfig(in);
  CHECK(r.url == "http://10.1.2.3:1000");
  CHECK(r.api_key.empty());
  CHECK(r.api_key_source == Source::kNone);

  // Another spelling of the same server still gets it.
  in.flag_url = "http://127.0.0.1:1000/";
  CHECK(ResolveConfig(in).api_key == "file-key");
  in.flag_url.clear();
  in.env_url = "http://127.0.0.1:1000";
  CHECK(ResolveConfig(in).api_key == "file-key");
  // A key from the environment goes wherever the URL points.
  in.env_url = "http://10.1.2.3:1000";
  in.env_api_key = "env-key";
  CHECK(ResolveConfig(in).api_key == "env-key");
}

TEST_CASE("the config file's default place") {
  std::map<std::string, std::string> vars;
  GetEnvFn getenv = [&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  CHECK(DefaultConfigPath(getenv).empty());
  vars["HOME"] = "/home/a";
  CHECK(DefaultConfigPath(getenv) == "/home/a/.config/berth/config.json");
  vars["XDG_CONFIG_HOME"] = "/xdg";
  CHECK(DefaultConfigPath(getenv) == "/xdg/berth/config.json");
  vars["BERTH_CONFIG"] = "/etc/berth.json";
  CHECK(DefaultConfigPath(getenv) == "/etc/berth.json");
}
