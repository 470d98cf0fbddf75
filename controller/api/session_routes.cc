// /v1/sessions: the web UI's sign-in (controller/api/sessions.h). POST /v1/sessions is the one
// route besides health that needs no credential (its body holds the key); the others act on
// the caller's own session or, for an admin key, on its tenant's.
#include <fmt/format.h>

#include "common/json.h"
#include "common/v1/time.h"
#include "controller/api/api_server.h"

namespace berth::api {
namespace {

using http::bhttp::field;
using http::bhttp::status;
using http::bhttp::verb;

// A sign-in body is a key and nothing more.
constexpr size_t kMaxSignInBytes = 4096;

nlohmann::json SessionJson(const store::Session& s) {
  return {{"id", s.id},
          {"key_id", s.key_id},
          {"created_at", v1::FormatTime(s.created_at)},
          {"expires_at", v1::FormatTime(s.expires_at)},
          {"last_used_at", v1::FormatTime(s.last_used_at)}};
}

nlohmann::json SignedInJson(const SignedIn& in) {
  auto j = SessionJson(in.session);
  j["tenant"] = {{"id", in.principal.tenant_id}, {"name", in.principal.tenant_name}};
  j["key"] = {{"id", in.principal.key_id},
              {"prefix", in.principal.key_prefix},
              {"scope", ScopeName(in.principal.scope)}};
  j["csrf_token"] = in.csrf_token;
  return j;
}

http::Task<void> SendWithCookie(http::Exchange& ex, status code, const nlohmann::json* body,
                                const std::string& cookie) {
  http::bhttp::response<http::bhttp::string_body> res{code, ex.request().version()};
  res.set(field::set_cookie, cookie);
  res.set(field::cache_control, "no-store");
  if (body) {
    res.set(field::content_type, "application/json");
    res.body() = DumpJson(*body) + "\n";
  }
  co_await ex.Send(std::move(res));
}

http::Task<void> SignIn(ApiContext& ctx, http::Exchange& ex) {
  auto raw = co_await ex.ReadBody(kMaxSignInBytes);
  if (!raw) {
    co_await ex.SendError(raw.error());
    co_return;
  }
  auto body = raw->empty() ? Result<nlohmann::json>(nlohmann::json::object()) : ParseJson(*raw);
  if (!body || !body->is_object() || !body->contains("api_key") || !(*body)["api_key"].is_string()) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "the body must be {\"api_key\": \"bk_…\"}"});
    co_return;
  }
  std::string key = (*body)["api_key"].get<std::string>();
  auto made = co_await ctx.Blocking([&] { return ctx.sessions.Create(key); });
  if (!made) {
    co_await ex.SendError(made.error());
    co_return;
  }
  auto json = SignedInJson(made->signed_in);
  const auto& s = made->signed_in.session;
  std::string cookie = SessionCookie(made->secret, s.expires_at - s.created_at, ex.secure());
  co_await SendWithCookie(ex, status::created, &json, cookie);
}

// The request's own session (set by ApiServer::Handle), or a 404 for a key.
std::optional<std::string> OwnSession(http::Exchange& ex) {
  auto id = ex.context().value("session_id", std::string());
  if (id.empty()) return std::nullopt;
  return id;
}

http::Task<void> Current(ApiContext& ctx, http::Exchange& ex) {
  auto id = OwnSession(ex);
  if (!id) {
    co_await ex.SendError({ErrorCode::kNotFound, "this request carries an API key, not a session"});
    co_return;
  }
  SignedIn in;
  in.principal = PrincipalOf(ex);
  in.csrf_token = ex.context().value("csrf_token", std::string());
  auto listed = co_await ctx.Blocking([&] { return ctx.sessions.List(in.principal); });
  if (!listed) {
    co_await ex.SendError(listed.error());
    co_return;
  }
  for (const auto& s : *listed) {
    if (s.id == *id) in.session = s;
  }
  auto json = SignedInJson(in);
  http::bhttp::response<http::bhttp::string_body> res{status::ok, ex.request().version()};
  res.set(field::content_type, "application/json");
  res.set(field::cache_control, "no-store");
  res.body() = DumpJson(json) + "\n";
  co_await ex.Send(std::move(res));
}

http::Task<void> SignOut(ApiContext& ctx, http::Exchange& ex) {
  auto id = OwnSession(ex);
  if (!id) {
    co_await ex.SendError({ErrorCode::kNotFound, "this request carries an API key, not a session"});
    co_return;
  }
  auto principal = PrincipalOf(ex);
  auto revoked = co_await ctx.Blocking([&] { return ctx.sessions.Revoke(principal, *id); });
  if (!revoked) {
    co_await ex.SendError(revoked.error());
    co_return;
  }
  std::string cookie = ClearedSessionCookie(ex.secure());
  co_await SendWithCookie(ex, status::no_content, nullptr, cookie);
}

http::Task<void> List(ApiContext& ctx, http::Exchange& ex) {
  auto principal = PrincipalOf(ex);
  auto listed = co_await ctx.Blocking([&] { return ctx.sessions.List(principal); });
  if (!listed) {
    co_await ex.SendError(listed.error());
    co_return;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : *listed) out.push_back(SessionJson(s));
  nlohmann::json body = {{"sessions", std::move(out)}};
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> Revoke(ApiContext& ctx, http::Exchange& ex) {
  auto principal = PrincipalOf(ex);
  std::string id(ex.param("id"));
  auto revoked = co_await ctx.Blocking([&] { return ctx.sessions.Revoke(principal, id); });
  if (!revoked) {
    co_await ex.SendError(revoked.error());
    co_return;
  }
  http::bhttp::response<http::bhttp::string_body> res{status::no_content, ex.request().version()};
  co_await ex.Send(std::move(res));
}

}  // namespace

bool IsSignInRequest(http::Exchange& ex) {
  return ex.method() == verb::post && ex.path() == "/v1/sessions";
}

void AddSessionRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::post, "/v1/sessions", [&ctx](http::Exchange& ex) { return SignIn(ctx, ex); });
  router.Add(verb::get, "/v1/sessions", [&ctx](http::Exchange& ex) { return List(ctx, ex); });
  router.Add(verb::get, "/v1/sessions/current", [&ctx](http::Exchange& ex) { return Current(ctx, ex); });
  router.Add(verb::delete_, "/v1/sessions/current", [&ctx](http::Exchange& ex) { return SignOut(ctx, ex); });
  router.Add(verb::delete_, "/v1/sessions/{id}", [&ctx](http::Exchange& ex) { return Revoke(ctx, ex); });
}

}  // namespace berth::api
