#include "controller/agent_client/agent_proxy.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "common/net/peer_watch.h"
#include "controller/agent_client/response_relay.h"

namespace berth::agent_client {

namespace beast = http::beast;
namespace bhttp = http::bhttp;
namespace {

namespace asio = http::asio;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// One read from the client, one write to the agent, for a streamed request body.
constexpr size_t kBodyChunk = 64 * 1024;

Error Unreachable(const boost::system::error_code& ec) {
  return Error(ErrorCode::kUnavailable,
               fmt::format("the workspace's agent cannot be reached: {}", ec.message()));
}

// Streams the client's request body to the agent, re-chunked when its length is unknown.
http::Task<Status> StreamBody(http::Exchange& ex, Upstream& up, bool chunked,
                              const ProxyOptions& options) {
  auto& upstream = up.stream;
  // A named sink, not a lambda converted inside the co_await (g++ 12 destroys it twice).
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
  auto sent = co_await ex.ReadBodyChunks(sink, kBodyChunk);
  if (!sent || !chunked) co_return sent;
  upstream.expires_after(options.io_timeout);
  auto last = bhttp::make_chunk_last();
  auto [ec, n] = co_await asio::async_write(upstream, last, kTuple);
  if (ec) co_return Fail(Unreachable(ec));
  co_return Status{};
}

// Ends the watch however the answer ends (an exception included): the watch's read is bound to
// its own cancellation signal, which nothing else would emit.
struct StopWatchOnExit {
  net::PeerWatch& watch;
  ~StopWatchOnExit() { watch.Stop(); }
};

enum class Answered { kDone, kUpgrade };

// The upstream could not be reached, or gave no answer: the plan's page, or the error as JSON.
http::Task<void> Unreachable(http::Exchange& ex, const ProxyPlan& plan, const Error& error) {
  if (plan.unreachable) {
    co_await plan.unreachable(ex, error);
    co_return;
  }
  auto answered = co_await ex.SendError(error);
  (void)answered;  // the client may be gone; nothing is left to tell it
}

// While the agent works on the request: a client that goes away cancels it.
http::Task<void> WatchClient(net::PeerWatch& watch, http::Exchange& ex, AgentConnector& connector) {
  auto outcome = co_await watch.Run(ex.stream().socket());
  if (outcome == net::PeerWatch::Outcome::kClosed) connector.Abort();
}

// The agent's answer, header and (unless it upgrades) body, relayed to the client.
http::Task<Answered> Answer(http::Exchange& ex, AgentConnector& connector,
                            const AgentConnector::Request& request, std::string_view body,
                            bool replayable, bool upgrade, net::PeerWatch& watch,
                            const ProxyPlan& plan, const ProxyOptions& options) {
  StopWatchOnExit stop{watch};
  Upstream* up = nullptr;
  Status got_header;
  if (replayable) {
    auto answered = co_await connector.RoundTrip(request, body);
    if (answered) {
      up = *answered;
    } else {
      got_header = Fail(answered.error());
    }
  } else {
    auto read = co_await connector.ReadResponseHeader();
    got_header = std::move(read);
    if (got_header) up = connector.upstream();
  }
  if (!got_header) {
    // A client that went away gets no answer worth keeping the connection for.
    if (connector.aborted()) {
      ex.set_keep_alive(false);
      auto answered = co_await ex.SendError(got_header.error());
      (void)answered;  // the client is gone; nothing is left to tell it
      co_return Answered::kDone;
    }
    co_await Unreachable(ex, plan, got_header.error());
    co_return Answered::kDone;
  }
  if (up->parser->get().result() == bhttp::status::switching_protocols) {
    if (upgrade) co_return Answered::kUpgrade;
    Error error(ErrorCode::kInternal, "the workspace's agent switched protocols unasked");
    auto answered = co_await ex.SendError(error);
    (void)answered;  // the connection is dropped either way
    co_return Answered::kDone;
  }
  auto relayed = co_await RelayResponse(ex, *up, options, plan.relay);
  if (relayed) connector.Recycle();
  co_return Answered::kDone;
}

}  // namespace

http::Task<void> ProxyToAgent(http::Exchange& ex, const AgentLink& link, std::string target,
                              const ProxyOptions& options, AgentConnectionPool* pool,
                              const ExtraHeaders& extra_headers) {
  co_await ProxyToAgent(ex, link, std::move(target), options, pool, extra_headers, nullptr);
}

http::Task<void> ProxyToAgent(http::Exchange& ex, const AgentLink& link, std::string target,
                              const ProxyOptions& options, AgentConnectionPool* pool,
                              const ExtraHeaders& extra_headers, ProxyTrace* trace) {
  AgentConnector connector(link, options, pool);
  ProxyPlan plan;
  plan.trace = trace;
  if (trace) plan.relay.trace = &trace->answer;
  plan.build = [&](BodyFraming framing) {
    return BuildUpstreamRequest(ex.request(), target, link.token, extra_headers, framing);
  };
  co_await ProxyThrough(ex, connector, plan, options);
}

http::Task<void> ProxyThrough(http::Exchange& ex, AgentConnector& connector, const ProxyPlan& plan,
                              const ProxyOptions& options) {
  using namespace asio::experimental::awaitable_operators;
  const bool upgrade = WantsUpgrade(ex.request());
  const bool has_body = !ex.body_done();
  if (upgrade && has_body) {
    Error error(ErrorCode::kInvalidArgument, "a request that upgrades has no body");
    auto answered = co_await ex.SendError(error);
    (void)answered;  // the client is told if it listens; nothing else to do
    co_return;
  }
  const auto length = DeclaredLength(ex.request());
  const bool replayable = !upgrade && (!has_body || (length && *length <= kReplayableBody));

  std::string small_body;
  BodyFraming framing;
  if (has_body && replayable) {
    auto body = co_await ex.ReadBody(kReplayableBody);
    if (!body) {
      auto answered = co_await ex.SendError(body.error());
      (void)answered;  // the read failed: the client may be gone
      co_return;
    }
    small_body = std::move(*body);
    framing = BodyFraming::Length(small_body.size());
    if (plan.trace) plan.trace->request_body = small_body;
  } else if (has_body) {
    framing = length ? BodyFraming::Length(*length) : BodyFraming::Chunked();
  }
  const auto request = plan.build(framing);

  if (!replayable) {
    auto opened = co_await connector.Open(request);
    if (!opened) {
      co_await Unreachable(ex, plan, opened.error());
      co_return;
    }
    if (has_body) {
      auto sent = co_await StreamBody(ex, **opened, framing.kind == BodyFraming::Kind::kChunked,
                                      options);
      // A failed upload still reads the agent's answer: it may have refused the body early (a
      // 403 or 507 says more than a broken pipe). A client-side failure ends it here.
      if (!sent && sent.error().code != ErrorCode::kUnavailable) {
        auto answered = co_await ex.SendError(sent.error());
        (void)answered;  // the client's body was bad or it went away
        co_return;
      }
    }
  }

  // The client has sent its whole request: from here on, watch its connection.
  net::PeerWatch watch;
  auto answered = co_await (WatchClient(watch, ex, connector) &&
                            Answer(ex, connector, request, small_body, replayable, upgrade,
                                   watch, plan, options));
  if (answered == Answered::kUpgrade) co_await RelayUpgrade(ex, *connector.upstream(), plan.relay);
}

}  // namespace berth::agent_client
