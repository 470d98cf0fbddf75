#include "controller/agent_client/agent_connector.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "common/json.h"
#include "common/random.h"

namespace berth::agent_client {

namespace beast = http::beast;
namespace bhttp = http::bhttp;
namespace {

namespace asio = http::asio;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

Error Unreachable(const boost::system::error_code& ec) {
  return Error(ErrorCode::kUnavailable,
               fmt::format("the workspace's agent cannot be reached: {}", ec.message()));
}

Error ClientGone() {
  return Error(ErrorCode::kUnavailable,
               "the client closed its connection; the request was cancelled");
}

// Whether an idle connection still looks open: no EOF, no error and no stray bytes from the
// agent queued on it. Catches the common case (the agent closed it a while ago) before a
// request is sent on it; the retry covers a close that races with the request.
bool LooksAlive(int fd) {
  char byte;
  ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// The failures a connection the agent closed while it was idle shows before it answers.
bool ClosedUnderUs(const boost::system::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::connection_aborted ||
         ec == asio::error::not_connected || ec == http::bhttp::error::end_of_stream;
}

}  // namespace

// --- AgentConnectionPool ----------------------------------------------------------------------

AgentConnectionPool::~AgentConnectionPool() {
  for (auto& [key, list] : idle_) {
    for (auto& i : list) ::close(i.fd);
  }
}

int AgentConnectionPool::Take(const std::string& key) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  auto it = idle_.find(key);
  if (it == idle_.end()) return -1;
  auto& list = it->second;
  while (!list.empty()) {
    Idle i = list.back();
    list.pop_back();
    if (now - i.since < kMaxIdle && LooksAlive(i.fd)) return i.fd;
    ::close(i.fd);
  }
  idle_.erase(it);
  return -1;
}

void AgentConnectionPool::Put(const std::string& key, int fd) {
  std::lock_guard lock(mutex_);
  auto& list = idle_[key];
  if (list.size() >= kMaxPerAgent) {
    ::close(list.front().fd);
    list.erase(list.begin());
  }
  list.push_back(Idle{fd, std::chrono::steady_clock::now()});
}

size_t AgentConnectionPool::IdleCountForTest(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = idle_.find(key);
  return it == idle_.end() ? 0 : it->second.size();
}

// --- AgentConnector ---------------------------------------------------------------------------

Upstream::Upstream(const asio::any_io_executor& executor) : stream(executor) { parser.emplace(); }

void Upstream::ResetParser(uint32_t header_limit, bool head) {
  parser.emplace();
  parser->header_limit(header_limit);
  parser->body_limit(boost::none);  // streamed; the relay bounds nothing but time
  if (head) parser->skip(true);
}

AgentConnector::AgentConnector(const AgentLink& link, const ProxyOptions& options,
                               AgentConnectionPool* pool, ConnectorTarget target)
    : link_(link), options_(options), target_(target), pool_(pool), pool_key_(PoolKey(link, target)) {}

std::string AgentConnector::PoolKey(const AgentLink& link, ConnectorTarget target) {
  std::string key = link.endpoint.ToString() + "#" + Sha256Hex(link.token);
  if (target.tunnel_port) key += fmt::format("#tunnel:{}", *target.tunnel_port);
  return key;
}

http::Task<Status> AgentConnector::OpenTunnel(uint16_t port) {
  // The agent connects to the guest port before it answers: a guest under TCG may take a
  // while, and its own connect has a 10 s deadline (guest-agent/port_routes.cc).
  constexpr std::chrono::seconds kTunnelAnswer{20};
  std::string request = fmt::format(
      "GET /v1/tunnel?port={} HTTP/1.1\r\nHost: berth-agent\r\nAuthorization: Bearer {}\r\n"
      "Connection: Upgrade\r\nUpgrade: berth-tcp\r\n\r\n",
      port, link_.token);
  up_->stream.expires_after(kTunnelAnswer);
  auto [wec, wn] = co_await asio::async_write(up_->stream, asio::buffer(request), kTuple);
  if (aborted_) co_return Fail(ClientGone());
  if (wec) co_return Fail(Unreachable(wec));
  // Its own parser: an error answer has a small JSON body, read whole; a 101 has none, and
  // what follows it in the buffer is the guest server's (nothing, before a request).
  bhttp::response_parser<bhttp::string_body> answer;
  answer.header_limit(8 * 1024);
  answer.body_limit(16 * 1024);
  auto [ec, n] = co_await bhttp::async_read_header(up_->stream, up_->buffer, answer, kTuple);
  if (aborted_) co_return Fail(ClientGone());
  if (ec) co_return Fail(Unreachable(ec));
  if (answer.get().result() == bhttp::status::switching_protocols) co_return Status{};
  auto [bec, bn] = co_await bhttp::async_read(up_->stream, up_->buffer, answer, kTuple);
  std::string message = fmt::format("the workspace refused a tunnel to port {} ({})", port,
                                    answer.get().result_int());
  if (!bec) {
    auto body = ParseJson(answer.get().body());
    if (body && body->is_object() && body->contains("error") && (*body)["error"].is_object()) {
      message = (*body)["error"].value("message", message);
    }
  }
  co_return Fail(ErrorCode::kUnavailable, message);
}

http::Task<Status> AgentConnector::Connect(bool allow_pooled) {
  if (aborted_) co_return Fail(ClientGone());
  auto asio_ep = link_.endpoint.ToAsio();
  if (!asio_ep) co_return Fail(asio_ep.error());
  auto executor = co_await asio::this_coro::executor;
  up_ = std::make_unique<Upstream>(executor);
  up_->ResetParser(options_.max_response_header, head_);
  int fd = allow_pooled && pool_ != nullptr ? pool_->Take(pool_key_) : -1;
  if (fd >= 0) {
    boost::system::error_code ec;
    up_->stream.socket().assign(asio_ep->protocol(), fd, ec);
    if (!ec) {
      up_->reused = true;
      co_return Status{};
    }
    ::close(fd);
  }
  up_->stream.expires_after(options_.connect_timeout);
  auto [ec] = co_await up_->stream.async_connect(*asio_ep, kTuple);
  if (aborted_) co_return Fail(ClientGone());
  if (ec) co_return Fail(Unreachable(ec));
  ++connects_;
  if (link_.endpoint.kind == Endpoint::Kind::kTcp) {
    // The header and the body go out as separate writes: no Nagle delay between them.
    int one = 1;
    setsockopt(up_->stream.socket().native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  if (target_.tunnel_port) co_return co_await OpenTunnel(*target_.tunnel_port);
  co_return Status{};
}

http::Task<Result<http::Stream>> AgentConnector::OpenRaw() {
  if (!target_.tunnel_port) co_return Fail(ErrorCode::kInternal, "a raw connection needs a tunnel port");
  auto connected = co_await Connect(false);
  if (!connected) co_return Fail(connected.error());
  // The guest's server speaks second (HTTP, a WebSocket handshake): nothing of it may have
  // been read past the agent's 101.
  if (up_->buffer.size() != 0) co_return Fail(ErrorCode::kUnavailable, "the guest's server spoke before the request");
  http::Stream stream = std::move(up_->stream);
  up_.reset();
  stream.expires_never();
  co_return stream;
}

http::Task<Status> AgentConnector::Write(const Request& request, std::string_view body) {
  if (request.method() == bhttp::verb::head && !head_) {
    head_ = true;
    up_->ResetParser(options_.max_response_header, true);
  }
  bhttp::request_serializer<bhttp::empty_body> serializer{request};
  up_->stream.expires_after(options_.io_timeout);
  auto [ec, n] = co_await bhttp::async_write_header(up_->stream, serializer, kTuple);
  if (!ec && !body.empty()) {
    auto [body_ec, body_n] =
        co_await asio::async_write(up_->stream, asio::buffer(body.data(), body.size()), kTuple);
    ec = body_ec;
  }
  if (aborted_) co_return Fail(ClientGone());
  if (ec) {
    last_error_ = ec;
    co_return Fail(Unreachable(ec));
  }
  co_return Status{};
}

http::Task<Status> AgentConnector::ReadResponseHeader() {
  if (!up_) co_return Fail(ErrorCode::kInternal, "no request was sent");
  // One deadline for the answer, however many informational answers come first.
  up_->stream.expires_after(options_.response_timeout);
  for (int informational = 0;; ++informational) {
    auto [ec, n] = co_await bhttp::async_read_header(up_->stream, up_->buffer, *up_->parser, kTuple);
    if (aborted_) co_return Fail(ClientGone());
    if (ec == beast::error::timeout) {
      co_return Fail(ErrorCode::kDeadlineExceeded, "the workspace's agent did not answer in time");
    }
    if (ec) {
      last_error_ = ec;
      co_return Fail(Unreachable(ec));
    }
    // 100 Continue (berthd never asks for it, a server may send it anyway) or 103 Early
    // Hints: not the answer, and a client given one as final would wait for ever. A few are
    // read past; a server that sends nothing else is cut off.
    unsigned code = up_->parser->get().result_int();
    if (code < 100 || code >= 200 || code == 101) co_return Status{};
    if (informational >= 8) co_return Fail(ErrorCode::kUnavailable, "the server sent only informational answers");
    up_->ResetParser(options_.max_response_header, head_);
  }
}

http::Task<Result<Upstream*>> AgentConnector::RoundTrip(const Request& request,
                                                        std::string_view body) {
  for (int attempt = 0;; ++attempt) {
    auto connected = co_await Connect(/*allow_pooled=*/attempt == 0);
    if (!connected) co_return Fail(connected.error());
    last_error_ = {};
    Error error;
    auto sent = co_await Write(request, body);
    if (sent) {
      auto read = co_await ReadResponseHeader();
      if (read) co_return up_.get();
      error = read.error();
    } else {
      error = sent.error();
    }
    // A pooled connection that failed before any byte of an answer: closed while idle.
    bool stale = up_->reused && !aborted_ && ClosedUnderUs(last_error_) && up_->buffer.size() == 0;
    if (!stale) co_return Fail(std::move(error));
    ++retries_;
  }
}

http::Task<Result<Upstream*>> AgentConnector::Open(const Request& request) {
  auto connected = co_await Connect(/*allow_pooled=*/false);
  if (!connected) co_return Fail(connected.error());
  auto sent = co_await Write(request, {});
  if (!sent) co_return Fail(sent.error());
  co_return up_.get();
}

bool AgentConnector::AnswerReadWhole() const {
  return up_ && up_->parser->is_done() && up_->parser->keep_alive() && up_->buffer.size() == 0 &&
         up_->parser->get().result() != bhttp::status::switching_protocols;
}

void AgentConnector::Recycle() {
  if (!up_ || pool_ == nullptr || aborted_ || !AnswerReadWhole()) return;
  auto& up = *up_;
  boost::system::error_code ec;
  up.stream.expires_never();
  int fd = up.stream.socket().release(ec);
  if (!ec && fd >= 0) pool_->Put(pool_key_, fd);
  up_.reset();
}

void AgentConnector::Abort() {
  if (aborted_) return;
  // The agent's answer was read whole: there is nothing left to cut, and the connection can
  // still go back to the pool. (A client that closes as soon as it has its answer races the
  // relay's last step here; seen under ASan: the connection was dropped, not pooled.)
  if (AnswerReadWhole()) return;
  aborted_ = true;
  if (!up_) return;
  // shutdown() rather than close(): pending operations end (reads see EOF, writes fail) and
  // complete normally, and the agent sees the connection end now, not when the socket object
  // goes. cancel() covers a connect still in progress.
  boost::system::error_code ignored;
  up_->stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
  up_->stream.socket().cancel(ignored);
}

}  // namespace berth::agent_client
