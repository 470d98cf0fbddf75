// The raw mode of GET /v1/tunnel (`Connection: Upgrade`, `Upgrade: berth-tcp`): after
// `101 Switching Protocols` the client's connection is spliced to the guest port as is.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include "common/http/server.h"
#include "guest-agent/activity.h"

namespace berth::agent {

// Whether the request asks for a raw tunnel rather than a WebSocket.
bool IsRawTunnelUpgrade(const http::Exchange& ex);

// Checks what only a raw upgrade needs (HTTP/1.1, no request body); the error to answer with
// otherwise. Call before connecting to the guest port.
Status CheckRawTunnelRequest(const http::Exchange& ex);

// Takes the connection over, answers 101 and pumps bytes both ways between it and `guest` (a
// connected socket to the guest port) until both directions have ended, as
// net::Pump() does (spliced); the tunnel counts as an open stream for `activity` meanwhile.
// Bytes the client sent right behind its request header go to the guest first. Runs on the
// connection's strand; `guest` must have been opened on it and outlive the call; it is closed
// on return.
http::Task<void> ServeRawTunnel(http::Exchange& ex, boost::asio::ip::tcp::socket& guest,
                                ActivityTracker& activity);

}  // namespace berth::agent
