// The stream socket every bridge in Berth moves bytes through: Asio's generic stream socket,
// so one code path serves TCP, unix and vsock (the agent's tunnels, berthd's upgrades, and the
// VNC bridge, whose upstream is QEMU's unix socket). Plus the shutdowns the pumps use.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/error.h"
#include "common/unique.h"

namespace berth::net {

using Socket = boost::asio::generic::stream_protocol::socket;

// Wraps a connected stream socket (any family) in a Socket on `executor`; `fd` is owned by the
// socket afterwards (closed on failure). Any thread.
Result<Socket> AdoptSocket(const boost::asio::any_io_executor& executor, UniqueFd fd);

// The same connection as a generic socket, on the same executor. `socket` is left closed.
Result<Socket> ToGeneric(boost::asio::ip::tcp::socket&& socket);

// "No more data from me": shuts the write side down. Errors are ignored: the peer may be gone,
// and then there is nothing left to tell it. Call on the socket's executor.
void HalfClose(Socket& socket);

// Shuts both directions of both sockets down: what a pump does on an error, so that every
// operation pending on either socket ends (reads see EOF, writes fail) and the other direction
// stops too. Errors are ignored. Call on the sockets' executor.
void ShutdownBoth(Socket& a, Socket& b);

}  // namespace berth::net
