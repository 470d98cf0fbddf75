#include "common/http/tls_front.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "common/net/socket.h"
#include "common/unique.h"

namespace berth {

template <>
struct Deleter<SSL_CTX> {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
template <>
struct Deleter<EVP_PKEY> {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
template <>
struct Deleter<BIO> {
  void operator()(BIO* bio) const { BIO_free(bio); }
};

namespace http {
namespace {

namespace ssl = asio::ssl;
using TlsStream = ssl::stream<net::Socket>;
using Clock = std::chrono::steady_clock;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// The first error OpenSSL queued on this thread (the cause; later ones say where it surfaced),
// as text. The queue is left empty.
std::string OpenSslError() {
  unsigned long first = ERR_get_error();
  while (ERR_get_error() != 0) {
  }
  if (first == 0) return "unknown error";
  if (const char* reason = ERR_reason_error_string(first)) return reason;
  char text[256];
  ERR_error_string_n(first, text, sizeof(text));
  return text;
}

// ALPN: http/1.1 when the client offers it; otherwise no answer (the client decides).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void*) {
  static constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kHttp11, sizeof(kHttp11), in, in_len) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// An encrypted key fails to load instead of prompting on berthd's terminal.
int NoPassword(char*, int, int, void*) { return 0; }

Result<Unique<EVP_PKEY>> ReadKey(const std::filesystem::path& path) {
  Unique<BIO> file(BIO_new_file(path.c_str(), "r"));
  if (!file) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("the TLS key {} does not open: {}", path.string(), OpenSslError()));
  }
  Unique<EVP_PKEY> key(PEM_read_bio_PrivateKey(file.get(), nullptr, NoPassword, nullptr));
  if (!key) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("the TLS key {} is no unencrypted PEM private key: {}", path.string(),
                            OpenSslError()));
  }
  return key;
}

// A server context from the files (see the file comment for what it allows).
Result<std::shared_ptr<ssl::context>> LoadContext(const std::filesystem::path& cert,
                                                  const std::filesystem::path& key_file) {
  ERR_clear_error();
  Unique<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return Fail(ErrorCode::kInternal, "SSL_CTX_new: " + OpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION);
  // TLS 1.3 sends tickets unless told not to, SSL_OP_NO_TICKET or not (stateful ones then).
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  // An idle keep-alive or WebSocket connection holds no record buffers.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_default_passwd_cb(ctx.get(), NoPassword);
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectAlpn, nullptr);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) != 1) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("the TLS certificate {} does not load: {}", cert.string(), OpenSslError()));
  }
  auto key = ReadKey(key_file);
  if (!key) return Fail(key.error());
  // OpenSSL refuses a key whose public half is not the certificate's here already; the check
  // after it covers the rest.
  if (SSL_CTX_use_PrivateKey(ctx.get(), key->get()) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("the TLS key {} does not match the certificate {}: {}", key_file.string(),
                            cert.string(), OpenSslError()));
  }
  return std::make_shared<ssl::context>(ctx.release());
}

// What a file is now, to notice a renewal: rewritten in place (size, mtime) or replaced (inode;
// certbot's symlinks are followed).
struct FileStamp {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp StampOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return FileStamp{true, st.st_dev, st.st_ino, st.st_size,
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

void Decrement(std::map<std::string, size_t, std::less<>>& counts, const std::string& name) {
  auto it = counts.find(name);
  if (it == counts.end()) return;
  if (--it->second == 0) counts.erase(it);
}

// One connection as Stop and the watchdog reach it: a duplicate of its TCP socket, since
// shutdown(2) acts on the socket, and the duplicate stays valid whatever the connection's
// coroutine has closed. `armed`: the watchdog's current arming (0: none); on the strand.
struct Conn {
  UniqueFd fd;
  uint64_t armed = 0;
  bool fired = false;  // the watchdog shut it down
  void Shutdown() const {
    if (fd) ::shutdown(fd.get(), SHUT_RDWR);
  }
};

// Shuts a connection down when a deadline passes unless disarmed before: what bounds the
// handshake, each write to the client, and the closing linger. A shut-down socket fails every
// operation pending on it, so whatever waited ends. On the connection's strand.
class Watchdog {
 public:
  Watchdog(const asio::any_io_executor& executor, std::shared_ptr<Conn> conn)
      : timer_(executor), conn_(std::move(conn)) {}
  void ArmAt(Clock::time_point deadline) {
    uint64_t id = ++arms_;
    conn_->armed = id;
    timer_.expires_at(deadline);  // a wait pending before ends with operation_aborted
    // The handler holds the Conn, never this: it may run after the coroutine has ended.
    timer_.async_wait([conn = conn_, id](const boost::system::error_code& ec) {
      if (ec || conn->armed != id) return;
      conn->fired = true;
      conn->Shutdown();
    });
  }
  void Arm(Clock::duration after) { ArmAt(Clock::now() + after); }
  void Disarm() {
    conn_->armed = 0;
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  std::shared_ptr<Conn> conn_;
  uint64_t arms_ = 0;
};

// How the two directions of one connection stand; both run on its strand.
struct Pumping {
  bool server_done = false;     // the server's end closed: the connection is closing
  bool failed = false;          // torn down
  bool reading_client = false;  // a read from the client is pending
};

void TearDown(TlsStream& tls, net::Socket& inner, Pumping& p) {
  p.failed = true;
  net::ShutdownBoth(tls.next_layer(), inner);
}

// Client -> server. Ends at the client's close_notify or FIN (passed on as a half-close), when
// the server's end closed (its reads are over: what the client sends is dropped), or torn down.
Task<void> ClientToServer(TlsStream& tls, net::Socket& inner, Pumping& p, size_t chunk) {
  std::vector<char> buf(chunk);
  while (!p.server_done && !p.failed) {
    p.reading_client = true;
    auto [ec, n] = co_await tls.async_read_some(asio::buffer(buf), kTuple);
    p.reading_client = false;
    if (ec) {
      if (p.server_done || p.failed) co_return;  // cancelled by ServerToClient, or torn down
      if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
        net::HalfClose(inner);
        co_return;
      }
      TearDown(tls, inner, p);
      co_return;
    }
    auto [wec, wn] = co_await asio::async_write(inner, asio::buffer(buf.data(), n), kTuple);
    // The server closed its end (EPIPE): what it said last is still on its way out through
    // ServerToClient, which then closes the connection.
    if (wec) co_return;
  }
}

// Server -> client. Ends when the server's end closes (then the pending client read is
// cancelled: the connection is closing) or torn down.
Task<void> ServerToClient(TlsStream& tls, net::Socket& inner, Pumping& p, Watchdog& watchdog,
                          const TlsFrontOptions& options) {
  std::vector<char> buf(options.chunk);
  for (;;) {
    auto [ec, n] = co_await inner.async_read_some(asio::buffer(buf), kTuple);
    if (ec) {
      // A reset: the server closed with client bytes unread (its lingering close was cut
      // short, a refusal); everything it wrote before was read first.
      if (!p.failed && (ec == asio::error::eof || ec == asio::error::connection_reset)) {
        p.server_done = true;
        if (p.reading_client) {
          boost::system::error_code ignored;
          tls.next_layer().cancel(ignored);
        }
      } else {
        TearDown(tls, inner, p);
      }
      co_return;
    }
    watchdog.Arm(options.write_timeout);
    auto [wec, wn] = co_await asio::async_write(tls, asio::buffer(buf.data(), n), kTuple);
    watchdog.Disarm();
    if (wec) {
      TearDown(tls, inner, p);
      co_return;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct TlsFrontState {
  struct Listener {
    explicit Listener(asio::io_context& io) : acceptor(io) {}
    asio::basic_socket_acceptor<asio::generic::stream_protocol> acceptor;
    Endpoint endpoint;
  };

  TlsFrontState(asio::io_context& io, Server& server, TlsFrontOptions options)
      : io(io), server(server), options(std::move(options)) {}

  // The context new connections get, re-read first when the files changed (see the file
  // comment). Any thread.
  std::shared_ptr<ssl::context> Context();
  // Counts a handshake in, or false when one more would be over a cap (or stopped).
  bool TakeHandshake(const std::string& peer);
  void GiveBackHandshake(const std::string& peer);
  // Registers a connection for Stop; nullptr once stopped.
  std::shared_ptr<Conn> Track(int fd);
  void Untrack(const std::shared_ptr<Conn>& conn);

  asio::io_context& io;
  Server& server;
  const TlsFrontOptions options;

  std::mutex mutex;
  std::shared_ptr<ssl::context> context;
  FileStamp cert_stamp;
  FileStamp key_stamp;
  Clock::time_point checked;
  bool stopped = false;
  std::vector<std::shared_ptr<Listener>> listeners;
  std::set<std::weak_ptr<Conn>, std::owner_less<std::weak_ptr<Conn>>> connections;
  size_t handshakes = 0;
  std::map<std::string, size_t, std::less<>> handshakes_per_source;
};

std::shared_ptr<ssl::context> TlsFrontState::Context() {
  auto now = Clock::now();
  {
    std::lock_guard lock(mutex);
    if (now - checked < options.reload_every) return context;
    checked = now;
  }
  // Stamped before reading: a file that changes while it is read is read again next time.
  FileStamp cert = StampOf(options.cert_file);
  FileStamp key = StampOf(options.key_file);
  {
    std::lock_guard lock(mutex);
    if (cert == cert_stamp && key == key_stamp) return context;
  }
  auto loaded = LoadContext(options.cert_file, options.key_file);
  std::lock_guard lock(mutex);
  // A pair that failed is not tried again until one of its files changes.
  cert_stamp = cert;
  key_stamp = key;
  if (!loaded) {
    spdlog::error("TLS: {}; still serving the certificate read before", loaded.error().message);
    return context;
  }
  context = std::move(*loaded);
  spdlog::info("TLS: read the renewed certificate {} and key {}", options.cert_file.string(),
               options.key_file.string());
  return context;
}

bool TlsFrontState::TakeHandshake(const std::string& peer) {
  std::lock_guard lock(mutex);
  if (stopped || handshakes >= options.max_handshakes) return false;
  if (!peer.empty()) {
    auto it = handshakes_per_source.find(peer);
    if (it != handshakes_per_source.end() && it->second >= options.max_handshakes_per_source) {
      return false;
    }
    ++handshakes_per_source[peer];
  }
  ++handshakes;
  return true;
}

void TlsFrontState::GiveBackHandshake(const std::string& peer) {
  std::lock_guard lock(mutex);
  --handshakes;
  if (!peer.empty()) Decrement(handshakes_per_source, peer);
}

std::shared_ptr<Conn> TlsFrontState::Track(int fd) {
  auto conn = std::make_shared<Conn>();
  conn->fd.reset(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!conn->fd) return nullptr;
  std::lock_guard lock(mutex);
  if (stopped) return nullptr;
  connections.insert(conn);
  return conn;
}

void TlsFrontState::Untrack(const std::shared_ptr<Conn>& conn) {
  std::lock_guard lock(mutex);
  connections.erase(conn);
}

namespace {

using State = TlsFrontState;

// A handshake's place under the caps, given back when the handshake ends, or with the
// coroutine's frame (which may be destroyed by the io_context, after the front is gone: it
// holds the state, never the front).
class HandshakeSlot {
 public:
  HandshakeSlot(std::shared_ptr<State> state, std::string peer)
      : state_(std::move(state)), peer_(std::move(peer)) {}
  ~HandshakeSlot() { Release(); }
  HandshakeSlot(HandshakeSlot&&) noexcept = default;
  HandshakeSlot& operator=(HandshakeSlot&&) = delete;
  void Release() {
    if (state_) state_->GiveBackHandshake(peer_);
    state_.reset();
  }

 private:
  std::shared_ptr<State> state_;
  std::string peer_;
};

// Takes a connection off Stop's list when it ends (the same rule as HandshakeSlot's).
class Tracking {
 public:
  Tracking(std::shared_ptr<State> state, std::shared_ptr<Conn> conn)
      : state_(std::move(state)), conn_(std::move(conn)) {}
  ~Tracking() {
    if (conn_) state_->Untrack(conn_);
  }
  Tracking(const Tracking&) = delete;
  Tracking& operator=(const Tracking&) = delete;

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Conn> conn_;
};

void CloseAll(TlsStream& tls, net::Socket* inner) {
  boost::system::error_code ignored;
  tls.next_layer().shutdown(asio::socket_base::shutdown_both, ignored);
  tls.next_layer().close(ignored);
  if (inner != nullptr) {
    inner->shutdown(asio::socket_base::shutdown_both, ignored);
    inner->close(ignored);
  }
}

// One connection, on its strand: the handshake within the deadline, the adoption, the pumps,
// the close.
Task<void> Serve(std::shared_ptr<State> state, net::Socket socket, Endpoint listener,
                 std::string peer, HandshakeSlot slot, Clock::time_point accepted) {
  using namespace asio::experimental::awaitable_operators;
  auto conn = state->Track(socket.native_handle());
  if (!conn) co_return;  // stopped (or out of descriptors): the socket closes with the frame
  Tracking tracking(state, conn);
  auto context = state->Context();
  TlsStream tls(std::move(socket), *context);
  auto executor = co_await asio::this_coro::executor;
  Watchdog watchdog(executor, conn);
  const auto& options = state->options;

  watchdog.ArmAt(accepted + options.handshake_timeout);
  auto [hec] = co_await tls.async_handshake(ssl::stream_base::server, kTuple);
  watchdog.Disarm();
  slot.Release();
  if (hec) {
    // Scanners, plain HTTP on this port, clients that do not trust the certificate: common and
    // the client's business, so not worth more than a debug line.
    spdlog::debug("TLS handshake with {} on {}: {}", peer.empty() ? "?" : peer, listener.ToString(),
                  conn->fired ? "no handshake within the deadline" : hec.message());
    CloseAll(tls, nullptr);
    co_return;
  }

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    spdlog::warn("TLS connection from {}: socketpair: {}", peer, std::strerror(errno));
    CloseAll(tls, nullptr);
    co_return;
  }
  UniqueFd server_end(pair[0]);
  auto inner = net::AdoptSocket(executor, UniqueFd(pair[1]));
  if (!inner) {
    CloseAll(tls, nullptr);
    co_return;
  }
  if (auto adopted = state->server.Adopt(std::move(server_end), listener, peer, true); !adopted) {
    CloseAll(tls, &*inner);
    co_return;
  }
  Pumping p;
  co_await (ClientToServer(tls, *inner, p, options.chunk) &&
            ServerToClient(tls, *inner, p, watchdog, options));
  if (p.server_done && !p.failed) {
    // Everything the server said is out: close_notify, and a moment for the client's own.
    watchdog.Arm(options.linger_timeout);
    auto [sec] = co_await tls.async_shutdown(kTuple);
    watchdog.Disarm();
    (void)sec;  // a client that closed first or never answers: nothing left to tell it
  }
  CloseAll(tls, &*inner);
}

Task<void> AcceptLoop(std::shared_ptr<State> state, std::shared_ptr<TlsFrontState::Listener> listener) {
  for (;;) {
    auto strand = asio::make_strand(state->io);
    auto [ec, socket] = co_await listener->acceptor.async_accept(strand, kTuple);
    if (ec == asio::error::operation_aborted || !listener->acceptor.is_open()) co_return;
    if (ec) {
      // EMFILE and friends: log, back off a little, keep serving the connections we have.
      spdlog::warn("accept on {}: {}", listener->endpoint.ToString(), ec.message());
      asio::steady_timer timer(state->io, std::chrono::milliseconds(100));
      co_await timer.async_wait(kTuple);
      continue;
    }
    auto accepted = Clock::now();
    std::string peer = PeerAddress(socket.native_handle());
    if (!state->TakeHandshake(peer)) {
      spdlog::debug("TLS on {}: too many handshakes (from {}); closed", listener->endpoint.ToString(),
                    peer);
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    HandshakeSlot slot(state, peer);
    // As http::Server does for its TCP connections: no Nagle delay between an answer's parts.
    int one = 1;
    setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto executor = socket.get_executor();
    asio::co_spawn(executor,
                   Serve(state, std::move(socket), listener->endpoint, std::move(peer), std::move(slot),
                         accepted),
                   asio::detached);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<TlsFront>> TlsFront::Create(asio::io_context& io, Server& server,
                                                   TlsFrontOptions options) {
  auto state = std::make_shared<TlsFrontState>(io, server, std::move(options));
  state->cert_stamp = StampOf(state->options.cert_file);
  state->key_stamp = StampOf(state->options.key_file);
  auto context = LoadContext(state->options.cert_file, state->options.key_file);
  if (!context) return Fail(context.error());
  state->context = std::move(*context);
  state->checked = Clock::now();
  return std::unique_ptr<TlsFront>(new TlsFront(std::move(state)));
}

TlsFront::TlsFront(std::shared_ptr<TlsFrontState> state) : state_(std::move(state)) {}

TlsFront::~TlsFront() { Stop(); }

Result<Endpoint> TlsFront::Listen(const Endpoint& endpoint) {
  if (endpoint.kind != Endpoint::Kind::kTcp) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("listen {}: TLS is served on TCP only", endpoint.ToString()));
  }
  auto asio_ep = endpoint.ToAsio();
  if (!asio_ep) return Fail(asio_ep.error());
  auto listener = std::make_shared<TlsFrontState::Listener>(state_->io);
  boost::system::error_code ec;
  listener->acceptor.open(asio_ep->protocol(), ec);
  if (!ec) listener->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) listener->acceptor.bind(*asio_ep, ec);
  if (!ec) listener->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Fail(ErrorCode::kUnavailable, fmt::format("listen {}: {}", endpoint.ToString(), ec.message()));
  }
  auto bound = LocalEndpoint(listener->acceptor.native_handle(), endpoint.kind);
  if (!bound) return Fail(bound.error());
  listener->endpoint = *bound;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopped) return Fail(ErrorCode::kFailedPrecondition, "the TLS front is stopped");
    state_->listeners.push_back(listener);
  }
  asio::co_spawn(state_->io, AcceptLoop(state_, listener), asio::detached);
  return *bound;
}

void TlsFront::Stop() {
  std::vector<std::shared_ptr<TlsFrontState::Listener>> listeners;
  std::vector<std::shared_ptr<Conn>> connections;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopped) return;
    state_->stopped = true;
    listeners.swap(state_->listeners);
    for (const auto& weak : state_->connections) {
      if (auto c = weak.lock()) connections.push_back(std::move(c));
    }
    state_->connections.clear();
  }
  for (auto& l : listeners) {
    asio::post(l->acceptor.get_executor(), [l] {
      boost::system::error_code ignored;
      l->acceptor.close(ignored);
    });
  }
  for (auto& c : connections) c->Shutdown();
}

}  // namespace http
}  // namespace berth
