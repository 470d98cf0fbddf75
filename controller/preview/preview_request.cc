#include "controller/preview/preview_request.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/http/url.h"

namespace berth::preview {

namespace beast = http::beast;
namespace bhttp = http::bhttp;
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits "a=1; b=2" into (name, value) pairs, untouched otherwise.
std::vector<std::pair<std::string_view, std::string_view>> SplitCookies(std::string_view header) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  size_t start = 0;
  while (start <= header.size()) {
    auto end = header.find(';', start);
    if (end == std::string_view::npos) end = header.size();
    auto part = Trim(header.substr(start, end - start));
    if (!part.empty()) {
      auto eq = part.find('=');
      if (eq == std::string_view::npos) {
        out.emplace_back(std::string_view{}, part);  // a nameless cookie: a value alone
      } else {
        out.emplace_back(Trim(part.substr(0, eq)), Trim(part.substr(eq + 1)));
      }
    }
    start = end + 1;
  }
  return out;
}

// The client's fields the app never sees, whatever the request.
bool Dropped(bhttp::field field, std::string_view name) {
  switch (field) {
    case bhttp::field::connection:
    case bhttp::field::keep_alive:
    case bhttp::field::proxy_connection:
    case bhttp::field::proxy_authorization:
    case bhttp::field::proxy_authenticate:
    case bhttp::field::te:
    case bhttp::field::trailer:
    case bhttp::field::transfer_encoding:
    case bhttp::field::upgrade:
    case bhttp::field::content_length:
    case bhttp::field::host:
    case bhttp::field::expect:
    case bhttp::field::forwarded:
    case bhttp::field::cookie:    // filtered, then set again
    case bhttp::field::origin:    // rewritten, then set again
      return true;
    default:
      break;
  }
  return (name.size() >= 8 && beast::iequals(name.substr(0, 8), "x-berth-")) ||
         (name.size() >= 12 && beast::iequals(name.substr(0, 12), "x-forwarded-")) ||
         beast::iequals(name, "x-real-ip");
}

// "Bearer bk_..." is a Berth API key: berthd's credential, never the app's.
bool IsBerthAuthorization(std::string_view value) {
  value = Trim(value);
  if (value.size() < 7 || !beast::iequals(value.substr(0, 7), "bearer ")) return false;
  return Trim(value.substr(7)).starts_with("bk_");
}

std::vector<std::string> NamedByConnection(const bhttp::request_header<>& client) {
  std::vector<std::string> names;
  for (const auto& f : client) {
    if (f.name() != bhttp::field::connection) continue;
    for (auto token : bhttp::token_list(f.value())) names.emplace_back(token);
  }
  return names;
}

}  // namespace

std::string TokenCookieName(bool https) { return https ? "__Host-berth_preview_token" : "berth_preview_token"; }
std::string AckCookieName(bool https) { return https ? "__Host-berth_preview_ack" : "berth_preview_ack"; }

bool IsBerthCookie(std::string_view name) {
  if (name.starts_with("__Host-")) name.remove_prefix(7);
  return name == "berth_preview_token" || name == "berth_preview_ack" || name == "berth_session";
}

std::vector<std::string> CookieValues(const bhttp::request_header<>& client, std::string_view name) {
  std::vector<std::string> out;
  for (const auto& f : client) {
    if (f.name() != bhttp::field::cookie) continue;
    for (const auto& [n, v] : SplitCookies(f.value())) {
      if (n == name) out.emplace_back(v);
    }
  }
  return out;
}

TokenInTarget TakeTokenFromTarget(std::string_view target) {
  TokenInTarget out;
  auto q = target.find('?');
  if (q == std::string_view::npos) {
    out.target = std::string(target);
    return out;
  }
  std::string kept;
  std::string_view query = target.substr(q + 1);
  size_t start = 0;
  while (start <= query.size()) {
    auto end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    auto part = query.substr(start, end - start);
    auto eq = part.find('=');
    auto name = part.substr(0, eq);
    if (name == kTokenParam) {
      ++out.count;
      if (!out.token) {
        auto value = eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1);
        out.token = http::PercentDecode(value).value_or(std::string(value));
      }
    } else if (!part.empty()) {
      if (!kept.empty()) kept += '&';
      kept += part;
    }
    start = end + 1;
  }
  out.target = std::string(target.substr(0, q));
  if (!kept.empty()) out.target += "?" + kept;
  return out;
}

bhttp::request<bhttp::empty_body> BuildPreviewRequest(const bhttp::request_header<>& client,
                                                      std::string_view target, uint16_t port,
                                                      const Forwarded& forwarded,
                                                      agent_client::BodyFraming body) {
  const bool upgrade = agent_client::WantsUpgrade(client);
  const auto hop = NamedByConnection(client);
  const std::string app_host = fmt::format("localhost:{}", port);
  bhttp::request<bhttp::empty_body> req{client.method(), target, 11};
  req.set(bhttp::field::host, app_host);
  for (const auto& f : client) {
    if (Dropped(f.name(), f.name_string())) continue;
    if (f.name() == bhttp::field::authorization && IsBerthAuthorization(f.value())) continue;
    bool named = std::any_of(hop.begin(), hop.end(),
                             [&](const std::string& n) { return beast::iequals(n, f.name_string()); });
    if (named) continue;
    req.insert(f.name_string(), f.value());
  }
  // Cookies: Berth's out, the app's kept in order, in one field (RFC 6265 5.4).
  std::string cookies;
  for (const auto& f : client) {
    if (f.name() != bhttp::field::cookie) continue;
    for (const auto& [n, v] : SplitCookies(f.value())) {
      if (IsBerthCookie(n)) continue;
      if (!cookies.empty()) cookies += "; ";
      cookies += n.empty() ? std::string(v) : fmt::format("{}={}", n, v);
    }
  }
  if (!cookies.empty()) req.set(bhttp::field::cookie, cookies);
  if (auto origin = client.find(bhttp::field::origin); origin != client.end()) {
    std::string own = fmt::format("{}://{}", forwarded.proto, forwarded.host);
    bool same = beast::iequals(origin->value(), own);
    req.set(bhttp::field::origin, same ? fmt::format("http://{}", app_host) : std::string(origin->value()));
  }
  req.set("X-Forwarded-Host", forwarded.host);
  req.set("X-Forwarded-Proto", forwarded.proto);
  if (!forwarded.client.empty()) req.set("X-Forwarded-For", forwarded.client);
  if (upgrade) {
    req.set(bhttp::field::connection, "Upgrade");
    req.set(bhttp::field::upgrade, client[bhttp::field::upgrade]);
  }
  if (!upgrade && body.kind == agent_client::BodyFraming::Kind::kLength) req.content_length(body.length);
  if (!upgrade && body.kind == agent_client::BodyFraming::Kind::kChunked) req.chunked(true);
  return req;
}

std::optional<std::string> RewriteSetCookie(std::string_view value) {
  auto semi = value.find(';');
  auto pair = Trim(value.substr(0, semi));
  auto eq = pair.find('=');
  auto name = Trim(pair.substr(0, eq == std::string_view::npos ? pair.size() : eq));
  if (IsBerthCookie(name)) return std::nullopt;
  std::string out(pair);
  if (semi == std::string_view::npos) return out;
  auto rest = value.substr(semi + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    auto end = rest.find(';', start);
    if (end == std::string_view::npos) end = rest.size();
    auto attr = Trim(rest.substr(start, end - start));
    auto attr_name = Trim(attr.substr(0, attr.find('=')));
    if (!attr.empty() && !beast::iequals(attr_name, "domain")) out += fmt::format("; {}", attr);
    start = end + 1;
  }
  return out;
}

std::string BerthCookie(std::string_view name, std::string_view value, int64_t max_age_s, bool https) {
  return fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}", name, value,
                     std::max<int64_t>(max_age_s, 0), https ? "; Secure" : "");
}

}  // namespace berth::preview
