// An HTTP/1.1 + WebSocket server over any stream transport (unix, TCP, vsock), built on
// Boost.Beast coroutines: one coroutine per connection on its own strand, caps on connections
// (in total, per source address, per admitted key), limits on header size and timeouts on
// every read and write.
//
// Handlers get an Exchange: the parsed request header plus the means to read the body (whole
// or streamed), answer (whole, chunked-streamed, or by taking over the connection as a
// WebSocket or raw byte pipe).
//
// Connections come from the server's own listeners (Listen) or are handed to it already
// connected (Adopt): the TLS front (tls_front.h) ends TLS and adopts one end of a socketpair,
// naming the client's address, so the caps and what handlers see are the client's.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/http/types.h"
#include "common/http/url.h"
#include "common/unique.h"

namespace berth::http {

struct ServerOptions {
  // Request line plus headers. 16 KiB fits any sane client and bounds what a hostile one costs.
  size_t max_header_bytes = 16 * 1024;
  // At most this many open connections. At the cap, with shed_unadmitted, the connection that
  // has waited longest for a request head without ever being admitted (Exchange::Admit) is
  // closed to make room; without it, or with none such, the new one gets a 503 and is closed.
  size_t max_connections = 512;
  // See max_connections. On where a layer above admits the connections it knows (berthd: an
  // authenticated key), so that a flood of anonymous sockets cannot starve them.
  bool shed_unadmitted = false;
  // At most this many open connections from one source address (TCP peers; IPv4-mapped IPv6
  // counts as IPv4; unix and vsock peers are not counted); 0: no cap. Above it: 429 with
  // Retry-After and closed. Behind a reverse proxy every client is the proxy's address.
  size_t max_connections_per_source = 0;
  // At most this many open connections admitted with one key (Exchange::Admit); 0: no cap.
  size_t max_connections_per_key = 0;
  // What a client refused by a connection cap is told to wait (Retry-After): connections free
  // up as other requests end, so a short wait.
  std::chrono::seconds connection_retry_after{5};
  // Time allowed to receive a complete request header once the first byte is expected.
  std::chrono::seconds header_timeout{30};
  // When set, a connection never admitted (Exchange::Admit) gets this long, in total however
  // the bytes trickle in, for each request head, the first included (instead of
  // header_timeout, then idle_timeout): a socket without a key cannot hold its slot for long.
  std::optional<std::chrono::seconds> unadmitted_header_timeout;
  // A keep-alive connection with no next request is closed after this.
  std::chrono::seconds idle_timeout{120};
  // Each body read or response write must make progress within this.
  std::chrono::seconds io_timeout{60};
  // A body read whole (ReadBody, ReadJson) must arrive completely within this, however it
  // trickles in: a per-read timeout alone lets a client that sends a byte a minute hold a
  // connection and its buffer for ever. Streamed bodies (ReadBodyChunks) have no total.
  std::chrono::seconds body_timeout{60};
  // Default cap for ReadJson / ReadBody.
  size_t max_json_bytes = 1 << 20;
};

class Exchange {
 public:
  // How the connection's server records an admission (see Admit); empty: admission always
  // succeeds (an Exchange without a Server behind it).
  using AdmitFn = std::function<Status(std::string_view key)>;
  // `peer_address` and `secure`: see peer_address() and secure().
  Exchange(Stream& stream, beast::flat_buffer& buffer,
           bhttp::request_parser<bhttp::buffer_body>& parser, const ServerOptions& options,
           const Endpoint& listener, std::string peer_address = {}, bool secure = false,
           AdmitFn admit = {});

  // --- the request ------------------------------------------------------------------------
  const bhttp::request<bhttp::buffer_body>& request() const { return parser_.get(); }
  bhttp::verb method() const { return request().method(); }
  std::string_view target() const { return request().target(); }
  // The decoded path (no query).
  const std::string& path() const { return path_; }
  const Query& query() const { return query_; }
  std::string_view header(bhttp::field field) const;
  std::string_view header(std::string_view name) const;
  // Parameters bound by the router, e.g. "id" for "/v1/processes/{id}".
  std::map<std::string, std::string, std::less<>>& params() { return params_; }
  std::string_view param(std::string_view name) const;
  // Which listener the request came through.
  const Endpoint& listener() const { return listener_; }
  // The client's IP address as text (PeerAddress's form; for an adopted connection, the
  // address its adopter named): what X-Forwarded-For and logs say. Empty for unix and vsock
  // clients.
  const std::string& peer_address() const { return peer_address_; }
  // Whether the client reached the server over TLS (a connection the TLS front adopted).
  bool secure() const { return secure_; }
  // Anything a middleware wants to carry to the handler (e.g. the authenticated principal).
  nlohmann::json& context() { return context_; }

  // --- admission --------------------------------------------------------------------------
  // Tells the server that this request was authenticated as `key` (an opaque name: berthd
  // passes the API key's id, never the secret). From then on the connection counts against
  // `key`'s cap (max_connections_per_key), waits idle_timeout for its next request instead of
  // unadmitted_header_timeout, and is never shed at the total cap. resource_exhausted, with
  // a message naming the per-key limit, when `key` already holds that many other
  // connections: the caller answers (429) and closes the connection; it stays unadmitted.
  // Admitting again with the same key is a no-op, with another key moves the connection.
  // The connection's strand (the handler).
  Status Admit(std::string_view key);

  // --- the request body -------------------------------------------------------------------
  // Whole body, at most `limit` bytes (413 above, before reading when Content-Length says
  // so), complete within `total` (options().body_timeout by default; deadline_exceeded and
  // the connection closed after it). Call at most once.
  Task<Result<std::string>> ReadBody(size_t limit);
  Task<Result<std::string>> ReadBody(size_t limit, std::chrono::seconds total);
  // Whole body parsed as JSON (common/json.h: bounded depth); an empty body reads as an
  // empty object. At most options().max_json_bytes, within options().body_timeout.
  Task<Result<nlohmann::json>> ReadJson();
  // The same with a limit of its own (a route whose bodies are larger than the rest).
  Task<Result<nlohmann::json>> ReadJson(size_t limit);
  // Streams the body to `sink` in chunks of up to `chunk` bytes, without holding it in memory.
  // `sink` may be a coroutine; a failing sink stops the read and its error is returned.
  using ChunkSink = std::function<Task<Status>(std::string_view)>;
  Task<Status> ReadBodyChunks(const ChunkSink& sink, size_t chunk = 256 * 1024);
  // True once the request body has been read to its end (needed for keep-alive).
  bool body_done() const { return body_done_; }

  // --- answers ----------------------------------------------------------------------------
  Task<Status> Send(bhttp::response<bhttp::string_body> response);
  Task<Status> SendJson(bhttp::status status, const nlohmann::json& body);
  Task<Status> SendJson(bhttp::status status, const nlohmann::json& body,
                        const std::vector<std::pair<std::string, std::string>>& headers);
  Task<Status> SendError(const Error& error);
  // A chunked response: BeginChunked once, WriteChunk any number of times, EndChunked.
  // `headers` are added as given (a field given twice is sent twice: Set-Cookie); an empty
  // `content_type` sends none.
  // Only one write may be in flight; callers with several producers serialize them.
  Task<Status> BeginChunked(bhttp::status status, std::string_view content_type,
                            const std::vector<std::pair<std::string, std::string>>& headers = {});
  Task<Status> WriteChunk(std::string_view data);
  Task<Status> EndChunked();
  // A response with a known length whose body the caller writes with WriteRaw.
  Task<Status> BeginFixed(bhttp::status status, std::string_view content_type, uint64_t length,
                          const std::vector<std::pair<std::string, std::string>>& headers = {});
  Task<Status> WriteRaw(std::string_view data);

  bool IsWebSocketUpgrade() const;
  // Completes the WebSocket handshake and hands over the connection. The Exchange is finished
  // afterwards; the connection closes when the returned stream is dropped.
  Task<Result<std::unique_ptr<WebSocket>>> AcceptWebSocket();
  // Hands the connection over as a raw byte stream (a proxied upgrade, a raw tunnel): the
  // caller writes its own response bytes to stream() and pumps data until it is done; the
  // connection closes when the handler returns. Returns what the client sent after the request
  // header that is already buffered (it must be treated as the first bytes of the stream). No
  // timeout is armed afterwards; the caller sets its own.
  std::string TakeOver();

  bool responded() const { return responded_; }
  bool keep_alive() const { return keep_alive_ && body_done_ && !taken_; }
  void set_keep_alive(bool keep) { keep_alive_ = keep; }
  const ServerOptions& options() const { return options_; }
  Stream& stream() { return stream_; }

  // Parses the target; false after answering 400 itself.
  Task<bool> Prepare();

 private:
  // ReadBodyChunks with each read bounded by `deadline` when set, by io_timeout otherwise.
  Task<Status> ReadBodyChunksUntil(const ChunkSink& sink, size_t chunk,
                                   std::optional<std::chrono::steady_clock::time_point> deadline);

  Stream& stream_;
  beast::flat_buffer& buffer_;
  bhttp::request_parser<bhttp::buffer_body>& parser_;
  const ServerOptions& options_;
  const Endpoint& listener_;
  std::string peer_address_;
  bool secure_ = false;
  AdmitFn admit_;
  std::string path_;
  Query query_;
  std::map<std::string, std::string, std::less<>> params_;
  nlohmann::json context_ = nlohmann::json::object();
  bool body_done_ = false;
  bool body_started_ = false;
  bool responded_ = false;
  bool keep_alive_ = true;
  bool taken_ = false;
};

using Handler = std::function<Task<void>(Exchange&)>;

// The peer's IP address as text for a TCP socket (IPv4-mapped IPv6 as IPv4), empty for
// anything else (unix, vsock): the key of the per-source cap, and what a proxy puts in
// X-Forwarded-For (handlers read it as Exchange::peer_address()). Any thread.
std::string PeerAddress(int fd);

class Server {
 public:
  Server(asio::io_context& io, ServerOptions options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts accepting. A unix path is unlinked first and chmod'ed to `unix_mode`.
  // Returns the bound endpoint (with the real port when 0 was asked). Any thread.
  Result<Endpoint> Listen(const Endpoint& endpoint, unsigned unix_mode = 0600);
  // Serves a connection accepted elsewhere (`inner`, a connected stream socket, owned by the
  // server from now on) exactly as one of Listen's: the same caps and admission, the same
  // timeouts. `peer_address` is the client's address as PeerAddress gives it (empty: not
  // counted per source), what the per-source cap counts and Exchange::peer_address() says;
  // `listener` is what Exchange::listener() says; `secure` what Exchange::secure() says. A
  // connection refused by a cap gets its refusal (429, 503) written to `inner`, which is then
  // closed, and that is still success. failed_precondition once the server is stopped. Any
  // thread.
  Status Adopt(UniqueFd inner, const Endpoint& listener, std::string peer_address, bool secure);
  // Stops accepting, then closes every open connection. Any thread; idempotent.
  void Stop();
  size_t open_connections() const { return open_connections_.load(); }

 private:
  struct Listener;
  struct Connection;
  Task<void> AcceptLoop(std::shared_ptr<Listener> listener);
  // Counts a new connection in and starts serving it on its strand, or writes its refusal and
  // closes it. false when the server is stopped (the connection is dropped).
  bool Begin(std::shared_ptr<Connection> connection);
  Task<void> Serve(std::shared_ptr<Connection> connection);
  // Counts a new connection in, or says why not (nullopt: admitted); may pick a connection to
  // shed (returned in `shed`, to be shut down after the lock). Holds mutex_.
  std::optional<std::string> AdmitNewLocked(const std::shared_ptr<Connection>& c,
                                            std::shared_ptr<Connection>& shed);
  // Exchange::Admit for `c`.
  Status AdmitKey(Connection& c, std::string_view key);
  // Marks the start and end of the wait for a request head (what shedding looks at).
  void SetWaiting(Connection& c, bool waiting);
  // Takes `c` out of the counts (idempotent). Holds mutex_.
  void UncountLocked(Connection& c);

  asio::io_context& io_;
  ServerOptions options_;
  Handler handler_;
  std::atomic<size_t> open_connections_{0};
  std::mutex mutex_;
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::set<std::weak_ptr<Connection>, std::owner_less<std::weak_ptr<Connection>>> connections_;
  // Under mutex_: connections counted against the caps (open and not being shed), and their
  // counts per source address and per admitted key (entries erased at zero).
  size_t counted_ = 0;
  std::map<std::string, size_t, std::less<>> per_source_;
  std::map<std::string, size_t, std::less<>> per_key_;
  bool stopped_ = false;
};

}  // namespace berth::http
