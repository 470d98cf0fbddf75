// The one byte pump of Berth: moves bytes both ways between two connected stream sockets until
// both directions have ended. The agent's raw tunnels (guest port <-> client), berthd's
// upgraded connections (client <-> agent: exec WebSockets, tunnels), the client's
// PortForwarder, and the coming preview proxy and VNC bridge (an accepted client stream and a
// connected unix or TCP upstream) all use it. tunnel::Bridge, the WebSocket <-> socket framing
// adapter, shares its shutdown rules (common/net/socket.h).
//
// Contracts, per direction (from -> to):
//  - backpressure: one write in flight; a slow reader stalls the other side's reads instead of
//    growing a buffer (at most one buffer, or one pipe with splice, per direction);
//  - EOF: everything read is delivered, then `to`'s write side is shut down (a half-close); the
//    other direction goes on until its own EOF;
//  - an error on either socket (reset, EPIPE, a shutdown by someone else) shuts both sockets
//    down in both directions, so the other direction ends too.
// To end a pump early, shut both sockets down (shutdown(2) on a descriptor is safe from any
// thread). One shut down is an EOF from that side: passed on as a half-close, while the other
// direction runs until its peer ends it too (http::Server::Stop shuts a client connection
// down; the agent behind an upgraded one then ends its side).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "common/http/types.h"
#include "common/net/socket.h"

namespace berth::net {

// The copy path's buffer starts at this and doubles, up to PumpOptions::max_chunk, while reads
// fill it: an idle pipe (a shell session, a VNC connection at rest) holds 2 x 16 KiB, a bulk
// transfer reaches full-size reads after a few of them.
inline constexpr size_t kMinChunk = 16 * 1024;
// 256 KiB reads keep per-syscall overhead negligible on loopback while bounding a pipe to
// ~512 KiB of buffers.
inline constexpr size_t kMaxChunk = 256 * 1024;

// Trivially destructible on purpose: a PumpOptions built inside a co_await expression is safe
// from the g++ 12 double destruction (docs/architecture.md).
struct PumpOptions {
  // Bytes already read from `a` (e.g. behind an HTTP request header): they go to `b` before
  // anything else read from `a`. Must stay valid until the pump returns.
  std::string_view a_initial;
  // The same for `b`: they go to `a` first (e.g. a response header to relay).
  std::string_view b_initial;
  // Largest read of the copy path (see kMinChunk).
  size_t max_chunk = kMaxChunk;
  // Move bytes with splice(2) through a pipe per direction (no copy through user space),
  // falling back to copying where the kernel cannot splice a socket type. ONLY when the
  // io_context running these sockets is run by ONE thread (the agent's is, so is each
  // PortForwarder connection's; berthd's is not): readiness is awaited with async_wait after
  // splice() said EAGAIN, and Asio's epoll reactor drops an edge that a second thread's
  // epoll_wait sees before the wait is queued (a strand does not prevent that), which would
  // stall a direction until more data arrives. The copy path has no such limit. splice(2)
  // cannot take MSG_NOSIGNAL either: the calling thread must ignore or block SIGPIPE.
  bool splice = false;
  // Each sees every byte delivered in its direction, in order, initial bytes included, after
  // they were written (berthd's timeline reads a WebSocket's first and last messages this
  // way). A direction with a tap copies (no splice). Called on the pump's executor.
  std::function<void(std::string_view)> a_to_b_tap;
  std::function<void(std::string_view)> b_to_a_tap;
};

struct PumpStats {
  uint64_t a_to_b = 0;  // bytes delivered from a to b (a_initial included)
  uint64_t b_to_a = 0;
  // Whether each direction ended with its source's EOF (false: an error ended it).
  bool a_to_b_eof = false;
  bool b_to_a_eof = false;
  // Whether any direction moved its data with splice(2).
  bool spliced = false;
};

// Pumps until both directions have ended (see above). Call on the executor that owns both
// sockets (their strand on a multi-threaded io_context); they must outlive the call and are
// left open (shut down) for the caller to close. Sockets are put in non-blocking mode.
http::Task<PumpStats> Pump(Socket& a, Socket& b, PumpOptions options = {});

}  // namespace berth::net
