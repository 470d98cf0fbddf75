// The agent's answer, relayed to berthd's client once its header has been read (see
// agent_connector.h): with its status and end-to-end fields, its body streamed as it arrives
// (a fixed length stays fixed, anything else is re-chunked, NDJSON streams are not held back),
// or, for 101 Switching Protocols, the two connections joined by the byte pump so WebSocket
// framing (exec sessions) and raw tunnels stay end to end between client and agent.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/http/server.h"
#include "controller/agent_client/agent_connector.h"
#include "controller/agent_client/proxy_options.h"

namespace berth::agent_client {

// Whose answer is relayed, which decides what of its header reaches the client.
// What berthd keeps of an answer it relays, for the timeline (api/agent_events.h): the status,
// the agent's exit header (an exec in wait mode) and the body's last bytes. Bounded: nothing
// here grows with the answer.
struct RelayTrace {
  static constexpr size_t kTailBytes = 4096;
  int status = 0;           // 0: no answer reached the client
  std::string exit_header;  // protocol::kExitHeader, as the agent sent it (at most 64 bytes)
  std::string tail;         // the body's last kTailBytes
  bool complete = false;    // the whole answer reached the client
  // An upgraded answer (a WebSocket: an exec session): the client's first text message and
  // the agent's last, when small (ws_tap.h).
  std::optional<std::string> first_client_text;
  std::optional<std::string> last_agent_text;
};
struct RelayPolicy {
  // The agent's (berthd's own API): Content-Type is berthd's to set (application/octet-stream
  // when the agent gave none) and Set-Cookie never passes (a guest sets no cookies on berthd's
  // origin).
  static RelayPolicy Agent() { return {}; }
  // An app's in the guest (a preview, on an origin of its own): Content-Type as the app sent
  // it (none stays none) and each Set-Cookie through `set_cookie` (nullopt drops it).
  static RelayPolicy App(std::optional<std::string> (*set_cookie)(std::string_view)) {
    return RelayPolicy{true, set_cookie};
  }
  bool app = false;
  std::optional<std::string> (*set_cookie)(std::string_view) = nullptr;
  // Filled as the answer goes, when given (outlives the relay).
  RelayTrace* trace = nullptr;
};

// The fields of the response header that reach the client: never the hop-by-hop ones
// (Connection and what it names, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
// Upgrade) or Content-Length (berthd frames the answer itself); Content-Type and Set-Cookie as
// `policy` says. Repeated fields stay repeated, in order. Pure.
std::vector<std::pair<std::string, std::string>> RelayedHeaders(
    const http::bhttp::response_header<>& header, const RelayPolicy& policy = RelayPolicy::Agent());

// Relays an ordinary answer (not a 101) from `up` to `ex`. OK when the whole answer went out
// and `up` read it to its end (the connection may go back to the pool). When the agent breaks
// off mid-answer the client's connection is dropped (the only honest signal left); when the
// client's side fails, so does the relay, and the caller drops `up`. The answer to a HEAD is
// its header alone, with the length it states. Call on the client connection's strand.
http::Task<Status> RelayResponse(http::Exchange& ex, Upstream& up, const ProxyOptions& options,
                                 const RelayPolicy& policy);

// Relays a 101: writes it to the client, then pumps bytes both ways (net::Pump, no splice:
// berthd's io_context has several threads) until both directions have ended. The client's
// bytes already buffered behind its request go to the agent first, and the agent's behind its
// 101 to the client. No timeout: an upgraded pipe may idle as long as both ends keep it open.
// The client must have asked for an upgrade (WantsUpgrade). Call on the client connection's
// strand.
http::Task<void> RelayUpgrade(http::Exchange& ex, Upstream& up, const RelayPolicy& policy);

}  // namespace berth::agent_client
