// The agent's answer, relayed to berthd's client once its header has been read (see
// agent_connector.h): with its status and end-to-end fields, its body streamed as it arrives
// (a fixed length stays fixed, anything else is re-chunked, NDJSON streams are not held back),
// or, for 101 Switching Protocols, the two connections joined by the byte pump so WebSocket
// framing (exec sessions) and raw tunnels stay end to end between client and agent.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/http/server.h"
#include "controller/agent_client/agent_connector.h"
#include "controller/agent_client/proxy_options.h"

namespace berth::agent_client {

// The fields of the agent's response header that reach the client: not the hop-by-hop ones
// (Connection and what it names, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
// Upgrade), not Content-Length or Content-Type (berthd frames and types the answer itself), and
// not Set-Cookie (a guest sets no cookies on berthd's origin). Pure.
std::vector<std::pair<std::string, std::string>> RelayedHeaders(
    const http::bhttp::response_header<>& header);

// Relays an ordinary answer (not a 101) from `up` to `ex`. OK when the whole answer went out
// and `up` read it to its end (the connection may go back to the pool). When the agent breaks
// off mid-answer the client's connection is dropped (the only honest signal left); when the
// client's side fails, so does the relay, and the caller drops `up`. Call on the client
// connection's strand.
http::Task<Status> RelayResponse(http::Exchange& ex, Upstream& up, const ProxyOptions& options);

// Relays a 101: writes it to the client, then pumps bytes both ways (net::Pump, no splice:
// berthd's io_context has several threads) until both directions have ended. The client's
// bytes already buffered behind its request go to the agent first, and the agent's behind its
// 101 to the client. No timeout: an upgraded pipe may idle as long as both ends keep it open.
// The client must have asked for an upgrade (WantsUpgrade). Call on the client connection's
// strand.
http::Task<void> RelayUpgrade(http::Exchange& ex, Upstream& up);

}  // namespace berth::agent_client
