#include "common/client/api_client.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include "common/json.h"

namespace berth::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using http::Task;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

Error IoError(const boost::system::error_code& ec, std::string_view what) {
  if (ec == beast::error::timeout || ec == asio::error::timed_out) {
    return Error{ErrorCode::kDeadlineExceeded, fmt::format("{}: timed out", what)};
  }
  return Error{ErrorCode::kUnavailable, fmt::format("{}: {}", what, ec.message())};
}

// Runs `task` to completion on `io`. Every operation inside carries its own timeout, so this
// returns. It runs handlers one at a time until the task is done rather than io.run(): an
// open WebSocket may keep timers pending for as long as it lives.
template <class T>
T RunSync(asio::io_context& io, Task<T> task) {
  std::optional<T> result;
  std::exception_ptr failure;
  bool finished = false;
  asio::co_spawn(io, std::move(task), [&](std::exception_ptr e, T value) {
    failure = e;
    if (!e) result.emplace(std::move(value));
    finished = true;
  });
  io.restart();
  while (!finished && io.run_one() > 0) {
  }
  if (failure) std::rethrow_exception(failure);
  if (!finished) throw std::logic_error("client task did not finish");
  return std::move(*result);
}

Task<Result<std::unique_ptr<http::Stream>>> Dial(const Endpoint& endpoint,
                                                 const ClientOptions& options) {
  auto ep = endpoint.ToAsio();
  if (!ep) co_return Fail(ep.error());
  auto stream = std::make_unique<http::Stream>(co_await asio::this_coro::executor);
  stream->expires_after(StepTimeout(options.connect_timeout, options.deadline));
  auto [ec] = co_await stream->async_connect(*ep, kTuple);
  if (ec) co_return Fail(IoError(ec, fmt::format("connect {}", endpoint.ToString())));
  if (endpoint.kind == Endpoint::Kind::kTcp) {
    int one = 1;
    setsockopt(stream->socket().native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  co_return stream;
}

std::string HostHeader(const Endpoint& endpoint) {
  return endpoint.kind == Endpoint::Kind::kTcp ? fmt::format("{}:{}", endpoint.host, endpoint.port)
                                               : std::string("berth");
}

// How long one read or write may take: io_timeout, cut to what is left of the deadline.
std::chrono::milliseconds IoStep(const ClientOptions& options) {
  return StepTimeout(options.io_timeout, options.deadline);
}

// How long the response header may take: with a deadline, all that is left of it (the server
// may hold the request on purpose); without one, io_timeout.
std::chrono::milliseconds HeaderStep(const ClientOptions& options) {
  return options.deadline == kNoDeadline ? options.io_timeout : Remaining(options.deadline);
}

// Retry-After as delta seconds; nullopt for an HTTP date or anything else.
std::optional<std::chrono::seconds> RetryAfter(std::string_view value) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty() || value.size() > 6 ||
      value.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  return std::chrono::seconds(std::stoll(std::string(value)));
}

// Whether a 503 with this Retry-After should be waited out now: the deadline must leave room
// for the wait and a little more for the call itself.
std::optional<std::chrono::milliseconds> RetryDelay(const ClientOptions& options, int status,
                                                     std::string_view retry_after) {
  if (!options.retry_unavailable || status != 503) return std::nullopt;
  auto delay = RetryAfter(retry_after);
  if (!delay) return std::nullopt;
  // berthd says 1-5 s; a longer answer is waited out in steps of this, asking again each time.
  constexpr std::chrono::milliseconds kMaxStep{5000};
  constexpr std::chrono::milliseconds kMinStep{100};
  auto wait = std::clamp<std::chrono::milliseconds>(*delay, kMinStep, kMaxStep);
  if (Remaining(options.deadline) <= wait + kMinStep) return std::nullopt;
  return wait;
}

Response ToResponse(const bhttp::response_header<>& header) {
  Response out;
  out.status = static_cast<int>(header.result_int());
  for (const auto& field : header) {
    out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  return out;
}

}  // namespace

std::string_view Response::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (beast::iequals(k, name)) return v;
  }
  return {};
}

ApiClient::ApiClient(Endpoint endpoint, std::string token, ClientOptions options)
    : endpoint_(std::move(endpoint)), token_(std::move(token)), options_(options) {}

Error ApiClient::ErrorFrom(const Response& response) {
  auto parsed = ParseJson(response.body);
  const nlohmann::json* error = nullptr;
  if (parsed && parsed->is_object()) {
    if (auto it = parsed->find("error"); it != parsed->end() && it->is_object()) error = &*it;
  }
  if (error != nullptr) {
    const auto& e = *error;
    // Not value(): a peer's "code" may be a number (JSON-RPC errors), and value() would throw.
    auto text = [&](const char* key) {
      auto it = e.find(key);
      return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    std::string code = text("code");
    std::string message = text("message");
    auto parsed = ErrorCodeFromName(code);
    std::string details;
    if (auto it = e.find("details"); it != e.end() && it->is_object()) details = DumpJson(*it);
    return Error{parsed.value_or(ErrorCodeForHttpStatus(response.status)), message,
                 std::move(details)};
  }
  std::string snippet = response.body.substr(0, 200);
  return Error{ErrorCodeForHttpStatus(response.status),
               fmt::format("HTTP {}{}{}", response.status, snippet.empty() ? "" : ": ", snippet)};
}

Result<Response> ApiClient::Request(bhttp::verb method, std::string_view target,
                                    std::string_view body, std::string_view content_type,
                                    const Headers& headers) {
  Response out;
  Headers all = headers;
  if (!content_type.empty()) all.emplace_back("Content-Type", std::string(content_type));
  auto status = StreamBuffered(
      method, target, all, body,
      [&](std::string_view data) -> Status {
        if (out.body.size() + data.size() > options_.max_response_bytes) {
          return Fail(ErrorCode::kTooLarge, "response is over the client's limit");
        }
        out.body.append(data);
        return {};
      },
      [&](const Response& head) {
        out.status = head.status;
        out.headers = head.headers;
        // Stream() calls this a second time with the body of a non-2xx answer (the error).
        if (!head.body.empty()) out.body = head.body;
      });
  if (!status) {
    // Stream() turns non-2xx into errors; Request() reports them as responses.
    if (out.status >= 300 || (out.status >= 100 && out.status < 200)) return out;
    return Fail(status.error());
  }
  return out;
}

Result<nlohmann::json> ApiClient::Json(bhttp::verb method, std::string_view target,
                                       const std::optional<nlohmann::json>& body,
                                       const Headers& headers) {
  auto response = Request(method, target, body ? DumpJson(*body) : std::string(),
                          body ? "application/json" : "", headers);
  if (!response) return Fail(response.error());
  if (response->status < 200 || response->status >= 300) return Fail(ErrorFrom(*response));
  if (response->body.empty()) return nlohmann::json::object();
  // The peer may be a hostile guest's agent: too deep or not JSON is an error, never a crash.
  auto parsed = ParseJson(response->body);
  if (!parsed) {
    return Fail(ErrorCode::kInternal,
                fmt::format("{} answered with invalid JSON: {}", target, parsed.error().message));
  }
  return std::move(*parsed);
}

Status ApiClient::Stream(bhttp::verb method, std::string_view target, const Headers& headers,
                         const BodySource& source, std::optional<uint64_t> length,
                         const BodySink& sink,
                         const std::function<void(const Response&)>& on_status) {
  // A body from a caller's source cannot be sent twice; no body at all can.
  bool replayable = !source || (length && *length == 0);
  SourceFactory make_source = [&source]() { return source; };
  return StreamAttempts(method, target, headers, make_source, replayable, length, sink,
                        on_status);
}

Status ApiClient::StreamBuffered(bhttp::verb method, std::string_view target,
                                 const Headers& headers, std::string_view body,
                                 const BodySink& sink,
                                 const std::function<void(const Response&)>& on_status) {
  // A fresh source per attempt, so a retried request sends its body from the start.
  SourceFactory make_source = [body]() -> BodySource {
    return [body, offset = size_t{0}](char* buf, size_t size) mutable -> Result<size_t> {
      size_t n = std::min(size, body.size() - offset);
      std::memcpy(buf, body.data() + offset, n);
      offset += n;
      return n;
    };
  };
  return StreamAttempts(method, target, headers, make_source, /*replayable=*/true, body.size(),
                        sink, on_status);
}

Status ApiClient::StreamAttempts(bhttp::verb method, std::string_view target,
                                 const Headers& headers, const SourceFactory& make_source,
                                 bool replayable, std::optional<uint64_t> length,
                                 const BodySink& sink,
                                 const std::function<void(const Response&)>& on_status) {
  for (;;) {
    std::optional<std::chrono::milliseconds> retry;
    BodySource source = make_source();
    asio::io_context io;
    auto task = [&]() -> Task<Status> {
      auto dialed = co_await Dial(endpoint_, options_);
      if (!dialed) co_return Fail(dialed.error());
      http::Stream& stream = **dialed;

      bhttp::request<bhttp::empty_body> req{method, std::string(target), 11};
      req.set(bhttp::field::host, HostHeader(endpoint_));
      req.set(bhttp::field::user_agent, "berth-client/" BERTH_VERSION);
      if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
      for (const auto& [k, v] : headers) req.set(k, v);
      req.keep_alive(false);
      bool has_body = source && (!length || *length > 0);
      if (length) {
        if (*length > 0 || method == bhttp::verb::put || method == bhttp::verb::post) {
          req.content_length(*length);
        }
      } else if (has_body) {
        req.chunked(true);
      }
      bhttp::request_serializer<bhttp::empty_body> sr{req};
      stream.expires_after(IoStep(options_));
      auto [ec, n] = co_await bhttp::async_write_header(stream, sr, kTuple);
      std::optional<Error> send_error;
      // A server that refuses early (busy, unauthenticated) may close before reading it all:
      // on a failed write, still read the answer it sent.
      if (ec) send_error = IoError(ec, "send request");
      if (has_body && !send_error) {
        std::vector<char> buf(256 * 1024);
        uint64_t sent = 0;
        for (;;) {
          auto got = source(buf.data(), buf.size());
          if (!got) co_return Fail(got.error());
          if (*got == 0) break;
          sent += *got;
          stream.expires_after(IoStep(options_));
          boost::system::error_code wec;
          if (length) {
            std::tie(wec, n) =
                co_await asio::async_write(stream, asio::buffer(buf.data(), *got), kTuple);
          } else {
            // Named: g++ 12 may destroy a temporary in a co_await expression twice.
            auto chunk = bhttp::make_chunk(asio::buffer(buf.data(), *got));
            std::tie(wec, n) = co_await asio::async_write(stream, chunk, kTuple);
          }
          if (wec) {
            // The server may have answered early (an error) and closed: read that answer.
            send_error = IoError(wec, "send request body");
            break;
          }
        }
        if (!send_error && length && sent != *length) {
          co_return Fail(ErrorCode::kInvalidArgument,
                         fmt::format("request body was {} bytes, not the {} announced", sent,
                                     *length));
        }
        if (!send_error && !length) {
          stream.expires_after(IoStep(options_));
          auto last = bhttp::make_chunk_last();
          std::tie(ec, n) = co_await asio::async_write(stream, last, kTuple);
          if (ec) send_error = IoError(ec, "send request body");
        }
      }

      beast::flat_buffer buffer;
      std::optional<bhttp::response_parser<bhttp::buffer_body>> holder;
      do {
        // Interim answers (100 Continue) are skipped: read until the real header.
        holder.emplace();
        holder->body_limit(boost::none);
        holder->header_limit(64 * 1024);
        if (method == bhttp::verb::head) holder->skip(true);
        stream.expires_after(HeaderStep(options_));
        std::tie(ec, n) = co_await bhttp::async_read_header(stream, buffer, *holder, kTuple);
      } while (!ec && holder->get().result_int() / 100 == 1);
      auto& parser = *holder;
      if (ec) {
        if (send_error) co_return Fail(*send_error);
        co_return Fail(IoError(ec, "read response"));
      }
      Response head = ToResponse(parser.get().base());
      if (replayable && !send_error) {
        retry = RetryDelay(options_, head.status, head.Header("Retry-After"));
        // Waking up: nothing of this answer reaches the caller; the request goes again.
        if (retry) co_return Fail(ErrorCode::kUnavailable, "retry");
      }
      if (on_status) on_status(head);
      bool ok = head.status >= 200 && head.status < 300;
      std::string error_body;
      std::vector<char> buf(256 * 1024);
      // Beast reads at most the flat buffer's free capacity per syscall: give it 64 KiB.
      buffer.reserve(buffer.size() + 64 * 1024);
      while (!parser.is_done()) {
        parser.get().body().data = buf.data();
        parser.get().body().size = buf.size();
        stream.expires_after(IoStep(options_));
        // read_some, not read: a streamed body (NDJSON events) must reach the sink as it
        // arrives, not once 256 KiB have piled up.
        std::tie(ec, n) = co_await bhttp::async_read_some(stream, buffer, parser, kTuple);
        if (ec == bhttp::error::need_buffer) ec = {};
        if (ec) co_return Fail(IoError(ec, "read response body"));
        size_t got = buf.size() - parser.get().body().size;
        if (got == 0) continue;
        std::string_view data(buf.data(), got);
        if (!ok) {
          if (error_body.size() < 64 * 1024) error_body.append(data);
          continue;
        }
        auto status = sink ? sink(data) : Status{};
        if (!status) co_return status;
      }
      if (!ok) {
        head.body = std::move(error_body);
        if (on_status) on_status(head);
        co_return Fail(ErrorFrom(head));
      }
      if (send_error) co_return Fail(*send_error);
      beast::error_code ignored;
      stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
      co_return Status{};
    };
    auto status = RunSync(io, task());
    if (!retry) return status;
    std::this_thread::sleep_for(*retry);
  }
}

Result<std::unique_ptr<WebSocketConnection>> ApiClient::OpenWebSocket(std::string_view target,
                                                                      const Headers& headers) {
  for (;;) {
    std::optional<std::chrono::milliseconds> retry;
    std::unique_ptr<WebSocketConnection> conn(new WebSocketConnection());
    conn->io_ = std::make_unique<asio::io_context>();
    conn->io_timeout_ = options_.io_timeout;
    auto task = [&]() -> Task<Status> {
      auto dialed = co_await Dial(endpoint_, options_);
      if (!dialed) co_return Fail(dialed.error());
      (*dialed)->expires_never();
      auto ws = std::make_unique<http::WebSocket>(std::move(**dialed));
      // The handshake's answer may wait for a workspace to wake, as any request's header.
      auto handshake = options_.deadline == kNoDeadline
                           ? options_.connect_timeout
                           : std::max(options_.connect_timeout, HeaderStep(options_));
      ws->set_option(http::websocket::stream_base::timeout{
          std::chrono::duration_cast<std::chrono::seconds>(handshake), std::chrono::seconds(300),
          true});
      ws->read_message_max(64u << 20);
      std::string token = token_;
      ws->set_option(http::websocket::stream_base::decorator(
          [token, headers](http::websocket::request_type& req) {
            req.set(bhttp::field::user_agent, "berth-client/" BERTH_VERSION);
            if (!token.empty()) req.set(bhttp::field::authorization, "Bearer " + token);
            for (const auto& [k, v] : headers) req.set(k, v);
          }));
      http::websocket::response_type res;
      std::string host = HostHeader(endpoint_);
      std::string path(target);
      auto [ec] = co_await ws->async_handshake(res, host, path, kTuple);
      if (ec) {
        if (res.result_int() != 0 && res.result_int() != 101) {
          retry = RetryDelay(options_, static_cast<int>(res.result_int()),
                             std::string_view(res[bhttp::field::retry_after]));
          Response r;
          r.status = static_cast<int>(res.result_int());
          r.body = res.body();
          co_return Fail(ErrorFrom(r));
        }
        co_return Fail(IoError(ec, "websocket handshake"));
      }
      conn->ws_ = std::move(ws);
      co_return Status{};
    };
    auto status = RunSync(*conn->io_, task());
    if (status) return conn;
    if (!retry) return Fail(status.error());
    std::this_thread::sleep_for(*retry);
  }
}

// ---------------------------------------------------------------------------------------------

WebSocketConnection::~WebSocketConnection() {
  if (ws_ && ws_->is_open()) {
    beast::error_code ignored;
    beast::get_lowest_layer(*ws_).socket().shutdown(asio::socket_base::shutdown_both, ignored);
  }
}

Status WebSocketConnection::SendText(std::string_view data) {
  auto task = [&]() -> Task<Status> {
    ws_->text(true);
    auto [ec, n] = co_await ws_->async_write(asio::buffer(data.data(), data.size()), kTuple);
    if (ec) co_return Fail(IoError(ec, "websocket write"));
    co_return Status{};
  };
  return RunSync(*io_, task());
}

Status WebSocketConnection::SendBinary(std::string_view data) {
  auto task = [&]() -> Task<Status> {
    ws_->binary(true);
    auto [ec, n] = co_await ws_->async_write(asio::buffer(data.data(), data.size()), kTuple);
    if (ec) co_return Fail(IoError(ec, "websocket write"));
    co_return Status{};
  };
  return RunSync(*io_, task());
}

Result<WebSocketConnection::Frame> WebSocketConnection::Read(std::chrono::milliseconds timeout) {
  beast::flat_buffer buffer;
  std::optional<boost::system::error_code> done;
  ws_->async_read(buffer, [&](boost::system::error_code ec, size_t) { done = ec; });
  io_->restart();
  // run_one_until, not run_for: the idle-ping timer keeps the io_context busy after the read
  // completed, and run_for would then wait out the whole timeout.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done) {
    if (io_->run_one_until(deadline) == 0) break;
  }
  if (!done) {
    // Cancel the read (this closes the stream for good: Beast cannot resume a cancelled read).
    beast::get_lowest_layer(*ws_).cancel();
    io_->restart();
    while (!done) {
      if (io_->run_one() == 0) break;
    }
    return Fail(ErrorCode::kDeadlineExceeded, "no websocket message in time");
  }
  if (*done) {
    if (*done == http::websocket::error::closed) {
      return Fail(ErrorCode::kUnavailable,
                  fmt::format("websocket closed: {} {}", static_cast<int>(ws_->reason().code),
                              ws_->reason().reason.c_str()));
    }
    return Fail(IoError(*done, "websocket read"));
  }
  Frame frame;
  frame.text = ws_->got_text();
  frame.data = beast::buffers_to_string(buffer.data());
  return frame;
}

Status WebSocketConnection::Close() {
  if (!ws_ || !ws_->is_open()) return {};
  auto task = [&]() -> Task<Status> {
    auto [ec] = co_await ws_->async_close(http::websocket::close_code::normal, kTuple);
    if (ec) co_return Fail(IoError(ec, "websocket close"));
    co_return Status{};
  };
  return RunSync(*io_, task());
}

// ---------------------------------------------------------------------------------------------

Status NdjsonSplitter::Feed(std::string_view data) {
  while (!data.empty()) {
    auto nl = data.find('\n');
    if (nl == std::string_view::npos) {
      if (pending_.size() + data.size() > max_line_) {
        return Fail(ErrorCode::kTooLarge, "NDJSON line over the limit");
      }
      pending_.append(data);
      return {};
    }
    pending_.append(data.substr(0, nl));
    data.remove_prefix(nl + 1);
    if (!pending_.empty()) {
      auto parsed = ParseJson(pending_);
      pending_.clear();
      if (!parsed) {
        return Fail(ErrorCode::kInternal, "invalid NDJSON line: " + parsed.error().message);
      }
      auto status = on_line_(*parsed);
      if (!status) return status;
    }
  }
  return {};
}

Status NdjsonSplitter::Finish() {
  if (pending_.empty()) return {};
  std::string last = std::move(pending_);
  pending_.clear();
  return Feed(last + "\n");
}

}  // namespace berth::client
