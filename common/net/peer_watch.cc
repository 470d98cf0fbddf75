#include "common/net/peer_watch.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace berth::net {

namespace asio = boost::asio;

http::Task<PeerWatch::Outcome> PeerWatch::Run(Socket& socket) {
  if (stopped_) co_return Outcome::kStopped;
  char byte = 0;
  // Bound to our own signal: Stop() cancels exactly this read and nothing else on the socket.
  auto token = asio::bind_cancellation_slot(signal_.slot(), asio::as_tuple(asio::use_awaitable));
  auto [ec, n] = co_await socket.async_receive(asio::buffer(&byte, 1),
                                               asio::socket_base::message_peek, token);
  if (stopped_) co_return Outcome::kStopped;
  // EOF, a reset, or the socket shut down or closed under us (a write timeout closes it).
  if (ec) co_return Outcome::kClosed;
  co_return n > 0 ? Outcome::kDataPending : Outcome::kClosed;
}

void PeerWatch::Stop() {
  if (stopped_) return;
  stopped_ = true;
  signal_.emit(asio::cancellation_type::all);
}

}  // namespace berth::net
