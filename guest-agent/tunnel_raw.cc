#include "guest-agent/tunnel_raw.h"

#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/net/pump.h"
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
  auto guest_socket = net::ToGeneric(std::move(guest));
  if (!guest_socket) {
    spdlog::warn("raw tunnel to {}: {}", where, guest_socket.error().message);
    co_return;
  }
  // The agent's io_context is run by its one I/O thread, and it ignores SIGPIPE: splice(2).
  net::PumpOptions pump;
  pump.a_initial = early;
  pump.splice = true;
  auto stats = co_await net::Pump(stream.socket(), *guest_socket, pump);
  spdlog::debug("raw tunnel to {} ended: {} bytes to the guest, {} from it", where,
                stats.a_to_b, stats.b_to_a);
}

}  // namespace berth::agent
