#include "controller/agent_client/upstream_request.h"

#include <algorithm>
#include <charconv>

#include "common/protocol/exec.h"

namespace berth::agent_client {

namespace beast = http::beast;
namespace bhttp = http::bhttp;
namespace {

// Dropped whatever the request (see the header's list).
bool Dropped(bhttp::field field, std::string_view name) {
  switch (field) {
    case bhttp::field::connection:
    case bhttp::field::keep_alive:
    case bhttp::field::proxy_connection:
    case bhttp::field::te:
    case bhttp::field::trailer:
    case bhttp::field::transfer_encoding:
    case bhttp::field::upgrade:
    case bhttp::field::content_length:
    case bhttp::field::host:
    case bhttp::field::authorization:
    case bhttp::field::proxy_authorization:
    case bhttp::field::proxy_authenticate:
    case bhttp::field::cookie:
    case bhttp::field::expect:
      return true;
    default:
      return beast::iequals(name, "idempotency-key") ||
             beast::iequals(name, protocol::kDefaultEnvHeader);
  }
}

// The fields the client's Connection header names: hop-by-hop too ("Connection: close, X-Hop").
std::vector<std::string> NamedByConnection(const bhttp::request_header<>& client) {
  std::vector<std::string> names;
  for (const auto& f : client) {
    if (f.name() != bhttp::field::connection) continue;
    for (auto token : bhttp::token_list(f.value())) names.emplace_back(token);
  }
  return names;
}

}  // namespace

std::optional<uint64_t> DeclaredLength(const bhttp::request_header<>& client) {
  if (client.find(bhttp::field::transfer_encoding) != client.end()) return std::nullopt;
  auto field = client.find(bhttp::field::content_length);
  if (field == client.end()) return std::nullopt;
  // Beast's parser has refused a malformed or conflicting Content-Length already.
  std::string_view text = field->value();
  uint64_t length = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return length;
}

bool WantsUpgrade(const bhttp::request_header<>& client) {
  auto upgrade = client.find(bhttp::field::upgrade);
  if (upgrade == client.end() || upgrade->value().empty()) return false;
  for (const auto& f : client) {
    if (f.name() != bhttp::field::connection) continue;
    for (auto token : bhttp::token_list(f.value())) {
      if (beast::iequals(token, "upgrade")) return true;
    }
  }
  return false;
}

bhttp::request<bhttp::empty_body> BuildUpstreamRequest(const bhttp::request_header<>& client,
                                                       std::string_view target,
                                                       std::string_view token,
                                                       const ExtraHeaders& extra,
                                                       BodyFraming body) {
  const bool upgrade = WantsUpgrade(client);
  const auto hop = NamedByConnection(client);
  bhttp::request<bhttp::empty_body> req{client.method(), target, 11};
  for (const auto& f : client) {
    if (Dropped(f.name(), f.name_string())) continue;
    bool named = std::any_of(hop.begin(), hop.end(),
                             [&](const std::string& n) {
                             return beast::iequals(n, f.name_string());
                           });
    if (named) continue;
    req.insert(f.name_string(), f.value());
  }
  req.set(bhttp::field::host, "berth-agent");
  req.set(bhttp::field::authorization, "Bearer " + std::string(token));
  if (upgrade) {
    req.set(bhttp::field::connection, "Upgrade");
    req.set(bhttp::field::upgrade, client[bhttp::field::upgrade]);
  }
  for (const auto& [name, value] : extra) req.set(name, value);
  if (!upgrade && body.kind == BodyFraming::Kind::kLength) req.content_length(body.length);
  if (!upgrade && body.kind == BodyFraming::Kind::kChunked) req.chunked(true);
  return req;
}

}  // namespace berth::agent_client
