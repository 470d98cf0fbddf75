// Credentials: login (checks the key with GET /v1/me, then saves URL and key to the config
// file with mode 0600), logout, whoami.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/terminal.h"

namespace berth::cli {
namespace {

// Checking a key is one quick call.
constexpr std::chrono::seconds kCallTimeout{60};

std::string Identity(const v1::Me& me) {
  auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return fmt::format("tenant {} ({}), key {}… (scope {})", dash(me.tenant_name), dash(me.tenant_id),
                     dash(me.key_prefix), v1::ScopeName(me.scope));
}

Result<v1::Me> WhoIs(Context& ctx) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  return berth->Me(DeadlineIn(kCallTimeout));
}

Result<int> Login(Context& ctx) {
  auto config = ctx.Config();
  if (!config) return Fail(config.error());
  if (config->url.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "berth login needs --url URL (or BERTH_URL)");
  }
  auto url = ParseServerUrl(config->url);
  if (!url) return Fail(url.error());
  std::string key = config->api_key;
  Source key_source = config->api_key_source;
  if (key.empty()) {
    auto typed = ReadSecretLine(fmt::format("API key for {}: ", url->text));
    if (!typed) return Fail(typed.error());
    key = *typed;
    key_source = Source::kFlag;
  }
  if (key.empty()) return Fail(ErrorCode::kInvalidArgument, "an empty API key");
  ctx.UseServer(url->text, config->url_source, key, key_source);
  auto me = WhoIs(ctx);
  if (!me) return Fail(me.error());
  std::string path = ctx.ConfigPath();
  if (auto saved = SaveConfigFile(path, ConfigFile{url->text, key}); !saved) {
    return Fail(saved.error());
  }
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*me));
  } else {
    ctx.out() << fmt::format("logged in to {} as {}; saved to {}\n", url->text, Identity(*me),
                             path);
  }
  return kExitOk;
}

Result<int> Logout(Context& ctx) {
  std::string path = ctx.ConfigPath();
  if (auto cleared = ClearConfigFile(path); !cleared) return Fail(cleared.error());
  ctx.out() << "removed the URL and API key from " << path << "\n";
  return kExitOk;
}

Result<int> WhoAmI(Context& ctx) {
  auto me = WhoIs(ctx);
  if (!me) return Fail(me.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*me));
  } else {
    auto config = ctx.Config();
    ctx.out() << fmt::format("{} at {}\n", Identity(*me), config ? config->url : "?");
  }
  return kExitOk;
}

}  // namespace

void AddLoginCommands(Builder& b) {
  auto* login = b.Add("login",
                      "check an API key against berthd and save URL and key to the config file",
                      [](Context& ctx) { return Login(ctx); });
  login->footer(
      "Example: berth login --url http://127.0.0.1:7780 --api-key KEY\n"
      "Without --api-key (or BERTH_API_KEY) the key is read from stdin.");
  b.AddJsonFlag(login);
  b.Add("logout", "remove the saved URL and API key", [](Context& ctx) { return Logout(ctx); });
  auto* whoami = b.Add("whoami", "which tenant and key this is",
                       [](Context& ctx) { return WhoAmI(ctx); });
  b.AddJsonFlag(whoami);
}

}  // namespace berth::cli
