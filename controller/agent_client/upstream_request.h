// The request header berthd sends to a workspace's agent for a client's request: a pure
// function, so what reaches the guest is tested against golden headers
// (tests/unit/upstream_request_test.cc).
//
// What is dropped from the client's header:
//  - hop-by-hop fields (RFC 9110 7.6.1): Connection and every field it names, Keep-Alive,
//    Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade;
//  - berthd's own fields: Host, Authorization, Proxy-Authorization and Cookie (berthd's
//    credentials never reach a guest), Expect (berthd answers 100-continue itself),
//    Idempotency-Key (berthd's, for creates), Berth-Env (berthd sets it from the workspace);
//  - Content-Length: the framing is berthd's (`BodyFraming`).
// What is set: Host "berth-agent", "Authorization: Bearer <agent token>", for an upgrade
// "Connection: Upgrade" and the client's Upgrade, then the extra headers, then the framing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/http/types.h"

namespace berth::agent_client {

// Headers berthd adds (Berth-Env), replacing any the client sent.
using ExtraHeaders = std::vector<std::pair<std::string, std::string>>;

// How the request body goes to the agent.
struct BodyFraming {
  enum class Kind { kNone, kLength, kChunked };
  Kind kind = Kind::kNone;
  uint64_t length = 0;  // kLength

  static BodyFraming None() { return {}; }
  static BodyFraming Length(uint64_t n) { return {Kind::kLength, n}; }
  static BodyFraming Chunked() { return {Kind::kChunked, 0}; }
};

// Whether the client asks to switch protocols: an "upgrade" token in Connection and a
// non-empty Upgrade. Pure.
bool WantsUpgrade(const http::bhttp::request_header<>& client);

// The body length the client declared (Content-Length, without Transfer-Encoding), if any.
// (bhttp's payload_size() cannot say it for a streamed body type.) Pure.
std::optional<uint64_t> DeclaredLength(const http::bhttp::request_header<>& client);

// The agent's request for `client`'s: same method, `target` (the agent's, encoded: see
// agent_target.h), HTTP/1.1, the fields above. An upgrade takes no body (`body` is ignored).
// Pure.
http::bhttp::request<http::bhttp::empty_body> BuildUpstreamRequest(
    const http::bhttp::request_header<>& client, std::string_view target, std::string_view token,
    const ExtraHeaders& extra, BodyFraming body);

}  // namespace berth::agent_client
