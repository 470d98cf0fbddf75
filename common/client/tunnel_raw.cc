// Raw tunnels (GET /v1/tunnel with `Upgrade: berth-tcp`): the client's side of the upgrade. Both
// ends pump the upgraded connection with net::Pump. See tunnel.h.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/client/tunnel.h"
#include "common/protocol/ports.h"

namespace berth::tunnel {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

// Largest response header accepted from the server (it is ~100 bytes for a 101).
constexpr size_t kMaxHead = 64 * 1024;
// Largest error body read (JSON errors are small).
constexpr size_t kMaxErrorBody = 64 * 1024;

// --- the client's handshake ------------------------------------------------------------------

// Waits until `fd` is ready for `events` or `deadline` passes.
Status WaitReady(int fd, short events, Clock::time_point deadline, std::string_view what) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return Fail(ErrorCode::kDeadlineExceeded, fmt::format("{}: timed out", what));
    }
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    if (r > 0) return {};
    if (r < 0 && errno != EINTR) return Fail(ErrnoError(errno, std::string(what)));
  }
}

Result<UniqueFd> Dial(const Endpoint& endpoint, std::chrono::milliseconds timeout) {
  auto ep = endpoint.ToAsio();
  if (!ep) return Fail(ep.error());
  std::string what = fmt::format("connect {}", endpoint.ToString());
  UniqueFd fd(socket(ep->protocol().family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                     ep->protocol().protocol()));
  if (!fd) return Fail(ErrnoError(errno, what));
  if (connect(fd.get(), ep->data(), static_cast<socklen_t>(ep->size())) != 0) {
    if (errno != EINPROGRESS) {
      return Fail(ErrorCode::kUnavailable, fmt::format("{}: {}", what, std::strerror(errno)));
    }
    auto ready = WaitReady(fd.get(), POLLOUT, Clock::now() + timeout, what);
    if (!ready) return Fail(ready.error());
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      return Fail(ErrorCode::kUnavailable, fmt::format("{}: {}", what, std::strerror(err)));
    }
  }
  if (endpoint.kind == Endpoint::Kind::kTcp) {
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

Status SendAll(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {
      auto ready = WaitReady(fd, POLLOUT, deadline, "send tunnel request");
      if (!ready) return ready;
    } else if (n < 0 && errno != EINTR) {
      return Fail(ErrorCode::kUnavailable,
                  fmt::format("send tunnel request: {}", std::strerror(errno)));
    }
  }
  return {};
}

// Reads the response header and nothing after it: the bytes behind it belong to the tunnel
// (a guest service that speaks first, like sshd, may have sent them already). It peeks, takes
// what cannot hold the end of the header, and takes exactly up to "\r\n\r\n" once it is there.
Result<std::string> ReadHead(int fd, std::chrono::milliseconds step_timeout) {
  std::string head;
  std::vector<char> buf(kMaxHead);
  for (;;) {
    auto ready = WaitReady(fd, POLLIN, Clock::now() + step_timeout, "read tunnel response");
    if (!ready) return Fail(ready.error());
    ssize_t n = recv(fd, buf.data(), buf.size(), MSG_PEEK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      return Fail(ErrorCode::kUnavailable,
                  fmt::format("read tunnel response: {}", std::strerror(errno)));
    }
    if (n == 0) return Fail(ErrorCode::kUnavailable, "read tunnel response: connection closed");
    size_t before = head.size();
    head.append(buf.data(), static_cast<size_t>(n));
    size_t end = head.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
    size_t take = end == std::string::npos ? static_cast<size_t>(n) : end + 4 - before;
    head.resize(before + take);
    // Exactly `take` bytes are queued (they were just peeked), so this does not block.
    for (size_t got = 0; got < take;) {
      ssize_t r = recv(fd, buf.data() + got, take - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return Fail(ErrorCode::kUnavailable, "read tunnel response: connection lost");
      got += static_cast<size_t>(r);
    }
    if (end != std::string::npos) return head;
    if (head.size() > kMaxHead) {
      return Fail(ErrorCode::kUnavailable, "read tunnel response: header too large");
    }
  }
}

// The body of a non-101 answer (an error), read to its end.
std::string ReadErrorBody(int fd, bhttp::response_parser<bhttp::string_body>& parser,
                          std::chrono::milliseconds step_timeout) {
  std::vector<char> buf(16 * 1024);
  std::string pending;
  beast::error_code ec;
  while (!parser.is_done()) {
    if (!WaitReady(fd, POLLIN, Clock::now() + step_timeout, "read error body")) break;
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      parser.put_eof(ec);
      break;
    }
    pending.append(buf.data(), static_cast<size_t>(n));
    size_t used = parser.put(asio::buffer(pending), ec);
    pending.erase(0, used);
    if (ec == bhttp::error::need_more) ec = {};
    if (ec) break;
  }
  return parser.get().body();
}

std::string HostHeader(const Endpoint& endpoint) {
  return endpoint.kind == Endpoint::Kind::kTcp ? fmt::format("{}:{}", endpoint.host, endpoint.port)
                                               : std::string("berth");
}

}  // namespace

Result<UniqueFd> OpenRawTunnel(client::ApiClient& client, std::string_view scope, uint16_t port,
                               std::string_view host) {
  auto valid = protocol::ParseTunnelPort(port);
  if (!valid) return Fail(valid.error());
  const auto& options = client.options();
  auto fd = Dial(client.endpoint(), options.connect_timeout);
  if (!fd) return Fail(fd.error());

  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, TunnelTarget(scope, port, host), 11};
  req.set(bhttp::field::host, HostHeader(client.endpoint()));
  req.set(bhttp::field::user_agent, "berth-client/" BERTH_VERSION);
  if (!client.token().empty()) req.set(bhttp::field::authorization, "Bearer " + client.token());
  req.set(bhttp::field::connection, "Upgrade");
  req.set(bhttp::field::upgrade, protocol::kRawTunnelProtocol);
  std::ostringstream text;
  text << req;
  auto sent = SendAll(fd->get(), text.str(), Clock::now() + options.io_timeout);
  if (!sent) return Fail(sent.error());

  auto head = ReadHead(fd->get(), options.io_timeout);
  if (!head) return Fail(head.error());
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(kMaxHead);
  parser.body_limit(kMaxErrorBody);
  beast::error_code ec;
  parser.put(asio::buffer(*head), ec);
  if (ec && ec != bhttp::error::need_more) {
    return Fail(ErrorCode::kUnavailable, "tunnel response: " + ec.message());
  }
  if (!parser.is_header_done()) return Fail(ErrorCode::kUnavailable, "tunnel response: bad header");
  const auto& res = parser.get();
  if (res.result() != bhttp::status::switching_protocols) {
    client::Response answer;
    answer.status = static_cast<int>(res.result_int());
    answer.body = ReadErrorBody(fd->get(), parser, options.io_timeout);
    if (answer.status >= 200 && answer.status < 300) {
      return Fail(ErrorCode::kUnavailable,
                  fmt::format("{} answered {} instead of switching to a raw tunnel",
                              client.endpoint().ToString(), answer.status));
    }
    return Fail(client::ApiClient::ErrorFrom(answer));
  }
  auto upgrade = res[bhttp::field::upgrade];
  std::string_view upgraded(upgrade.data(), upgrade.size());
  if (!protocol::HasToken(upgraded, protocol::kRawTunnelProtocol)) {
    return Fail(ErrorCode::kUnavailable, fmt::format("tunnel upgraded to '{}', not {}", upgraded,
                                                     protocol::kRawTunnelProtocol));
  }
  int flags = fcntl(fd->get(), F_GETFL);
  fcntl(fd->get(), F_SETFL, flags & ~O_NONBLOCK);
  return std::move(*fd);
}

}  // namespace berth::tunnel
