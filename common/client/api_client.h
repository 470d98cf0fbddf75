// The client side of Berth's HTTP API, shared by the CLI, the tests and the controller's
// calls to agents. Blocking calls, each on a private io_context, with a timeout on every step;
// bodies of any size stream through callbacks and are never held whole in memory.
//
// The same client speaks to berth-agent (scope "/v1") and to berthd's workspace routes
// (scope "/v1/workspaces/{id}"), because berthd mirrors the agent's API.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/deadline.h"
#include "common/endpoint.h"
#include "common/error.h"
#include "common/http/types.h"

namespace berth::client {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{10'000};
  // Every read or write must make progress within this; long-running calls (exec with a
  // timeout, follow streams) stay alive through keepalive events the servers send.
  std::chrono::milliseconds io_timeout{120'000};
  // Cap for responses read whole (JSON answers, captured output).
  size_t max_response_bytes = 256u << 20;
  // The whole call (connect, retries, every read and write) ends by then: each step's timeout
  // is cut to what is left, and past it the call fails with deadline_exceeded. The wait for
  // the response header is bounded by the deadline alone, not by io_timeout: a server may
  // rightly hold a request that long (POST …/wait, a request that wakes a workspace, an exec
  // answered when it ends). kNoDeadline: only the step timeouts apply.
  Deadline deadline = kNoDeadline;
  // A 503 with `Retry-After: N` (berthd waking a workspace without holding the request) is
  // waited out and the request sent again, while the deadline leaves time for it. Only
  // requests that can be sent again are retried: Request(), Json(), Stream() without a body,
  // OpenWebSocket(). Off by default: only berthd's workspace routes mean this by a 503.
  bool retry_unavailable = false;
};

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string_view Header(std::string_view name) const;
};

// Reads up to `size` bytes into `buf`; 0 means the end. An error aborts the request.
using BodySource = std::function<Result<size_t>(char* buf, size_t size)>;
// Receives response body data as it arrives; an error aborts the response.
using BodySink = std::function<Status(std::string_view data)>;
using Headers = std::vector<std::pair<std::string, std::string>>;

// An open WebSocket, used from one thread.
class WebSocketConnection {
 public:
  struct Frame {
    bool text = false;
    std::string data;
  };
  ~WebSocketConnection();
  Status SendText(std::string_view data);
  Status SendBinary(std::string_view data);
  // The next frame; deadline_exceeded when none arrives in time, unavailable when closed
  // (the close reason in the message).
  Result<Frame> Read(std::chrono::milliseconds timeout);
  Status Close();
  // For advanced use (benchmarks, proxies): the underlying stream and its io_context.
  http::WebSocket& socket() { return *ws_; }
  boost::asio::io_context& io() { return *io_; }

 private:
  friend class ApiClient;
  WebSocketConnection() = default;
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<http::WebSocket> ws_;
  std::chrono::milliseconds io_timeout_{};
};

class ApiClient {
 public:
  // `token` is sent as "Authorization: Bearer <token>" when not empty.
  ApiClient(Endpoint endpoint, std::string token, ClientOptions options = {});

  const Endpoint& endpoint() const { return endpoint_; }
  const ClientOptions& options() const { return options_; }
  // The bearer token ("" for none), for callers that speak HTTP on their own socket (raw
  // tunnels: common/client/tunnel_raw.cc).
  const std::string& token() const { return token_; }

  // A request with an optional small body, the whole response back (any status).
  Result<Response> Request(http::bhttp::verb method, std::string_view target,
                           std::string_view body = {}, std::string_view content_type = {},
                           const Headers& headers = {});
  // JSON in, JSON out; a non-2xx status becomes its Error (from the {"error":…} body).
  Result<nlohmann::json> Json(http::bhttp::verb method, std::string_view target,
                              const std::optional<nlohmann::json>& body = std::nullopt,
                              const Headers& headers = {});
  // Streams a request body from `source` (Content-Length when `length` is known, chunked
  // otherwise) and the response body to `sink`. `on_status` sees the status and headers
  // first; a non-2xx status is read whole and returned as its Error without calling `sink`.
  Status Stream(http::bhttp::verb method, std::string_view target, const Headers& headers,
                const BodySource& source, std::optional<uint64_t> length, const BodySink& sink,
                const std::function<void(const Response&)>& on_status = {});
  // Stream() for a request whose whole body is in memory (`body`, Content-Length): such a
  // request can be sent again, so a 503 with Retry-After is retried (see ClientOptions).
  Status StreamBuffered(http::bhttp::verb method, std::string_view target, const Headers& headers,
                        std::string_view body, const BodySink& sink,
                        const std::function<void(const Response&)>& on_status = {});
  // Opens a WebSocket on `target`.
  Result<std::unique_ptr<WebSocketConnection>> OpenWebSocket(std::string_view target,
                                                             const Headers& headers = {});

  // Turns a non-2xx response into an Error (reads {"error":{"code","message"}} when present).
  static Error ErrorFrom(const Response& response);

 private:
  // One BodySource per attempt: a retried request starts its body again.
  using SourceFactory = std::function<BodySource()>;
  Status StreamAttempts(http::bhttp::verb method, std::string_view target, const Headers& headers,
                        const SourceFactory& make_source, bool replayable,
                        std::optional<uint64_t> length, const BodySink& sink,
                        const std::function<void(const Response&)>& on_status);

  Endpoint endpoint_;
  std::string token_;
  ClientOptions options_;
};

// Splits NDJSON arriving in arbitrary chunks into parsed lines. Lines longer than `max_line`
// are an error rather than unbounded growth.
class NdjsonSplitter {
 public:
  explicit NdjsonSplitter(std::function<Status(const nlohmann::json&)> on_line,
                          size_t max_line = 8u << 20)
      : on_line_(std::move(on_line)), max_line_(max_line) {}
  Status Feed(std::string_view data);
  Status Finish();

 private:
  std::function<Status(const nlohmann::json&)> on_line_;
  size_t max_line_;
  std::string pending_;
};

}  // namespace berth::client
