// Notices that the peer of a connection has gone while nothing is read from it: a proxy waiting
// for its upstream's answer (an exec in wait mode that runs for hours) would otherwise keep a
// socket in CLOSE_WAIT and the upstream busy for as long as the upstream takes. nginx does the
// same check for proxied requests.
//
// It keeps one recv(MSG_PEEK) of one byte pending on the socket, so it consumes nothing:
// pipelined bytes stay for the next reader. That read is a real Asio read operation (not an
// async_wait), so no readiness edge is lost on a multi-threaded io_context.
#pragma once

#include <boost/asio/cancellation_signal.hpp>

#include "common/http/types.h"
#include "common/net/socket.h"

namespace berth::net {

class PeerWatch {
 public:
  enum class Outcome {
    kClosed,       // the peer closed its side (EOF) or the connection failed
    kDataPending,  // the peer sent more bytes; with them unread, a later EOF cannot be seen
    kStopped,      // Stop() was called
  };

  PeerWatch() = default;
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Waits until one of the outcomes above. A peer that only half-closes (shutdown(SHUT_WR)
  // and still reads) counts as closed: HTTP clients do not do that while a request is open.
  // Run at most once; call on the socket's executor, with no other read pending on `socket`
  // (writes may be).
  http::Task<Outcome> Run(Socket& socket);

  // Ends Run() with kStopped, or makes a Run() that has not started yet return at once. Call on
  // the socket's executor (Run()'s strand). Idempotent.
  void Stop();

 private:
  boost::asio::cancellation_signal signal_;
  bool stopped_ = false;
};

}  // namespace berth::net
