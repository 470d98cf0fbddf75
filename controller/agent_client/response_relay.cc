#include "controller/agent_client/response_relay.h"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "common/net/pump.h"
#include "common/protocol/exec.h"
#include "controller/agent_client/ws_tap.h"

namespace berth::agent_client {

namespace beast = http::beast;
namespace bhttp = http::bhttp;
namespace {

namespace asio = http::asio;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// One read from the agent, one write to the client.
constexpr size_t kChunk = 64 * 1024;

bool Dropped(bhttp::field field, std::string_view name, const RelayPolicy& policy) {
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
      return true;
    case bhttp::field::content_type:
      return true;  // set by the relay itself, from the answer or by default
    case bhttp::field::set_cookie:
      return !policy.app;
    default:
      return beast::iequals(name, "set-cookie2");
  }
}

// A body write of the kind the answer was begun with. One coroutine per kind keeps each
// co_await on its own statement (no ?: around co_await: g++ 12 destroys the result twice).
http::Task<Status> WriteBody(http::Exchange& ex, bool fixed, std::string_view data) {
  if (fixed) co_return co_await ex.WriteRaw(data);
  co_return co_await ex.WriteChunk(data);
}

// The last RelayTrace::kTailBytes of what went by, `tail` included.
void KeepTail(std::string& tail, std::string_view data) {
  constexpr size_t kMax = RelayTrace::kTailBytes;
  if (data.size() >= kMax) {
    tail.assign(data.substr(data.size() - kMax));
    return;
  }
  size_t keep = std::min(tail.size(), kMax - data.size());
  tail.erase(0, tail.size() - keep);
  tail.append(data);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RelayedHeaders(
    const bhttp::response_header<>& header, const RelayPolicy& policy) {
  std::vector<std::string> named;  // fields the agent's Connection names are hop-by-hop too
  for (const auto& f : header) {
    if (f.name() != bhttp::field::connection) continue;
    for (auto token : bhttp::token_list(f.value())) named.emplace_back(token);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : header) {
    if (Dropped(f.name(), f.name_string(), policy)) continue;
    bool hop = std::any_of(named.begin(), named.end(),
                           [&](const std::string& n) {
                             return beast::iequals(n, f.name_string());
                           });
    if (hop) continue;
    if (f.name() == bhttp::field::set_cookie) {
      auto kept = policy.set_cookie ? policy.set_cookie(f.value()) : std::optional<std::string>(f.value());
      if (kept) out.emplace_back(std::string(f.name_string()), std::move(*kept));
      continue;
    }
    out.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  return out;
}

http::Task<Status> RelayResponse(http::Exchange& ex, Upstream& up, const ProxyOptions& options,
                                 const RelayPolicy& policy) {
  auto& parser = *up.parser;
  const auto& head = parser.get();
  const auto status = head.result();
  if (status == bhttp::status::switching_protocols) {
    co_return Fail(ErrorCode::kInternal, "a 101 goes through RelayUpgrade");
  }
  auto headers = RelayedHeaders(head.base(), policy);
  std::string content_type(head[bhttp::field::content_type]);
  RelayTrace* trace = policy.trace;
  if (trace) {
    trace->status = static_cast<int>(status);
    trace->exit_header = std::string(head[protocol::kExitHeader]).substr(0, 64);
  }
  const bool fixed = parser.content_length().has_value();
  if (ex.method() == bhttp::verb::head) {
    // The header alone, saying what a GET would have got (its length, or chunked).
    if (fixed) {
      auto begun = co_await ex.BeginFixed(status, content_type, *parser.content_length(), headers);
      co_return begun;
    }
    auto begun = co_await ex.BeginChunked(status, content_type, headers);
    if (!begun) co_return begun;
    ex.set_keep_alive(false);  // no last chunk follows a HEAD's answer; the exchange cannot say so
    co_return Status{};
  }
  const bool no_body = parser.is_done() || (fixed && *parser.content_length() == 0) ||
                       status == bhttp::status::no_content ||
                       status == bhttp::status::not_modified;
  if (no_body) {
    bhttp::response<bhttp::string_body> res{status, 11};
    for (const auto& [k, v] : headers) res.insert(k, v);
    if (!content_type.empty()) res.set(bhttp::field::content_type, content_type);
    if (status != bhttp::status::no_content && status != bhttp::status::not_modified) {
      res.content_length(0);
    }
    auto sent = co_await ex.Send(std::move(res));
    if (!sent) co_return sent;
    if (!parser.is_done()) co_return Fail(ErrorCode::kUnavailable, "answer not read to its end");
    if (trace) trace->complete = true;
    co_return Status{};
  }

  if (content_type.empty() && !policy.app) content_type = "application/octet-stream";
  if (fixed) {
    auto begun = co_await ex.BeginFixed(status, content_type, *parser.content_length(), headers);
    if (!begun) co_return begun;
  } else {
    auto begun = co_await ex.BeginChunked(status, content_type, headers);
    if (!begun) co_return begun;
  }
  std::vector<char> chunk(kChunk);
  // Beast reads at most the flat buffer's free room per syscall (a few hundred bytes after a
  // header): room for 64 KiB reads makes large downloads ~15x faster.
  up.buffer.reserve(up.buffer.size() + kChunk);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    up.stream.expires_after(options.io_timeout);
    // read_some: relay what arrived at once (NDJSON streams must not wait for a full buffer).
    auto [ec, n] = co_await bhttp::async_read_some(up.stream, up.buffer, parser, kTuple);
    if (ec == bhttp::error::need_buffer) ec = {};
    size_t got = chunk.size() - parser.get().body().size;
    if (got > 0) {
      std::string_view data(chunk.data(), got);
      if (trace) KeepTail(trace->tail, data);
      auto wrote = co_await WriteBody(ex, fixed, data);
      if (!wrote) co_return wrote;
    }
    if (ec) {
      // The agent broke off mid-answer (or the client went and Abort() cut it): the only
      // honest signal left is to drop the client's connection, which SendError does.
      Error error(ErrorCode::kUnavailable,
                  fmt::format("the workspace's agent broke off its answer: {}", ec.message()));
      auto dropped = co_await ex.SendError(error);
      co_return dropped;
    }
  }
  if (!fixed) {
    auto ended = co_await ex.EndChunked();
    if (!ended) co_return ended;
  }
  if (trace) trace->complete = true;
  co_return Status{};
}

http::Task<void> RelayUpgrade(http::Exchange& ex, Upstream& up, const RelayPolicy& policy) {
  const auto& head = up.parser->get();
  if (policy.trace) policy.trace->status = 101;
  std::string to_client =
      fmt::format("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {}\r\n",
                  std::string_view(head[bhttp::field::upgrade]));
  for (const auto& [k, v] : RelayedHeaders(head.base(), policy)) {
    to_client += fmt::format("{}: {}\r\n", k, v);
  }
  to_client += "\r\n";
  // What the agent sent right behind its 101 (a WebSocket frame, tunnel bytes) follows it.
  const size_t header_bytes = to_client.size();
  auto buffered = up.buffer.data();
  to_client.append(static_cast<const char*>(buffered.data()), buffered.size());
  up.buffer.consume(up.buffer.size());
  std::string to_agent = ex.TakeOver();
  ex.stream().expires_never();
  up.stream.expires_never();
  net::PumpOptions pump;
  pump.a_initial = to_agent;   // a: the client
  pump.b_initial = to_client;  // b: the agent
  // The timeline's look at a WebSocket: the session's start and its end. The agent's 101
  // header is not a frame: only what follows it is.
  WsMessageTap from_client;
  WsMessageTap from_agent;
  size_t header_left = header_bytes;
  if (policy.trace) {
    pump.a_to_b_tap = [&](std::string_view bytes) { from_client.Feed(bytes); };
    pump.b_to_a_tap = [&](std::string_view bytes) {
      size_t skip = std::min(header_left, bytes.size());
      header_left -= skip;
      from_agent.Feed(bytes.substr(skip));
    };
  }
  auto stats = co_await net::Pump(ex.stream().socket(), up.stream.socket(), pump);
  (void)stats;  // nothing to report per pipe; the stream guard records the session itself
  if (policy.trace) {
    policy.trace->first_client_text = from_client.first_text();
    policy.trace->last_agent_text = from_agent.last_text();
    policy.trace->complete = true;
  }
}

}  // namespace berth::agent_client
