#include "controller/agent_client/agent_proxy.h"

#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "common/random.h"

namespace berth::agent_client {
namespace {

namespace asio = http::asio;
namespace beast = http::beast;
namespace bhttp = http::bhttp;
using namespace boost::asio::experimental::awaitable_operators;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr size_t kChunk = 64 * 1024;

// Headers that describe one hop, not the message (RFC 9110 7.6.1), plus the ones berthd sets
// itself. Upgrade and Connection are kept for upgrades and set explicitly.
bool HopByHop(bhttp::field field, std::string_view name) {
  switch (field) {
    case bhttp::field::connection:
    case bhttp::field::keep_alive:
    case bhttp::field::proxy_authenticate:
    case bhttp::field::proxy_authorization:
    case bhttp::field::proxy_connection:
    case bhttp::field::te:
    case bhttp::field::trailer:
    case bhttp::field::transfer_encoding:
    case bhttp::field::upgrade:
    case bhttp::field::content_length:
    case bhttp::field::authorization:
    case bhttp::field::host:
    case bhttp::field::expect:  // berthd answers 100-continue itself
      return true;
    default:
      return beast::iequals(name, "idempotency-key");
  }
}

Error Unreachable(const boost::system::error_code& ec) {
  return Error{ErrorCode::kUnavailable,
               fmt::format("the workspace's agent cannot be reached: {}", ec.message())};
}

// One direction of an upgraded connection. EOF is passed on as a half-close; an error closes
// both ends so the other direction ends too.
http::Task<void> Pump(http::Stream& from, http::Stream& to, std::string first) {
  boost::system::error_code ignored;
  if (!first.empty()) {
    auto [ec, n] = co_await asio::async_write(to, asio::buffer(first), kTuple);
    if (ec) {
      from.socket().shutdown(asio::socket_base::shutdown_both, ignored);
      to.socket().shutdown(asio::socket_base::shutdown_both, ignored);
      co_return;
    }
  }
  std::vector<char> buf(kChunk);
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), kTuple);
    if (n > 0) {
      auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), kTuple);
      if (wec) ec = wec;
    }
    if (ec == asio::error::eof) {
      to.socket().shutdown(asio::socket_base::shutdown_send, ignored);
      co_return;
    }
    if (ec) {
      from.socket().shutdown(asio::socket_base::shutdown_both, ignored);
      to.socket().shutdown(asio::socket_base::shutdown_both, ignored);
      co_return;
    }
  }
}

// The agent's response header, relayed without hop-by-hop fields.
std::vector<std::pair<std::string, std::string>> RelayedHeaders(
    const bhttp::response_header<>& header) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : header) {
    if (HopByHop(f.name(), f.name_string()) || f.name() == bhttp::field::content_type) continue;
    out.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  return out;
}

}  // namespace

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
    if (now - i.since < kMaxIdle) return i.fd;
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

namespace {

// One exchange with the agent: the connection, the response parser and its buffer.
struct Upstream {
  explicit Upstream(const asio::any_io_executor& executor) : stream(executor) {}
  http::Stream stream;
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  bool pooled = false;
};

// Gives the connection back to the pool when the agent keeps it alive and nothing of it is
// left unread.
void Recycle(Upstream& up, AgentConnectionPool* pool, const std::string& key) {
  if (pool == nullptr || !up.parser.is_done() || !up.parser.keep_alive() || up.buffer.size() != 0) {
    return;
  }
  boost::system::error_code ec;
  up.stream.expires_never();
  int fd = up.stream.socket().release(ec);
  if (!ec && fd >= 0) pool->Put(key, fd);
}

}  // namespace

http::Task<void> ProxyToAgent(http::Exchange& ex, const AgentLink& link, std::string target,
                              const ProxyOptions& options, AgentConnectionPool* pool,
                              const ExtraHeaders& extra_headers) {
  auto executor = co_await asio::this_coro::executor;
  auto asio_ep = link.endpoint.ToAsio();
  if (!asio_ep) {
    co_await ex.SendError(asio_ep.error());
    co_return;
  }

  // --- the request header -------------------------------------------------------------------
  const auto& in = ex.request();
  bool upgrade = false;
  for (auto token : bhttp::token_list(ex.header(bhttp::field::connection))) {
    if (beast::iequals(token, "upgrade")) upgrade = !ex.header(bhttp::field::upgrade).empty();
  }
  bhttp::request<bhttp::empty_body> req{in.method(), target, 11};
  for (const auto& f : in) {
    if (HopByHop(f.name(), f.name_string())) continue;
    req.insert(f.name_string(), f.value());
  }
  req.set(bhttp::field::host, "berth-agent");
  req.set(bhttp::field::authorization, "Bearer " + link.token);
  if (upgrade) {
    req.set(bhttp::field::connection, "Upgrade");
    req.set(bhttp::field::upgrade, ex.header(bhttp::field::upgrade));
  }
  for (const auto& [name, value] : extra_headers) req.set(name, value);
  bool has_body = !ex.body_done();
  auto length = in.payload_size();  // set when the client sent Content-Length
  // A small body is read first, so the request can be sent again on a fresh connection when
  // a pooled one turns out to have been closed; larger bodies stream through a new connection.
  bool replayable = !upgrade && (!has_body || (length && *length <= kChunk));
  std::string small_body;
  if (has_body && replayable) {
    auto body = co_await ex.ReadBody(kChunk);
    if (!body) {
      co_await ex.SendError(body.error());
      co_return;
    }
    small_body = std::move(*body);
    has_body = false;
    req.content_length(small_body.size());
  }
  bool chunked = has_body && !length;
  if (has_body && length) req.content_length(*length);
  if (chunked) req.chunked(true);
  std::string pool_key = link.endpoint.ToString() + "#" + Sha256Hex(link.token);
  AgentConnectionPool* usable_pool = replayable ? pool : nullptr;

  std::unique_ptr<Upstream> up;
  for (int attempt = 0;; ++attempt) {
    up = std::make_unique<Upstream>(executor);
    up->parser.header_limit(options.max_response_header);
    up->parser.body_limit(boost::none);
    int fd = usable_pool != nullptr && attempt == 0 ? usable_pool->Take(pool_key) : -1;
    if (fd >= 0) {
      boost::system::error_code ec;
      up->stream.socket().assign(asio_ep->protocol(), fd, ec);
      if (ec) {
        ::close(fd);
        continue;
      }
      up->pooled = true;
    } else {
      up->stream.expires_after(options.connect_timeout);
      auto [ec] = co_await up->stream.async_connect(*asio_ep, kTuple);
      if (ec) {
        auto error = Unreachable(ec);
        co_await ex.SendError(error);
        co_return;
      }
      if (link.endpoint.kind == Endpoint::Kind::kTcp) {
        // The header and the body go out as separate writes: no Nagle delay between them.
        int one = 1;
        setsockopt(up->stream.socket().native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      }
    }
    {
      bhttp::request_serializer<bhttp::empty_body> sr{req};
      up->stream.expires_after(options.io_timeout);
      auto [ec, n] = co_await bhttp::async_write_header(up->stream, sr, kTuple);
      if (!ec && !small_body.empty()) {
        auto [bec, bn] = co_await asio::async_write(up->stream, asio::buffer(small_body), kTuple);
        ec = bec;
      }
      if (ec && up->pooled) continue;  // closed while idle: a fresh connection
      if (ec) {
        auto error = Unreachable(ec);
        co_await ex.SendError(error);
        co_return;
      }
    }

    // --- the request body, streamed -------------------------------------------------------
    if (has_body) {
      auto& upstream = up->stream;
      http::Exchange::ChunkSink sink = [&](std::string_view data) -> http::Task<Status> {
        upstream.expires_after(options.io_timeout);
        boost::system::error_code ec;
        if (chunked) {
          auto chunk = bhttp::make_chunk(asio::const_buffer(data.data(), data.size()));
          auto [wec, n] = co_await asio::async_write(upstream, chunk, kTuple);
          ec = wec;
        } else {
          auto [wec, n] = co_await asio::async_write(upstream, asio::buffer(data), kTuple);
          ec = wec;
        }
        if (ec) co_return Fail(Unreachable(ec));
        co_return Status{};
      };
      auto sent = co_await ex.ReadBodyChunks(sink, kChunk);
      if (sent && chunked) {
        upstream.expires_after(options.io_timeout);
        auto last = bhttp::make_chunk_last();
        auto [ec, n] = co_await asio::async_write(upstream, last, kTuple);
        if (ec) sent = Fail(Unreachable(ec));
      }
      // A failed upload still reads the agent's answer: it may have refused the body early
      // (a 403 or 507 says more than a broken pipe).
      if (!sent && sent.error().code != ErrorCode::kUnavailable) {
        co_await ex.SendError(sent.error());
        co_return;
      }
    }

    // --- the response header --------------------------------------------------------------
    up->stream.expires_after(options.response_timeout);
    auto [ec, n] = co_await bhttp::async_read_header(up->stream, up->buffer, up->parser, kTuple);
    if (ec && up->pooled && up->buffer.size() == 0) continue;  // closed while idle: again
    if (ec) {
      auto error = ec == beast::error::timeout
                       ? Error{ErrorCode::kDeadlineExceeded, "the workspace's agent did not answer in time"}
                       : Unreachable(ec);
      co_await ex.SendError(error);
      co_return;
    }
    break;
  }
  auto& upstream = up->stream;
  auto& buffer = up->buffer;
  auto& parser = up->parser;
  const auto& head = parser.get();
  auto status = head.result();
  auto headers = RelayedHeaders(head.base());
  std::string content_type(head[bhttp::field::content_type]);

  // --- an upgrade: a byte pipe from here on -------------------------------------------------
  if (status == bhttp::status::switching_protocols) {
    if (!upgrade) {
      auto error = Error{ErrorCode::kInternal, "the agent switched protocols unasked"};
      co_await ex.SendError(error);
      co_return;
    }
    std::string head_bytes = fmt::format("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {}\r\n",
                                         std::string(head[bhttp::field::upgrade]));
    for (const auto& [k, v] : headers) head_bytes += fmt::format("{}: {}\r\n", k, v);
    head_bytes += "\r\n";
    auto early_from_client = ex.TakeOver();
    auto& client = ex.stream();
    client.expires_never();
    upstream.expires_never();
    auto buffered = buffer.data();
    head_bytes.append(static_cast<const char*>(buffered.data()), buffered.size());
    co_await (Pump(upstream, client, std::move(head_bytes)) &&
              Pump(client, upstream, std::move(early_from_client)));
    co_return;
  }

  // --- an ordinary answer, its body streamed ------------------------------------------------
  bool fixed = parser.content_length().has_value();
  bool no_body = parser.is_done() || (fixed && *parser.content_length() == 0) ||
                 status == bhttp::status::no_content || status == bhttp::status::not_modified;
  if (no_body) {
    bhttp::response<bhttp::string_body> res{status, 11};
    for (const auto& [k, v] : headers) res.set(k, v);
    if (!content_type.empty()) res.set(bhttp::field::content_type, content_type);
    if (status != bhttp::status::no_content && status != bhttp::status::not_modified) {
      res.content_length(0);
    }
    if (co_await ex.Send(std::move(res))) Recycle(*up, usable_pool, pool_key);
    co_return;
  }
  if (content_type.empty()) content_type = "application/octet-stream";
  Status begun = fixed ? co_await ex.BeginFixed(status, content_type, *parser.content_length(), headers)
                       : co_await ex.BeginChunked(status, content_type, headers);
  if (!begun) co_return;
  std::vector<char> chunk(kChunk);
  // Beast reads at most the flat buffer's free room per syscall (a few hundred bytes after a
  // header): room for 64 KiB reads makes large downloads ~15x faster.
  buffer.reserve(buffer.size() + kChunk);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    upstream.expires_after(options.io_timeout);
    // read_some: relay what arrived at once (NDJSON streams must not wait for a full buffer).
    auto [ec, n] = co_await bhttp::async_read_some(upstream, buffer, parser, kTuple);
    if (ec == bhttp::error::need_buffer) ec = {};
    size_t got = chunk.size() - parser.get().body().size;
    if (got > 0) {
      std::string_view data(chunk.data(), got);
      auto wrote = fixed ? co_await ex.WriteRaw(data) : co_await ex.WriteChunk(data);
      if (!wrote) co_return;
    }
    if (ec) {
      // The agent broke off mid-answer: the only honest signal left is to drop the connection.
      auto error = Unreachable(ec);
      co_await ex.SendError(error);
      co_return;
    }
  }
  if (!fixed && !co_await ex.EndChunked()) co_return;
  Recycle(*up, usable_pool, pool_key);
}

}  // namespace berth::agent_client
