// TCP tunnels: the agent's GET /v1/tunnel?port=N (mirrored by berthd under
// /v1/workspaces/{id}) carries a byte pipe to a TCP port in the guest, in one of two modes:
//  - WebSocket (`Upgrade: websocket`): binary frames, for browsers. Bridge() is the pump both
//    ends use; OpenTunnel() opens one.
//  - raw (`Upgrade: berth-tcp`): after `101 Switching Protocols` the connection itself is the
//    pipe, like HTTP CONNECT. Both ends pump it with net::Pump (common/net/pump.h: splice(2)
//    through a pipe, no copies in user space, where the executor allows it);
//    OpenRawTunnel() opens one and hands back the socket. It is the fast mode: a WebSocket
//    tunnel pays for framing, masking and two extra copies per hop.
// PortForwarder listens on a local TCP port and forwards every accepted connection over a
// tunnel of its own (`berth port-forward`, the benchmark), raw unless told otherwise.
// (tunnel.cc: WebSocket mode and PortForwarder; tunnel_raw.cc: raw mode.)
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/client/api_client.h"
#include "common/http/types.h"
#include "common/net/socket.h"
#include "common/unique.h"

namespace berth::tunnel {

// Bytes moved by one bridge.
struct BridgeStats {
  uint64_t to_socket = 0;     // WebSocket -> socket
  uint64_t to_websocket = 0;  // socket -> WebSocket
};

// Size of one socket read, and so of one binary frame. 256 KiB keeps per-frame overhead
// (headers, masking passes, syscalls) negligible while bounding memory per tunnel to ~1 MiB.
inline constexpr size_t kBridgeChunk = 256 * 1024;

// Which end of a tunnel a Bridge is: they differ only in what a socket EOF means.
enum class BridgeRole {
  // The agent, bridging to the guest port: the guest closing its side ends the tunnel (the
  // WebSocket is closed normally, 1000).
  kGuest,
  // A client, bridging a local connection: a local EOF is a half-close, sent as one empty
  // binary frame, and the answer keeps flowing until the guest side closes the WebSocket.
  kClient,
};

// Pumps bytes both ways between an open WebSocket and a connected stream socket (TCP, unix or
// vsock: the VNC bridge's upstream is a unix socket) until both directions are done, with one
// write in flight per direction, so a slow reader on either side stalls the other side's reads
// instead of growing a buffer. The framing adapter beside net::Pump, with its socket rules:
//  - An empty binary frame is a half-close ("no more data from me"): the receiving side shuts
//    down its socket's write end and keeps the other direction going. Data frames are never
//    empty. (WebSocket has no half-close of its own: a close frame ends both directions.)
//  - Socket EOF: kGuest closes the WebSocket normally (1000); kClient sends the empty frame.
//  - Socket error: the WebSocket is closed with 1011 and the error text.
//  - WebSocket closed or failed: the socket's write side is shut down, then it is closed.
// Call on the executor that owns both objects (their strand); the objects must outlive it.
http::Task<BridgeStats> Bridge(http::WebSocket& ws, net::Socket& socket, BridgeRole role,
                               size_t chunk = kBridgeChunk);

// The tunnel route under `scope` ("/v1" on the agent, "/v1/workspaces/{id}" on berthd).
std::string TunnelTarget(std::string_view scope, uint16_t port, std::string_view host = {});

// Opens a tunnel to `port` on the guest's loopback (or `host`, one of the guest's own
// addresses). Fails before any WebSocket is open when the guest refuses (403 for a foreign
// host, 503 when nothing listens on the port).
Result<std::unique_ptr<client::WebSocketConnection>> OpenTunnel(client::ApiClient& client,
                                                                std::string_view scope,
                                                                uint16_t port,
                                                                std::string_view host = {});

// ---------------------------------------------------------------------------------------------
// Raw mode

using Socket = net::Socket;

// Opens a raw tunnel to `port` on the guest's loopback (or `host`, one of the guest's own
// addresses): GET <scope>/tunnel with `Connection: Upgrade`, `Upgrade: berth-tcp`. Returns the
// connected socket (blocking mode, close-on-exec) positioned at the first byte from the guest
// port: the response header is consumed exactly, nothing after it. Errors before the upgrade
// are the server's (403 foreign host, 400 bad request, 503 nothing listens), as with
// OpenTunnel(); a server that does not switch protocols is an error too. Blocking; uses the
// client's endpoint, token and timeouts (connect_timeout to connect, io_timeout per step).
Result<UniqueFd> OpenRawTunnel(client::ApiClient& client, std::string_view scope, uint16_t port,
                               std::string_view host = {});

using net::AdoptSocket;

// ---------------------------------------------------------------------------------------------
// Port forwarding

// How PortForwarder reaches the guest port.
enum class TunnelMode {
  kRaw,        // Upgrade: berth-tcp only
  kWebSocket,  // Upgrade: websocket only
  // Raw; when the server answers the raw upgrade with 400 (an agent or controller from before
  // raw tunnels, which only speaks WebSocket there), WebSocket from then on.
  kAuto,
};

// Listens on a local TCP address and forwards every accepted connection over a new tunnel.
// Owns its threads: one for accepting, one per open connection (each running its own
// io_context: a raw bridge, or a blocking WebSocket of the client library). Thread-safe.
class PortForwarder {
 public:
  struct Options {
    Options() = default;
    std::string listen_host = "127.0.0.1";  // local address to listen on
    uint16_t listen_port = 0;               // 0: any free port (see local_port())
    std::string remote_host;                // guest address; empty: the guest's 127.0.0.1
    size_t max_connections = 64;            // further connections are closed at once
    TunnelMode mode = TunnelMode::kAuto;    // raw: 1.5x WebSocket's MB/s, 60% of its CPU
  };

  // Binds the listener and starts accepting. `client` and `scope` are used for every tunnel.
  static Result<std::unique_ptr<PortForwarder>> Start(client::ApiClient client, std::string scope,
                                                      uint16_t remote_port, Options options);
  ~PortForwarder();
  PortForwarder(const PortForwarder&) = delete;
  PortForwarder& operator=(const PortForwarder&) = delete;

  uint16_t local_port() const { return local_port_; }
  // Connections currently being forwarded.
  size_t active() const { return active_.load(); }
  // Connections whose tunnel could not be opened (the guest refused or was unreachable).
  size_t failed() const { return failed_.load(); }
  // Connections forwarded over a raw / a WebSocket tunnel so far.
  size_t raw_tunnels() const { return raw_tunnels_.load(); }
  size_t websocket_tunnels() const { return websocket_tunnels_.load(); }
  // Stops accepting, shuts every open connection down and joins all threads. Idempotent.
  void Stop();

 private:
  struct Worker;
  PortForwarder(client::ApiClient client, std::string scope, uint16_t remote_port,
                Options options);
  http::Task<void> AcceptLoop();
  void Serve(Worker& worker);
  // The two ways of serving one connection; false when no tunnel could be opened.
  bool ServeRaw(Worker& worker, UniqueFd tunnel);
  bool ServeWebSocket(Worker& worker);

  client::ApiClient client_;
  std::string scope_;
  uint16_t remote_port_;
  Options options_;
  uint16_t local_port_ = 0;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  std::thread accept_thread_;
  std::mutex mutex_;
  std::list<std::unique_ptr<Worker>> workers_;
  bool stopped_ = false;
  std::atomic<size_t> active_{0};
  std::atomic<size_t> failed_{0};
  std::atomic<size_t> raw_tunnels_{0};
  std::atomic<size_t> websocket_tunnels_{0};
  // kAuto: set once the server refused a raw upgrade; later connections go WebSocket.
  std::atomic<bool> raw_refused_{false};
};

}  // namespace berth::tunnel
