// TLS in front of an http::Server, from a configured certificate and key (berthd's preview
// listener, issue 13: previews on https without a proxy of the operator's). The server stays
// socket-based (its pumps hand raw descriptors to splice(2)), so TLS ends here, before it:
// TlsFront accepts TCP, completes the TLS handshake, and hands the server one end of a
// socketpair(AF_UNIX) through Server::Adopt, naming the client's own address (so the per-source
// cap, X-Forwarded-For and logs see the client, not the pair) and marking it secure
// (Exchange::secure()). It then pumps bytes between the TLS stream and the pair's other end
// until both directions end. Whatever the server does on its end (keep-alive, a WebSocket,
// net::Pump after an upgrade) is bytes here.
//
// Contracts:
//  - threads: each connection is one coroutine on a strand of its own (the io_context may run
//    on any number of threads); Create, Listen, Stop and the destructor: any thread.
//  - deadlines: from accept to a finished handshake, one total deadline (handshake_timeout,
//    10 s), however the bytes trickle in; a client that does not finish in time is closed and
//    never reaches the server, which counts and caps connections from the adoption on. At
//    most max_handshakes handshakes run at once, max_handshakes_per_source from one address;
//    a connection over either is closed at accept. After the handshake no read has a deadline
//    here: the server's timeouts (header, idle, body) govern, and its closing the pair closes
//    the TLS connection. A write to the client that makes no progress for write_timeout ends
//    the connection (a client that stopped reading cannot hold it).
//  - backpressure: per direction one buffer (chunk bytes) and at most one write in flight; a
//    slow reader on either side stalls the reads of the other.
//  - half-close: the client's close_notify, or its TCP FIN without one (browsers do that), is
//    passed on as shutdown(SHUT_WR) on the pair; the server's answer keeps flowing. The
//    server's end of the pair closing (EOF, or a reset once its last bytes are read) ends the
//    connection gracefully: what the server sent is delivered, close_notify follows, the
//    client has linger_timeout to answer with its own (what it sends meanwhile is dropped, as
//    the server's own lingering close drops it), then TCP is closed. Client bytes the server
//    no longer reads (its end closed) are dropped too.
//  - errors: a failure on the client's side (a reset, a TLS alert, a write stall) shuts both
//    sides down, so the server sees its connection end.
//  - certificates: loaded by Create (an error names the file at fault: a certificate that
//    does not load, a key that does not load or does not match it); re-read when either file
//    changes (its inode, size or mtime), checked at most every reload_every, by the next new
//    connection, so a renewal needs no restart. A pair that does not load keeps the current
//    one and is logged. The files are small local reads, on the I/O thread that checks.
//  - protocol: TLS 1.2 and 1.3 with OpenSSL's default ciphers, ALPN http/1.1 only (a client
//    that offers no http/1.1 gets no ALPN answer), no renegotiation, no session resumption
//    (no tickets, no cache), no compression; no client certificates.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/http/server.h"

namespace berth::http {

struct TlsFrontState;  // tls_front.cc

struct TlsFrontOptions {
  // PEM: the certificate (a wildcard one, for previews), then its chain.
  std::filesystem::path cert_file;
  // PEM: its private key, unencrypted (berthd prompts for no password).
  std::filesystem::path key_file;
  // From accept to a finished handshake, in total. 10 s fits a slow mobile link's round
  // trips and bounds what a silent socket costs.
  std::chrono::milliseconds handshake_timeout{10'000};
  // Handshakes in progress at once, and from one address: a flood of sockets that never
  // finish costs at most this many SSL objects for handshake_timeout each.
  size_t max_handshakes = 256;
  size_t max_handshakes_per_source = 32;
  // A write to the client that makes no progress for this ends the connection; the server's
  // own io_timeout on its writes, which the pair's buffers would otherwise hide.
  std::chrono::milliseconds write_timeout{60'000};
  // After close_notify, how long the client has to answer before TCP is closed.
  std::chrono::milliseconds linger_timeout{2'000};
  // How often, at most, the files are looked at for a renewal: a stat of two files per
  // minute costs nothing; 0 looks at every new connection (tests).
  std::chrono::milliseconds reload_every{60'000};
  // One read's worth per direction: the most plaintext one TLS record carries.
  size_t chunk = 16 * 1024;
};

class TlsFront {
 public:
  // Loads the certificate and key (see the file comment); invalid_argument naming the file
  // when they do not load or match. `server` must outlive the front and be stopped after it.
  static Result<std::unique_ptr<TlsFront>> Create(boost::asio::io_context& io, Server& server,
                                                 TlsFrontOptions options);
  ~TlsFront();
  TlsFront(const TlsFront&) = delete;
  TlsFront& operator=(const TlsFront&) = delete;

  // Binds a TCP endpoint and starts accepting; the bound endpoint (the real port for port 0),
  // also what the adopted connections' Exchange::listener() says. Any thread.
  Result<Endpoint> Listen(const Endpoint& endpoint);
  // Stops accepting and shuts every connection down (handshaking or pumping). Any thread;
  // idempotent.
  void Stop();

 private:
  explicit TlsFront(std::shared_ptr<TlsFrontState> state);
  // Shared with every connection's coroutine, which may outlive this object until the
  // io_context destroys it.
  std::shared_ptr<TlsFrontState> state_;
};

}  // namespace berth::http
