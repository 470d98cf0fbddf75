#include "common/client/tunnel.h"

#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/http/url.h"
#include "common/net/pump.h"
#include "common/protocol/ports.h"

namespace berth::tunnel {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using asio::ip::tcp;
using http::Task;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

struct BridgeState {
  bool websocket_ended = false;  // the WebSocket delivers no more data (closed or failed)
  BridgeStats stats;
};

// A close reason fits in a control frame: 125 bytes minus the 2-byte code.
websocket::close_reason CloseReason(websocket::close_code code, std::string text) {
  if (text.size() > 120) text.resize(120);
  return websocket::close_reason(code, text);
}

// socket -> WebSocket. The only coroutine that writes to the WebSocket, the close included,
// so at most one write is ever in flight on it.
Task<void> SocketToWebSocket(http::WebSocket& ws, net::Socket& socket, BridgeState& state,
                             BridgeRole role, size_t chunk) {
  std::vector<char> buf(chunk);
  for (;;) {
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buf), kTuple);
    if (ec == asio::error::eof && role == BridgeRole::kClient && ws.is_open() &&
        !state.websocket_ended) {
      // Half-close: the answer may still be on its way; the guest side ends the tunnel.
      co_await ws.async_write(asio::const_buffer(), kTuple);
      co_return;
    }
    if (ec) {
      if (ws.is_open() && !state.websocket_ended) {
        // EOF is the normal end of the guest side; anything else is reported in the close.
        auto reason = ec == asio::error::eof
                          ? websocket::close_reason(websocket::close_code::normal)
                          : CloseReason(websocket::close_code::internal_error,
                                        fmt::format("tcp: {}", ec.message()));
        co_await ws.async_close(reason, kTuple);
      }
      co_return;
    }
    state.stats.to_websocket += n;
    auto [wec, wn] = co_await ws.async_write(asio::buffer(buf.data(), n), kTuple);
    if (wec) {
      // The peer is gone: nothing read from the socket can be delivered any more. Cancelling
      // the WebSocket's socket ends the other pump's read, which then closes the TCP side.
      beast::get_lowest_layer(ws).cancel();
      co_return;
    }
  }
}

// WebSocket -> socket. Whole messages are bounded by the stream's read_message_max.
Task<void> WebSocketToSocket(http::WebSocket& ws, net::Socket& socket, BridgeState& state) {
  beast::flat_buffer buf;
  for (;;) {
    auto [ec, n] = co_await ws.async_read(buf, kTuple);
    if (ec) break;
    if (n == 0) {
      // The peer's half-close: no more data for the socket; the other direction goes on.
      net::HalfClose(socket);
      continue;
    }
    // While this write waits for a slow socket nothing reads the WebSocket, so Beast's idle
    // timer would see no pong and close a tunnel whose peer is alive and merely held back by
    // backpressure. The idle timeout is off for the duration of the write.
    websocket::stream_base::timeout saved;
    ws.get_option(saved);
    websocket::stream_base::timeout paused = saved;
    paused.idle_timeout = websocket::stream_base::none();
    ws.set_option(paused);
    auto [wec, wn] = co_await asio::async_write(socket, buf.data(), kTuple);
    ws.set_option(saved);
    buf.consume(n);
    if (wec) {
      // The guest side stopped taking data; closing the socket makes the other pump end the
      // WebSocket with the error.
      boost::system::error_code ignored;
      socket.cancel(ignored);
      co_return;
    }
    state.stats.to_socket += n;
  }
  // The WebSocket closed (or failed): end the byte stream towards the guest, then drop it.
  // Nothing the guest sends from now on could be delivered.
  state.websocket_ended = true;
  net::HalfClose(socket);
  boost::system::error_code ignored;
  socket.close(ignored);
}

}  // namespace

Task<BridgeStats> Bridge(http::WebSocket& ws, net::Socket& socket, BridgeRole role,
                         size_t chunk) {
  using namespace asio::experimental::awaitable_operators;
  ws.binary(true);
  // One frame per write: Beast's default auto-fragmenting splits into 4 KiB frames, and a
  // client's masking pass copies through a buffer of this size, one syscall per buffer.
  ws.auto_fragment(false);
  ws.write_buffer_bytes(chunk);
  BridgeState state;
  co_await (SocketToWebSocket(ws, socket, state, role, chunk) && WebSocketToSocket(ws, socket, state));
  co_return state.stats;
}

std::string TunnelTarget(std::string_view scope, uint16_t port, std::string_view host) {
  std::string target = fmt::format("{}/tunnel?port={}", scope, port);
  if (!host.empty()) target += "&host=" + http::PercentEncode(host, false);
  return target;
}

Result<std::unique_ptr<client::WebSocketConnection>> OpenTunnel(client::ApiClient& client,
                                                                std::string_view scope,
                                                                uint16_t port,
                                                                std::string_view host) {
  auto valid = protocol::ParseTunnelPort(port);
  if (!valid) return Fail(valid.error());
  return client.OpenWebSocket(TunnelTarget(scope, port, host));
}

// ---------------------------------------------------------------------------------------------
// PortForwarder

struct PortForwarder::Worker {
  std::thread thread;
  std::atomic<bool> done{false};
  std::mutex mutex;
  int local_fd = -1;  // the accepted connection, until the bridge's socket owns it
  bool local_v6 = false;
  // While a bridge runs, for Stop(): shutting both sockets down ends it, whichever way data
  // was (or was not) flowing.
  int tunnel_fd = -1;
  int bridged_local_fd = -1;
  bool stop = false;
};

PortForwarder::PortForwarder(client::ApiClient client, std::string scope, uint16_t remote_port,
                             Options options)
    : client_(std::move(client)),
      scope_(std::move(scope)),
      remote_port_(remote_port),
      options_(std::move(options)) {}

Result<std::unique_ptr<PortForwarder>> PortForwarder::Start(client::ApiClient client,
                                                            std::string scope,
                                                            uint16_t remote_port,
                                                            Options options) {
  auto valid = protocol::ParseTunnelPort(remote_port);
  if (!valid) return Fail(valid.error());
  std::unique_ptr<PortForwarder> self(
      new PortForwarder(std::move(client), std::move(scope), remote_port, std::move(options)));
  boost::system::error_code ec;
  auto address = asio::ip::make_address(self->options_.listen_host, ec);
  if (ec) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("bad listen address '{}'", self->options_.listen_host));
  }
  tcp::endpoint endpoint(address, self->options_.listen_port);
  self->acceptor_.open(endpoint.protocol(), ec);
  if (!ec) self->acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) self->acceptor_.bind(endpoint, ec);
  if (!ec) self->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("listen on {}:{}: {}", self->options_.listen_host,
                            self->options_.listen_port, ec.message()));
  }
  self->local_port_ = self->acceptor_.local_endpoint().port();
  asio::co_spawn(self->io_, self->AcceptLoop(), asio::detached);
  self->accept_thread_ = std::thread([s = self.get()] { s->io_.run(); });
  return self;
}

PortForwarder::~PortForwarder() { Stop(); }

Task<void> PortForwarder::AcceptLoop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(kTuple);
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) {
      spdlog::warn("port-forward accept: {}", ec.message());
      asio::steady_timer timer(io_, std::chrono::milliseconds(100));
      co_await timer.async_wait(kTuple);
      continue;
    }
    std::lock_guard lock(mutex_);
    if (stopped_) co_return;
    // Reap finished workers so a long-lived forwarder does not collect threads.
    for (auto it = workers_.begin(); it != workers_.end();) {
      if ((*it)->done.load()) {
        (*it)->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    if (workers_.size() >= options_.max_connections) {
      spdlog::warn("port-forward: {} connections open, refusing another", workers_.size());
      continue;  // `socket` closes here
    }
    int one = 1;
    setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto worker = std::make_unique<Worker>();
    boost::system::error_code ignored;
    worker->local_v6 = socket.local_endpoint(ignored).protocol() == tcp::v6();
    worker->local_fd = socket.release();
    Worker* w = worker.get();
    workers_.push_back(std::move(worker));
    w->thread = std::thread([this, w] {
      // splice(2) cannot take MSG_NOSIGNAL: writing to a peer that went away raises SIGPIPE.
      // Blocked in this thread, which the forwarder owns, it stays pending and goes with it.
      sigset_t pipe_signal;
      sigemptyset(&pipe_signal);
      sigaddset(&pipe_signal, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
      Serve(*w);
    });
  }
}

void PortForwarder::Serve(Worker& worker) {
  ++active_;
  bool served = false;
  bool raw = options_.mode == TunnelMode::kRaw ||
             (options_.mode == TunnelMode::kAuto && !raw_refused_.load());
  if (raw) {
    auto tunnel = OpenRawTunnel(client_, scope_, remote_port_, options_.remote_host);
    if (tunnel) {
      served = ServeRaw(worker, std::move(*tunnel));
    } else if (options_.mode == TunnelMode::kAuto &&
               tunnel.error().code == ErrorCode::kInvalidArgument) {
      // A server from before raw tunnels asks for a WebSocket with a 400. (A request that is
      // wrong in itself fails the same way over WebSocket and is reported there.)
      spdlog::info("port-forward: the server refused a raw tunnel ({}); using WebSocket",
                   tunnel.error().message);
      raw_refused_ = true;
      raw = false;
    } else {
      spdlog::warn("port-forward to guest port {}: {}", remote_port_, tunnel.error().message);
    }
  }
  if (!raw) served = ServeWebSocket(worker);
  if (!served) ++failed_;
  {
    std::lock_guard lock(worker.mutex);
    if (worker.local_fd >= 0) ::close(worker.local_fd);
    worker.local_fd = -1;
  }
  --active_;
  worker.done = true;
}

bool PortForwarder::ServeRaw(Worker& worker, UniqueFd tunnel) {
  // One thread runs this io_context, so the pump may splice (net::PumpOptions::splice).
  asio::io_context io(1);
  int tunnel_fd = tunnel.get();
  auto remote = AdoptSocket(io.get_executor(), std::move(tunnel));
  if (!remote) {
    spdlog::warn("port-forward to guest port {}: {}", remote_port_, remote.error().message);
    return false;
  }
  ++raw_tunnels_;
  Socket local(io);
  boost::system::error_code ec;
  {
    std::lock_guard lock(worker.mutex);
    auto family = worker.local_v6 ? AF_INET6 : AF_INET;
    local.assign(asio::generic::stream_protocol(family, IPPROTO_TCP), worker.local_fd, ec);
    if (!ec) {
      worker.bridged_local_fd = worker.local_fd;
      worker.local_fd = -1;  // owned by `local` now
    }
    worker.tunnel_fd = tunnel_fd;
    if (worker.stop) ec = asio::error::operation_aborted;
  }
  if (!ec) {
    net::PumpOptions pump;
    pump.splice = true;
    asio::co_spawn(io, net::Pump(local, *remote, pump), asio::detached);
    io.run();
  }
  std::lock_guard lock(worker.mutex);
  worker.tunnel_fd = -1;
  worker.bridged_local_fd = -1;
  return true;
}

bool PortForwarder::ServeWebSocket(Worker& worker) {
  auto tunnel = OpenTunnel(client_, scope_, remote_port_, options_.remote_host);
  if (!tunnel) {
    spdlog::warn("port-forward to guest port {}: {}", remote_port_, tunnel.error().message);
    return false;
  }
  ++websocket_tunnels_;
  auto& conn = **tunnel;
  net::Socket local(conn.io());
  boost::system::error_code ec;
  {
    std::lock_guard lock(worker.mutex);
    auto family = worker.local_v6 ? AF_INET6 : AF_INET;
    local.assign(asio::generic::stream_protocol(family, IPPROTO_TCP), worker.local_fd, ec);
    if (!ec) {
      worker.bridged_local_fd = worker.local_fd;
      worker.local_fd = -1;  // owned by `local` now
    }
    worker.tunnel_fd = beast::get_lowest_layer(conn.socket()).socket().native_handle();
    if (worker.stop) ec = asio::error::operation_aborted;
  }
  if (!ec) {
    asio::co_spawn(conn.io(), Bridge(conn.socket(), local, BridgeRole::kClient), asio::detached);
    conn.io().restart();
    conn.io().run();
  }
  std::lock_guard lock(worker.mutex);
  worker.tunnel_fd = -1;
  worker.bridged_local_fd = -1;
  return true;
}

void PortForwarder::Stop() {
  std::list<std::unique_ptr<Worker>> workers;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    workers.swap(workers_);
  }
  asio::post(io_, [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  });
  if (accept_thread_.joinable()) accept_thread_.join();
  for (auto& w : workers) {
    {
      std::lock_guard lock(w->mutex);
      w->stop = true;
      if (w->tunnel_fd >= 0) ::shutdown(w->tunnel_fd, SHUT_RDWR);
      if (w->bridged_local_fd >= 0) ::shutdown(w->bridged_local_fd, SHUT_RDWR);
    }
    if (w->thread.joinable()) w->thread.join();
  }
}

}  // namespace berth::tunnel
