// Wire types of the ports, tunnel and keep-awake lease APIs, shared by berth-agent, berthd and
// the clients. Pure: JSON in and out, validation, no I/O.
//
//   GET  /v1/ports             -> {"ports": [PortInfo...]}
//   GET  /v1/tunnel?port=N[&host=ADDR]   a byte pipe to a TCP port of the guest, in one of two
//                              modes chosen by the Upgrade header:
//     Upgrade: websocket       binary frames; an empty binary frame from the client is a
//                              half-close (EOF); the agent closes the WebSocket (1000) when the
//                              guest port does. For browsers.
//     Upgrade: berth-tcp       (with Connection: Upgrade) 101 Switching Protocols, then the
//                              connection itself is the pipe, as after HTTP CONNECT: no framing,
//                              shutdown(SHUT_WR) on either end reaches the other, each
//                              direction ends on its own. The fast mode (splice in the agent).
//                              The request has no body; HTTP/1.1 only.
//                              Either way a foreign host is 403, a bad port 400 and a closed
//                              port 503, as JSON errors before any upgrade.
//   POST /v1/leases            LeaseRequest -> 201 Lease
//   POST /v1/leases/{id}/renew {"duration_s": N} -> 200 Lease
//   DELETE /v1/leases/{id}     -> 204
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::protocol {

// A listening TCP socket in the guest and, when it could be found, the process that owns it.
struct PortInfo {
  PortInfo() = default;
  uint16_t port = 0;
  std::string address;        // "127.0.0.1", "0.0.0.0", "::", "::1"
  std::string family;         // "ipv4" | "ipv6"
  std::optional<int> pid;     // absent when the owner is not visible (another user, gone)
  std::optional<std::string> process;  // /proc/PID/comm
  std::optional<std::string> cmdline;  // arguments joined by spaces, truncated
  std::optional<std::string> user;     // owner of the socket
  // berthd's list only: the port's preview address (controller/preview/).
  std::optional<std::string> preview_url;
};

nlohmann::json ToJson(const PortInfo& port);
Result<PortInfo> PortInfoFromJson(const nlohmann::json& json);
// {"ports":[...]} -> the list; invalid_argument on a malformed answer.
Result<std::vector<PortInfo>> PortListFromJson(const nlohmann::json& json);

// Tunnel target validation shared by server and client: 1..65535.
Result<uint16_t> ParseTunnelPort(long long port);

// The Upgrade token of the raw tunnel mode.
inline constexpr std::string_view kRawTunnelProtocol = "berth-tcp";
// Whether a comma-separated HTTP token list (Connection, Upgrade) holds `token`, compared
// case-insensitively after trimming spaces and tabs. A raw tunnel is asked for with
// HasToken(Connection, "upgrade") && HasToken(Upgrade, kRawTunnelProtocol).
bool HasToken(std::string_view list, std::string_view token);

// Keep-awake leases. Bounds: a lease lasts 1 s .. 7 days; the reason is at most 200 bytes.
inline constexpr std::chrono::seconds kMinLease{1};
inline constexpr std::chrono::seconds kMaxLease{7 * 24 * 3600};
inline constexpr size_t kMaxLeaseReason = 200;

struct LeaseRequest {
  LeaseRequest() = default;
  LeaseRequest(std::string r, std::chrono::seconds d) : reason(std::move(r)), duration(d) {}
  std::string reason;
  std::chrono::seconds duration{3600};
};
// {"reason": "make test", "duration_s": 7200}; reason optional ("" then), duration_s required.
Result<LeaseRequest> LeaseRequestFromJson(const nlohmann::json& json);
nlohmann::json ToJson(const LeaseRequest& request);
// {"duration_s": N} for renewals: just the bounded duration.
Result<std::chrono::seconds> LeaseDurationFromJson(const nlohmann::json& json);

struct Lease {
  Lease() = default;
  uint64_t id = 0;
  std::string reason;
  std::string until;  // ISO 8601, UTC, seconds
};
nlohmann::json ToJson(const Lease& lease);
// The {id} of /v1/leases/{id}: a positive decimal integer.
Result<uint64_t> ParseLeaseId(std::string_view text);
Result<Lease> LeaseFromJson(const nlohmann::json& json);

// "2024-05-01T12:00:00Z"
std::string Iso8601(std::chrono::system_clock::time_point t);

}  // namespace berth::protocol
