#include "common/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "common/net/socket.h"

namespace berth::http {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// At most this long waiting for a client that still sends a body the server did not read.
constexpr std::chrono::seconds kLingerTime{1};

Error IoError(const boost::system::error_code& ec, std::string_view what) {
  if (ec == beast::error::timeout) {
    return Error{ErrorCode::kDeadlineExceeded, fmt::format("{}: timed out", what)};
  }
  return Error{ErrorCode::kUnavailable, fmt::format("{}: {}", what, ec.message())};
}

bhttp::response<bhttp::string_body> ErrorResponse(const Error& error, unsigned version) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(HttpStatus(error.code)),
                                          version};
  res.set(bhttp::field::content_type, "application/json");
  nlohmann::json body = {{"error",
                          {{"code", ErrorCodeName(error.code)}, {"message", error.message}}}};
  if (!error.details.empty()) {
    // Made by berthd itself (Error::details); a broken one is dropped, never sent half-way.
    if (auto details = ParseJson(error.details); details && details->is_object()) {
      body["error"]["details"] = std::move(*details);
    }
  }
  res.body() = DumpJson(body);
  res.prepare_payload();
  return res;
}

}  // namespace

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) return {};
    return text;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      if (inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text)) == nullptr) return {};
    } else if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) == nullptr) {
      return {};
    }
    return text;
  }
  return {};
}

namespace {

// A whole error answer as bytes, for connections refused before any request is read.
std::string RefusalBytes(int status, std::string_view reason, std::string_view code,
                         const std::string& message, std::optional<std::chrono::seconds> retry) {
  nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
  std::string text = DumpJson(body);
  std::string retry_header =
      retry ? fmt::format("Retry-After: {}\r\n", retry->count()) : std::string();
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\n{}Connection: close\r\n"
      "Content-Length: {}\r\n\r\n{}",
      status, reason, retry_header, text.size(), text);
}

void Decrement(std::map<std::string, size_t, std::less<>>& counts, const std::string& name) {
  auto it = counts.find(name);
  if (it == counts.end()) return;
  if (--it->second == 0) counts.erase(it);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Exchange

Exchange::Exchange(Stream& stream, beast::flat_buffer& buffer,
                   bhttp::request_parser<bhttp::buffer_body>& parser,
                   const ServerOptions& options, const Endpoint& listener,
                   std::string peer_address, bool secure, AdmitFn admit)
    : stream_(stream),
      buffer_(buffer),
      parser_(parser),
      options_(options),
      listener_(listener),
      peer_address_(std::move(peer_address)),
      secure_(secure),
      admit_(std::move(admit)) {
  body_done_ = parser_.is_done();
}

Status Exchange::Admit(std::string_view key) {
  if (!admit_) return Status{};
  return admit_(key);
}

Task<bool> Exchange::Prepare() {
  auto [path, query] = SplitTarget(target());
  auto decoded = PercentDecode(path);
  if (!decoded || !decoded->starts_with('/')) {
    keep_alive_ = false;
    co_await SendError({ErrorCode::kInvalidArgument, "bad request target"});
    co_return false;
  }
  auto parsed = Query::Parse(query);
  if (!parsed) {
    keep_alive_ = false;
    co_await SendError(parsed.error());
    co_return false;
  }
  path_ = std::move(*decoded);
  query_ = std::move(*parsed);
  co_return true;
}

std::string_view Exchange::header(bhttp::field field) const {
  auto it = request().find(field);
  return it == request().end() ? std::string_view() : std::string_view(it->value());
}

std::string_view Exchange::header(std::string_view name) const {
  auto it = request().find(name);
  return it == request().end() ? std::string_view() : std::string_view(it->value());
}

std::string_view Exchange::param(std::string_view name) const {
  auto it = params_.find(name);
  return it == params_.end() ? std::string_view() : std::string_view(it->second);
}

Task<Status> Exchange::ReadBodyChunks(const ChunkSink& sink, size_t chunk) {
  co_return co_await ReadBodyChunksUntil(sink, chunk, std::nullopt);
}

Task<Status> Exchange::ReadBodyChunksUntil(
    const ChunkSink& sink, size_t chunk,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (body_started_ && !body_done_) co_return Fail(ErrorCode::kInternal, "body read twice");
  body_started_ = true;
  if (body_done_) co_return Status{};
  if (beast::iequals(header(bhttp::field::expect), "100-continue")) {
    bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, request().version()};
    stream_.expires_after(options_.io_timeout);
    auto [ec, n] = co_await bhttp::async_write(stream_, cont, kTuple);
    if (ec) {
      keep_alive_ = false;
      co_return Fail(IoError(ec, "write 100-continue"));
    }
  }
  std::vector<char> buf(chunk);
  // Beast reads at most the flat buffer's free capacity per syscall (512 bytes after a small
  // header): room for 64 KiB reads (Beast's own cap) cuts syscalls on large bodies ~100x.
  buffer_.reserve(buffer_.size() + 64 * 1024);
  while (!parser_.is_done()) {
    parser_.get().body().data = buf.data();
    parser_.get().body().size = buf.size();
    // A total deadline: Beast closes the socket when it passes, so no answer can follow.
    if (deadline) {
      stream_.expires_at(*deadline);
    } else {
      stream_.expires_after(options_.io_timeout);
    }
    auto [ec, n] = co_await bhttp::async_read(stream_, buffer_, parser_, kTuple);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) {
      keep_alive_ = false;
      if (ec == bhttp::error::partial_message || ec == asio::error::eof) {
        co_return Fail(ErrorCode::kInvalidArgument, "request body ended early");
      }
      if (ec.category() == bhttp::make_error_code(bhttp::error::bad_chunk).category()) {
        co_return Fail(ErrorCode::kInvalidArgument, "malformed request body: " + ec.message());
      }
      if (deadline && ec == beast::error::timeout) {
        co_return Fail(ErrorCode::kDeadlineExceeded, "the request body did not arrive in time");
      }
      co_return Fail(IoError(ec, "read request body"));
    }
    size_t got = buf.size() - parser_.get().body().size;
    if (got > 0) {
      auto status = co_await sink(std::string_view(buf.data(), got));
      if (!status) {
        keep_alive_ = false;
        co_return status;
      }
    }
  }
  body_done_ = true;
  co_return Status{};
}

Task<Result<std::string>> Exchange::ReadBody(size_t limit) {
  co_return co_await ReadBody(limit, options_.body_timeout);
}

Task<Result<std::string>> Exchange::ReadBody(size_t limit, std::chrono::seconds total) {
  if (auto len = parser_.content_length(); len && *len > limit) {
    keep_alive_ = false;
    co_return Fail(ErrorCode::kTooLarge,
                   fmt::format("request body of {} bytes is over the limit of {}", *len, limit));
  }
  std::string body;
  // Named, not a temporary inside co_await: g++ 12 may destroy such temporaries twice.
  ChunkSink sink = [&](std::string_view data) -> Task<Status> {
    if (body.size() + data.size() > limit) {
      co_return Fail(ErrorCode::kTooLarge,
                     fmt::format("request body is over the limit of {} bytes", limit));
    }
    body.append(data);
    co_return Status{};
  };
  auto deadline = std::chrono::steady_clock::now() + total;
  auto status = co_await ReadBodyChunksUntil(sink, 64 * 1024, deadline);
  if (!status) co_return Fail(status.error());
  co_return body;
}

Task<Result<nlohmann::json>> Exchange::ReadJson() { co_return co_await ReadJson(options_.max_json_bytes); }

Task<Result<nlohmann::json>> Exchange::ReadJson(size_t limit) {
  auto body = co_await ReadBody(limit);
  if (!body) co_return Fail(body.error());
  if (body->empty()) co_return nlohmann::json::object();
  auto parsed = ParseJson(*body);
  if (!parsed) {
    co_return Fail(ErrorCode::kInvalidArgument, "request body: " + parsed.error().message);
  }
  co_return std::move(*parsed);
}

Task<Status> Exchange::Send(bhttp::response<bhttp::string_body> response) {
  if (responded_) co_return Fail(ErrorCode::kInternal, "responded twice");
  responded_ = true;
  if (parser_.is_done()) body_done_ = true;
  response.version(request().version());
  response.keep_alive(keep_alive_ && body_done_ && request().keep_alive());
  if (!response.has_content_length() && !response.chunked()) response.prepare_payload();
  stream_.expires_after(options_.io_timeout);
  auto [ec, n] = co_await bhttp::async_write(stream_, response, kTuple);
  if (ec) {
    keep_alive_ = false;
    co_return Fail(IoError(ec, "write response"));
  }
  if (!response.keep_alive()) keep_alive_ = false;
  co_return Status{};
}

Task<Status> Exchange::SendJson(bhttp::status status, const nlohmann::json& body) {
  co_return co_await SendJson(status, body, {});
}

Task<Status> Exchange::SendJson(bhttp::status status, const nlohmann::json& body,
                                const std::vector<std::pair<std::string, std::string>>& headers) {
  bhttp::response<bhttp::string_body> res{status, request().version()};
  for (const auto& [k, v] : headers) res.set(k, v);
  res.set(bhttp::field::content_type, "application/json");
  res.body() = DumpJson(body);
  res.body().push_back('\n');
  co_return co_await Send(std::move(res));
}

Task<Status> Exchange::SendError(const Error& error) {
  if (responded_) {
    // Mid-stream: the only honest signal left is to drop the connection.
    keep_alive_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(asio::socket_base::shutdown_both, ignored);
    co_return Fail(error);
  }
  auto response = ErrorResponse(error, request().version());
  co_return co_await Send(std::move(response));
}

Task<Status> Exchange::BeginChunked(bhttp::status status, std::string_view content_type,
                                    const std::vector<std::pair<std::string, std::string>>& headers) {
  if (responded_) co_return Fail(ErrorCode::kInternal, "responded twice");
  responded_ = true;
  if (parser_.is_done()) body_done_ = true;
  bhttp::response<bhttp::empty_body> res{status, request().version()};
  if (!content_type.empty()) res.set(bhttp::field::content_type, content_type);
  for (const auto& [k, v] : headers) res.insert(k, v);
  res.keep_alive(keep_alive_ && body_done_ && request().keep_alive());
  if (!res.keep_alive()) keep_alive_ = false;
  res.chunked(true);
  bhttp::response_serializer<bhttp::empty_body> sr{res};
  stream_.expires_after(options_.io_timeout);
  auto [ec, n] = co_await bhttp::async_write_header(stream_, sr, kTuple);
  if (ec) {
    keep_alive_ = false;
    co_return Fail(IoError(ec, "write response header"));
  }
  co_return Status{};
}

Task<Status> Exchange::WriteChunk(std::string_view data) {
  if (data.empty()) co_return Status{};  // an empty chunk would end the body
  stream_.expires_after(options_.io_timeout);
  // The chunk (it holds a shared_ptr) is a named local: see ReadBody.
  auto chunk = bhttp::make_chunk(asio::const_buffer(data.data(), data.size()));
  auto [ec, n] = co_await asio::async_write(stream_, chunk, kTuple);
  if (ec) {
    keep_alive_ = false;
    co_return Fail(IoError(ec, "write response chunk"));
  }
  co_return Status{};
}

Task<Status> Exchange::EndChunked() {
  stream_.expires_after(options_.io_timeout);
  auto last = bhttp::make_chunk_last();
  auto [ec, n] = co_await asio::async_write(stream_, last, kTuple);
  if (ec) {
    keep_alive_ = false;
    co_return Fail(IoError(ec, "write last chunk"));
  }
  co_return Status{};
}

Task<Status> Exchange::BeginFixed(bhttp::status status, std::string_view content_type,
                                  uint64_t length,
                                  const std::vector<std::pair<std::string, std::string>>& headers) {
  if (responded_) co_return Fail(ErrorCode::kInternal, "responded twice");
  responded_ = true;
  if (parser_.is_done()) body_done_ = true;
  bhttp::response<bhttp::empty_body> res{status, request().version()};
  if (!content_type.empty()) res.set(bhttp::field::content_type, content_type);
  for (const auto& [k, v] : headers) res.insert(k, v);
  res.keep_alive(keep_alive_ && body_done_ && request().keep_alive());
  if (!res.keep_alive()) keep_alive_ = false;
  res.content_length(length);
  bhttp::response_serializer<bhttp::empty_body> sr{res};
  stream_.expires_after(options_.io_timeout);
  auto [ec, n] = co_await bhttp::async_write_header(stream_, sr, kTuple);
  if (ec) {
    keep_alive_ = false;
    co_return Fail(IoError(ec, "write response header"));
  }
  co_return Status{};
}

Task<Status> Exchange::WriteRaw(std::string_view data) {
  stream_.expires_after(options_.io_timeout);
  auto [ec, n] =
      co_await asio::async_write(stream_, asio::const_buffer(data.data(), data.size()), kTuple);
  if (ec) {
    keep_alive_ = false;
    co_return Fail(IoError(ec, "write response body"));
  }
  co_return Status{};
}

bool Exchange::IsWebSocketUpgrade() const { return websocket::is_upgrade(request()); }

Task<Result<std::unique_ptr<WebSocket>>> Exchange::AcceptWebSocket() {
  if (responded_) co_return Fail(ErrorCode::kInternal, "responded twice");
  if (!IsWebSocketUpgrade()) {
    co_return Fail(ErrorCode::kInvalidArgument, "this endpoint needs a WebSocket upgrade");
  }
  responded_ = true;
  taken_ = true;
  keep_alive_ = false;
  stream_.expires_never();
  auto ws = std::make_unique<WebSocket>(std::move(stream_));
  ws->set_option(websocket::stream_base::timeout{
      options_.io_timeout, std::chrono::seconds(30), /*keep_alive_pings=*/true});
  ws->read_message_max(4 << 20);
  auto [ec] = co_await ws->async_accept(request(), kTuple);
  if (ec) co_return Fail(IoError(ec, "websocket handshake"));
  co_return ws;
}

std::string Exchange::TakeOver() {
  responded_ = true;
  taken_ = true;
  keep_alive_ = false;
  body_done_ = true;
  stream_.expires_never();
  auto data = buffer_.data();
  std::string rest(static_cast<const char*>(data.data()), data.size());
  buffer_.consume(buffer_.size());
  return rest;
}

// ---------------------------------------------------------------------------------------------
// Server

struct Server::Listener {
  explicit Listener(asio::io_context& io) : acceptor(io) {}
  asio::basic_socket_acceptor<asio::generic::stream_protocol> acceptor;
  Endpoint endpoint;
};

struct Server::Connection {
  explicit Connection(asio::generic::stream_protocol::socket socket)
      : stream(std::move(socket)), fd(dup(stream.socket().native_handle())) {}
  ~Connection() {
    if (fd >= 0) close(fd);
  }
  Stream stream;
  // A duplicate of the socket, kept so that Stop() can shut the connection down even after a
  // handler has taken the stream over (a WebSocket). shutdown() acts on the socket, not the fd.
  int fd;
  Endpoint listener;
  std::string source;  // PeerAddress() or the adopter's; empty: not counted per source
  bool secure = false;  // adopted from the TLS front

  // Guarded by Server::mutex_.
  bool counted = false;   // in counted_, per_source_ (and per_key_ when admitted)
  std::string key;        // the key it was admitted with; empty: never admitted
  bool waiting = false;   // waiting for a request head (between requests, or the first)
  std::chrono::steady_clock::time_point waiting_since;
};

Server::Server(asio::io_context& io, ServerOptions options, Handler handler)
    : io_(io), options_(std::move(options)), handler_(std::move(handler)) {}

Server::~Server() { Stop(); }

Result<Endpoint> Server::Listen(const Endpoint& endpoint, unsigned unix_mode) {
  auto asio_ep = endpoint.ToAsio();
  if (!asio_ep) return Fail(asio_ep.error());
  auto listener = std::make_shared<Listener>(io_);
  boost::system::error_code ec;
  if (endpoint.kind == Endpoint::Kind::kUnix) ::unlink(endpoint.path.c_str());
  listener->acceptor.open(asio_ep->protocol(), ec);
  if (ec) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("listen {}: socket: {}", endpoint.ToString(), ec.message()));
  }
  if (endpoint.kind == Endpoint::Kind::kTcp) {
    listener->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  }
  listener->acceptor.bind(*asio_ep, ec);
  if (!ec) listener->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("listen {}: {}", endpoint.ToString(), ec.message()));
  }
  if (endpoint.kind == Endpoint::Kind::kUnix) ::chmod(endpoint.path.c_str(), unix_mode);
  auto bound = LocalEndpoint(listener->acceptor.native_handle(), endpoint.kind);
  if (!bound) return Fail(bound.error());
  if (endpoint.kind == Endpoint::Kind::kUnix) bound->path = endpoint.path;
  listener->endpoint = *bound;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return Fail(ErrorCode::kFailedPrecondition, "server stopped");
    listeners_.push_back(listener);
  }
  asio::co_spawn(io_, AcceptLoop(listener), asio::detached);
  return *bound;
}

void Server::Stop() {
  std::vector<std::shared_ptr<Listener>> listeners;
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    listeners.swap(listeners_);
    for (const auto& weak : connections_) {
      if (auto c = weak.lock()) connections.push_back(std::move(c));
    }
    connections_.clear();
  }
  for (auto& l : listeners) {
    asio::post(l->acceptor.get_executor(), [l] {
      boost::system::error_code ignored;
      l->acceptor.close(ignored);
      if (l->endpoint.kind == Endpoint::Kind::kUnix) ::unlink(l->endpoint.path.c_str());
    });
  }
  for (auto& c : connections) {
    if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
  }
}

Task<void> Server::AcceptLoop(std::shared_ptr<Listener> listener) {
  for (;;) {
    auto [ec, socket] =
        co_await listener->acceptor.async_accept(asio::make_strand(io_), kTuple);
    if (ec == asio::error::operation_aborted || !listener->acceptor.is_open()) co_return;
    if (ec) {
      // EMFILE and friends: log, back off a little, keep serving the connections we have.
      spdlog::warn("accept on {}: {}", listener->endpoint.ToString(), ec.message());
      asio::steady_timer timer(io_, std::chrono::milliseconds(100));
      co_await timer.async_wait(kTuple);
      continue;
    }
    auto connection = std::make_shared<Connection>(std::move(socket));
    connection->listener = listener->endpoint;
    connection->source = PeerAddress(connection->stream.socket().native_handle());
    if (listener->endpoint.kind == Endpoint::Kind::kTcp) {
      // Responses often go out as a header write then body writes (chunked streams, proxied
      // bodies): with Nagle on, each small write after the first waits for the peer's delayed
      // ACK, 40 ms a time.
      int one = 1;
      setsockopt(connection->stream.socket().native_handle(), IPPROTO_TCP, TCP_NODELAY, &one,
                 sizeof(one));
    }
    if (!Begin(std::move(connection))) co_return;
  }
}

bool Server::Begin(std::shared_ptr<Connection> connection) {
  std::optional<std::string> refusal;
  std::shared_ptr<Connection> shed;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return false;
    refusal = AdmitNewLocked(connection, shed);
    if (!refusal) connections_.insert(connection);
  }
  // The shed connection's coroutine sees its read fail and ends; shutdown() on the duplicate
  // is safe from this thread (see Stop).
  if (shed && shed->fd >= 0) ::shutdown(shed->fd, SHUT_RDWR);
  if (refusal) {
    // Written without waiting: a client that does not read its refusal loses it.
    boost::system::error_code ignored;
    auto& refused = connection->stream.socket();
    refused.non_blocking(true, ignored);
    refused.write_some(asio::buffer(*refusal), ignored);
    refused.shutdown(asio::socket_base::shutdown_both, ignored);
    refused.close(ignored);
    return true;
  }
  open_connections_.fetch_add(1);
  auto executor = connection->stream.get_executor();
  asio::co_spawn(executor, Serve(std::move(connection)), asio::detached);
  return true;
}

Status Server::Adopt(UniqueFd inner, const Endpoint& listener, std::string peer_address,
                     bool secure) {
  auto socket = net::AdoptSocket(asio::make_strand(io_), std::move(inner));
  if (!socket) return Fail(socket.error());
  auto connection = std::make_shared<Connection>(std::move(*socket));
  connection->listener = listener;
  connection->source = std::move(peer_address);
  connection->secure = secure;
  if (!Begin(std::move(connection))) {
    return Fail(ErrorCode::kFailedPrecondition, "the server is stopped");
  }
  return Status{};
}

std::optional<std::string> Server::AdmitNewLocked(const std::shared_ptr<Connection>& c,
                                                  std::shared_ptr<Connection>& shed) {
  if (options_.max_connections_per_source > 0 && !c->source.empty()) {
    auto it = per_source_.find(c->source);
    if (it != per_source_.end() && it->second >= options_.max_connections_per_source) {
      return RefusalBytes(
          429, "Too Many Requests", "too_many_connections",
          fmt::format("{} has {} open connections: the per-source limit of {} connections is "
                      "reached",
                      c->source, it->second, options_.max_connections_per_source),
          options_.connection_retry_after);
    }
  }
  if (counted_ >= options_.max_connections) {
    std::shared_ptr<Connection> victim;
    if (options_.shed_unadmitted) {
      // Oldest wait first: of the connections that never authenticated, the one that has
      // held its slot longest without sending a request (silent, slowloris, idle keep-alive).
      for (const auto& weak : connections_) {
        auto other = weak.lock();
        if (!other || !other->counted || !other->key.empty() || !other->waiting) continue;
        if (!victim || other->waiting_since < victim->waiting_since) victim = std::move(other);
      }
    }
    if (!victim) {
      return RefusalBytes(503, "Service Unavailable", "resource_exhausted",
                          fmt::format("too many open connections (the limit is {})",
                                      options_.max_connections),
                          options_.connection_retry_after);
    }
    UncountLocked(*victim);
    shed = std::move(victim);
  }
  c->counted = true;
  ++counted_;
  if (!c->source.empty()) ++per_source_[c->source];
  c->waiting = true;
  c->waiting_since = std::chrono::steady_clock::now();
  return std::nullopt;
}

void Server::UncountLocked(Connection& c) {
  if (!c.counted) return;
  c.counted = false;
  --counted_;
  if (!c.source.empty()) Decrement(per_source_, c.source);
  if (!c.key.empty()) Decrement(per_key_, c.key);
}

Status Server::AdmitKey(Connection& c, std::string_view key) {
  std::lock_guard lock(mutex_);
  if (!c.counted) {
    // Shed (or the server stopped) while its request ran: the connection is going away.
    return Fail(ErrorCode::kUnavailable, "the connection is closing");
  }
  if (c.key == key) return Status{};
  if (options_.max_connections_per_key > 0) {
    auto it = per_key_.find(key);
    if (it != per_key_.end() && it->second >= options_.max_connections_per_key) {
      return Fail(ErrorCode::kResourceExhausted,
                  fmt::format("this key has {} open connections: the per-key limit of {} "
                              "connections is reached; close one or retry later",
                              it->second, options_.max_connections_per_key));
    }
  }
  if (!c.key.empty()) Decrement(per_key_, c.key);
  c.key = std::string(key);
  ++per_key_[c.key];
  return Status{};
}

void Server::SetWaiting(Connection& c, bool waiting) {
  std::lock_guard lock(mutex_);
  c.waiting = waiting;
  if (waiting) c.waiting_since = std::chrono::steady_clock::now();
}

Task<void> Server::Serve(std::shared_ptr<Connection> c) {
  beast::flat_buffer buffer;
  bool first = true;
  // The connection ends with the client perhaps still sending (a body refused unread).
  bool linger = false;
  // Named, built once: see docs/architecture.md on temporaries and co_await.
  Exchange::AdmitFn admit = [this, raw = c.get()](std::string_view key) {
    return AdmitKey(*raw, key);
  };
  for (;;) {
    bhttp::request_parser<bhttp::buffer_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    parser.body_limit(boost::none);  // bodies are streamed; handlers apply their own limits
    bool admitted = false;
    {
      std::lock_guard lock(mutex_);
      admitted = !c->key.empty();
    }
    std::chrono::seconds head_timeout = first ? options_.header_timeout : options_.idle_timeout;
    if (!admitted && options_.unadmitted_header_timeout) {
      head_timeout = *options_.unadmitted_header_timeout;
    }
    // One timer for the whole head, not per read: a byte a second does not keep it alive.
    c->stream.expires_after(head_timeout);
    if (!first) SetWaiting(*c, true);  // AdmitNewLocked marked the first wait
    first = false;
    auto [ec, n] = co_await bhttp::async_read_header(c->stream, buffer, parser, kTuple);
    SetWaiting(*c, false);
    if (ec) {
      std::optional<Error> error;
      if (ec == bhttp::error::header_limit) {
        error = Error{ErrorCode::kTooLarge, "request header too large"};
      } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
                 ec != bhttp::error::end_of_stream) {
        error = Error{ErrorCode::kInvalidArgument, "malformed HTTP request: " + ec.message()};
      }
      if (error) {
        auto res = ErrorResponse(*error, 11);
        res.keep_alive(false);
        c->stream.expires_after(std::chrono::seconds(5));
        co_await bhttp::async_write(c->stream, res, kTuple);
        linger = true;
      }
      break;
    }
    Exchange exchange(c->stream, buffer, parser, options_, c->listener, c->source, c->secure,
                      admit);
    if (!co_await exchange.Prepare()) break;
    std::optional<std::string> failure;
    try {
      co_await handler_(exchange);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    linger = !exchange.body_done();
    if (failure) {
      spdlog::error("handler for {} {} threw: {}", std::string(bhttp::to_string(exchange.method())),
                    exchange.path(), *failure);
      if (!exchange.responded()) {
        co_await exchange.SendError({ErrorCode::kInternal, "internal error"});
      }
      break;
    }
    if (!exchange.responded()) {
      co_await exchange.SendError({ErrorCode::kInternal, "handler sent no response"});
    }
    if (!exchange.keep_alive()) break;
  }
  // A handler that took the stream over (WebSocket) left a closed, moved-from socket here.
  if (c->stream.socket().is_open()) {
    boost::system::error_code ignored;
    c->stream.socket().shutdown(asio::socket_base::shutdown_send, ignored);
    if (linger) {
      // A lingering close (RFC 9112, 9.6): closing with the client's bytes unread resets the
      // connection, and the reset drops what of the answer the kernel has not sent yet (a
      // 401 or 413 for a body never read, the tail of a large answer). Drain what the client
      // still sends, bounded in bytes and in time, so the answer gets there.
      constexpr size_t kLingerBytes = 1u << 20;
      std::vector<char> scratch(16 * 1024);
      size_t drained = 0;
      c->stream.expires_after(kLingerTime);
      while (drained < kLingerBytes) {
        auto [rec, got] = co_await c->stream.async_read_some(asio::buffer(scratch), kTuple);
        if (rec) break;
        drained += got;
      }
    }
    if (c->stream.socket().is_open()) c->stream.close();
  }
  open_connections_.fetch_sub(1);
  std::lock_guard lock(mutex_);
  UncountLocked(*c);
  connections_.erase(c);
}

}  // namespace berth::http
