#include "guest-agent/tunnel_raw.h"

#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/client/tunnel.h"
#include "common/protocol/ports.h"

namespace berth::agent {

namespace asio = boost::asio;
using http::bhttp::field;

bool IsRawTunnelUpgrade(const http::Exchange& ex) {
  return protocol::HasToken(ex.header(field::connection), "upgrade") &&
         protocol::HasToken(ex.header(field::upgrade), protocol::kRawTunnelProtocol);
}

Status CheckRawTunnelRequest(const http::Exchange& ex) {
  if (ex.request().version() != 11) {
    return Fail(ErrorCode::kInvalidArgument, "a raw tunnel needs HTTP/1.1");
  }
  // Body bytes would be taken for tunnel data.
  if (!ex.body_done()) {
    return Fail(ErrorCode::kInvalidArgument, "a tunnel request has no body");
  }
  return {};
}

http::Task<void> ServeRawTunnel(http::Exchange& ex, asio::ip::tcp::socket& guest,
                                ActivityTracker& activity) {
  std::string early = ex.TakeOver();
  const std::string switching = fmt::format(
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {}\r\n\r\n",
      protocol::kRawTunnelProtocol);
  http::Stream& stream = ex.stream();
  stream.expires_after(ex.options().io_timeout);
  auto [ec, n] = co_await asio::async_write(stream, asio::buffer(switching),
                                            asio::as_tuple(asio::use_awaitable));
  // No timeout on the tunnel itself: like an ssh session, it may be idle for hours.
  stream.expires_never();
  if (ec) co_return;
  auto guard = activity.OpenStream("tunnel");

  boost::system::error_code aec;
  auto endpoint = guest.remote_endpoint(aec);
  std::string where = aec ? std::string("?")
                          : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  tunnel::Socket guest_socket(guest.get_executor());
  int family = endpoint.protocol().family();
  guest_socket.assign(asio::generic::stream_protocol(family, IPPROTO_TCP), guest.release(), aec);
  if (aec) {
    spdlog::warn("raw tunnel to {}: {}", where, aec.message());
    co_return;
  }
  auto stats = co_await tunnel::RawBridge(stream.socket(), guest_socket, early);
  spdlog::debug("raw tunnel to {} ended: {} bytes to the guest, {} from it", where,
                stats.a_to_b, stats.b_to_a);
}

}  // namespace berth::agent
