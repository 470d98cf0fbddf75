// GET /v1/ports: the guest's listening TCP sockets and their owners.
// GET /v1/tunnel?port=N[&host=ADDR]: a byte pipe to a TCP port of the guest itself, over a
// WebSocket (`Upgrade: websocket`) or raw (`Upgrade: berth-tcp`, tunnel_raw.h).
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "common/blocking.h"
#include "common/client/tunnel.h"
#include "common/protocol/ports.h"
#include "guest-agent/ports_proc.h"
#include "guest-agent/api_context.h"
#include "guest-agent/tunnel_hosts.h"
#include "guest-agent/tunnel_raw.h"

namespace berth::agent {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using http::bhttp::status;
using http::bhttp::verb;

// Connecting to a port of the guest itself answers at once (accepted or refused); a listener
// with a full backlog may stall, and the caller should hear about it well before its own
// timeout.
constexpr std::chrono::seconds kTunnelConnectTimeout{10};

// `ctx` by value: it is a bundle of references, and Agent's own copy is a temporary.
// The agent's own API listener (TCP on the forward transport) is no port of the workspace's:
// left out, so nobody is offered a preview of it.
bool IsOwnListener(const ApiContext& ctx, const protocol::PortInfo& port) {
  if (!port.pid || *port.pid != static_cast<int>(getpid())) return false;
  return std::find(ctx.own_tcp_ports.begin(), ctx.own_tcp_ports.end(), port.port) != ctx.own_tcp_ports.end();
}

http::Task<void> ListPorts(ApiContext ctx, http::Exchange& ex) {
  auto ports = co_await RunBlocking(ctx.blocking, [] { return ListListeningPorts(); });
  nlohmann::json list = nlohmann::json::array();
  for (const auto& port : ports) {
    if (!IsOwnListener(ctx, port)) list.push_back(protocol::ToJson(port));
  }
  nlohmann::json body = {{"ports", std::move(list)}};
  co_await ex.SendJson(status::ok, body);
}

// Connects to the guest port with a deadline; the error says which of refused / timed out.
http::Task<Result<tcp::socket>> ConnectLocal(const tcp::endpoint& endpoint) {
  auto executor = co_await asio::this_coro::executor;
  boost::beast::basic_stream<tcp, asio::any_io_executor> stream(executor);
  stream.expires_after(kTunnelConnectTimeout);
  auto [ec] = co_await stream.async_connect(endpoint, asio::as_tuple(asio::use_awaitable));
  std::string where = fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  if (ec == boost::beast::error::timeout) {
    co_return Fail(ErrorCode::kUnavailable, fmt::format("connect to {} timed out", where));
  }
  if (ec == asio::error::connection_refused) {
    co_return Fail(ErrorCode::kUnavailable,
                   fmt::format("nothing listens on {} in the workspace (connection refused)",
                               where));
  }
  if (ec) co_return Fail(ErrorCode::kUnavailable, fmt::format("connect to {}: {}", where, ec.message()));
  tcp::socket socket = stream.release_socket();
  int one = 1;  // interactive protocols (shells, databases) over the tunnel want no delay
  setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  co_return std::move(socket);
}

http::Task<void> OpenTunnel(ApiContext ctx, http::Exchange& ex) {
  if (!ex.query().Has("port")) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "query parameter 'port' is required"});
    co_return;
  }
  auto port = ex.query().GetInt("port", 0, 1, 65535);
  if (!port) {
    co_await ex.SendError(port.error());
    co_return;
  }
  auto address = TunnelAddress(ex.query().Get("host").value_or(""), InterfaceAddresses());
  if (!address) {
    co_await ex.SendError(address.error());
    co_return;
  }
  const bool raw = IsRawTunnelUpgrade(ex);
  if (!raw && !ex.IsWebSocketUpgrade()) {
    co_await ex.SendError({ErrorCode::kInvalidArgument,
                           "/v1/tunnel needs an upgrade: WebSocket, or berth-tcp for a raw pipe"});
    co_return;
  }
  if (raw) {
    auto valid = CheckRawTunnelRequest(ex);
    if (!valid) {
      co_await ex.SendError(valid.error());
      co_return;
    }
  }
  // Connect first so that a closed port is an HTTP error the client sees before any upgrade.
  auto socket = co_await ConnectLocal(tcp::endpoint(*address, static_cast<uint16_t>(*port)));
  if (!socket) {
    co_await ex.SendError(socket.error());
    co_return;
  }
  if (raw) {
    co_await ServeRawTunnel(ex, *socket, ctx.activity);
    co_return;
  }
  auto guest = net::ToGeneric(std::move(*socket));
  if (!guest) {
    co_await ex.SendError(guest.error());
    co_return;
  }
  auto ws = co_await ex.AcceptWebSocket();
  if (!ws) co_return;  // the handshake failed; the connection is gone
  auto guard = ctx.activity.OpenStream("tunnel");
  co_await tunnel::Bridge(**ws, *guest, tunnel::BridgeRole::kGuest);
}

}  // namespace

void AddPortRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::get, "/v1/ports",
             [ctx](http::Exchange& ex) { return ListPorts(ctx, ex); });
  router.Add(verb::get, "/v1/tunnel",
             [ctx](http::Exchange& ex) { return OpenTunnel(ctx, ex); });
}

}  // namespace berth::agent
