#include "mcp/mcp_http.h"

#include <boost/beast/core/string.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/blocking.h"
#include "common/json.h"
#include "common/random.h"
#include "mcp/base_url.h"
#include "mcp/http_backend.h"

namespace berth::mcp {
namespace {

namespace bhttp = http::bhttp;
using http::Exchange;
using http::Task;
using nlohmann::json;

constexpr std::string_view kSessionHeader = "Mcp-Session-Id";
constexpr std::string_view kVersionHeader = "MCP-Protocol-Version";

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A JSON answer with extra headers. The body is built by the caller into a named local (g++ 12
// and braced json lists inside co_await do not mix).
// Headers come by pointer: a defaulted `const HeaderList& = {}` would build a vector temporary
// inside every co_await expression that omits it, which g++ 12 may destroy twice.
Task<void> SendJsonBody(Exchange& ex, bhttp::status status, const json& body,
                        const HeaderList* headers = nullptr) {
  bhttp::response<bhttp::string_body> res{status, ex.request().version()};
  res.set(bhttp::field::content_type, "application/json");
  if (headers) {
    for (const auto& [name, value] : *headers) res.set(name, value);
  }
  res.body() = jsonrpc::Dump(body);
  res.body().push_back('\n');
  co_await ex.Send(std::move(res));
}

// An HTTP-level refusal with a JSON-RPC error body (id null), as the MCP SDKs send them.
Task<void> SendRpcError(Exchange& ex, bhttp::status status, int code, std::string_view message,
                        const HeaderList* headers = nullptr) {
  json body = jsonrpc::Error(nullptr, code, message);
  co_await SendJsonBody(ex, status, body, headers);
}

Task<void> SendEmpty(Exchange& ex, bhttp::status status) {
  bhttp::response<bhttp::string_body> res{status, ex.request().version()};
  res.content_length(0);
  co_await ex.Send(std::move(res));
}

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !boost::beast::iequals(authorization.substr(0, kScheme.size()), kScheme)) {
    return {};
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

// "http://host:port" → "host:port" (lowercase); empty when it is not such an origin.
std::string OriginAuthority(std::string_view origin) {
  size_t scheme = origin.find("://");
  if (scheme == std::string_view::npos) return {};
  std::string out(origin.substr(scheme + 3));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

bool IsLoopbackAuthority(std::string_view authority) {
  for (std::string_view host : {"localhost", "127.0.0.1", "[::1]"}) {
    if (authority == host || (authority.starts_with(host) && authority.size() > host.size() &&
                              authority[host.size()] == ':')) {
      return true;
    }
  }
  return false;
}

// Browsers send Origin; other clients do not. A page on another origin must not drive a
// berthd it reached by DNS rebinding: the origin must be the host the request went to (or both
// on loopback).
bool OriginAllowed(const Exchange& ex) {
  std::string_view origin = ex.header(bhttp::field::origin);
  if (origin.empty()) return true;
  std::string authority = OriginAuthority(origin);
  if (authority.empty()) return false;
  std::string host(ex.header(bhttp::field::host));
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (authority == host) return true;
  return IsLoopbackAuthority(authority) && IsLoopbackAuthority(host);
}

bool IsInitialize(const json& message) {
  return message.is_object() && message.contains("method") && message["method"] == "initialize";
}

// A single message that is not valid JSON-RPC earns a 400, like a body that is not JSON (as
// the SDKs' servers answer); errors of valid requests (unknown method, bad params) are 200.
bool IsMalformed(const json& response) {
  if (!response.is_object() || !response.contains("error")) return false;
  const json& code = response["error"]["code"];
  return code == jsonrpc::kInvalidRequest || code == jsonrpc::kParseError;
}

Task<void> HandleDelete(Exchange& ex, McpHttpContext& ctx, const std::string& key_hash) {
  std::string id(ex.header(kSessionHeader));
  if (id.empty()) {
    co_await SendRpcError(ex, bhttp::status::bad_request, jsonrpc::kServerError,
                          "Bad Request: Mcp-Session-Id header is required");
    co_return;
  }
  if (!ctx.sessions().Remove(id, key_hash)) {
    co_await SendRpcError(ex, bhttp::status::not_found, jsonrpc::kSessionNotFound,
                          "Session not found");
    co_return;
  }
  co_await SendEmpty(ex, bhttp::status::ok);
}

Task<void> HandleInitialize(Exchange& ex, McpHttpContext& ctx, const json& payload,
                            const std::string& key, const std::string& key_hash) {
  if (!ctx.ready()) {
    co_await SendRpcError(ex, bhttp::status::service_unavailable, jsonrpc::kServerError,
                          "MCP is not ready: berthd's address is not set yet");
    co_return;
  }
  // The caller must be good now; later calls show its fate as tool errors.
  Exchange* exchange = &ex;
  const std::string* key_ptr = &key;
  McpHttpContext* context = &ctx;
  auto open = [context, exchange, key_ptr] { return context->OpenBackend(*exchange, *key_ptr); };
  Result<std::shared_ptr<Backend>> backend = co_await RunBlocking(ctx.pool(), open);
  if (!backend) {
    const Error& e = backend.error();
    if (e.code == ErrorCode::kUnauthenticated) {
      HeaderList headers = {{"WWW-Authenticate", "Bearer"}};
      co_await SendRpcError(ex, bhttp::status::unauthorized, jsonrpc::kServerError,
                            "Unauthorized: berthd refused the API key", &headers);
    } else {
      co_await SendRpcError(ex, bhttp::status::service_unavailable, jsonrpc::kServerError,
                            e.message);
    }
    co_return;
  }
  // /mcp?workspace=NAME: the session's default workspace, as `berth mcp --workspace NAME`.
  std::string default_workspace = ex.query().Get("workspace").value_or("");
  auto session = std::make_shared<McpSession>(std::move(*backend), default_workspace);
  McpSession* raw = session.get();
  const json* message = &payload;
  auto handle = [raw, message] { return raw->Handle(*message); };
  std::optional<json> response = co_await RunBlocking(ctx.pool(), handle);
  if (!response || !response->is_object() || !response->contains("result")) {
    // initialize refused (bad params): no session.
    json body = response ? *response : jsonrpc::Error(nullptr, jsonrpc::kInvalidRequest,
                                                      "Invalid Request");
    co_await SendJsonBody(ex, bhttp::status::bad_request, body);
    co_return;
  }
  std::string id = ctx.sessions().Add(std::move(session), key_hash);
  spdlog::info("mcp: session {}… opened ({})", id.substr(0, 8), raw->protocol_version());
  HeaderList headers = {{std::string(kSessionHeader), id}};
  co_await SendJsonBody(ex, bhttp::status::ok, *response, &headers);
}

Task<void> HandlePost(Exchange& ex, McpHttpContext& ctx, const std::string& key,
                      const std::string& key_hash) {
  if (auto version = ex.header(kVersionHeader);
      !version.empty() && !IsSupportedProtocolVersion(version)) {
    std::string message = fmt::format("Bad Request: unsupported protocol version {} (supported: {})",
                                      version, fmt::join(kSupportedProtocolVersions, ", "));
    co_await SendRpcError(ex, bhttp::status::bad_request, jsonrpc::kServerError, message);
    co_return;
  }
  // The session before the body: a request of no session of this key can only be an
  // initialize, which is small; one naming a session this key does not have reads nothing.
  // Only a key's own live session may send a large body (a tool call's file content).
  std::string id(ex.header(kSessionHeader));
  std::shared_ptr<McpSession> session;
  if (!id.empty()) {
    session = ctx.sessions().Find(id, key_hash);
    if (!session) {
      co_await SendRpcError(ex, bhttp::status::not_found, jsonrpc::kSessionNotFound,
                            "Session not found");
      co_return;
    }
  }
  size_t limit = session ? ctx.options().max_body_bytes : ctx.options().max_initialize_bytes;
  auto body = co_await ex.ReadBody(limit, ctx.options().body_timeout);
  if (!body) {
    auto status = body.error().code == ErrorCode::kTooLarge ? bhttp::status::payload_too_large
                                                            : bhttp::status::bad_request;
    co_await SendRpcError(ex, status, jsonrpc::kServerError, body.error().message);
    co_return;
  }
  auto parsed = ParseJson(*body);
  if (!parsed) {
    json refused = jsonrpc::ParseErrorResponse(parsed.error());
    co_await SendJsonBody(ex, bhttp::status::bad_request, refused);
    co_return;
  }
  const json& payload = *parsed;
  bool initialize = IsInitialize(payload);
  if (!initialize && payload.is_array()) {
    for (const auto& item : payload) {
      if (IsInitialize(item)) {
        co_await SendRpcError(ex, bhttp::status::bad_request, jsonrpc::kInvalidRequest,
                              "Invalid Request: initialize must be sent alone, not in a batch");
        co_return;
      }
    }
  }
  if (initialize) {
    co_await HandleInitialize(ex, ctx, payload, key, key_hash);
    co_return;
  }
  if (!session) {
    co_await SendRpcError(ex, bhttp::status::bad_request, jsonrpc::kServerError,
                          "Bad Request: Mcp-Session-Id header is required (send initialize "
                          "first)");
    co_return;
  }
  McpSession* raw = session.get();
  const json* message = &payload;
  auto handle = [raw, message] { return raw->Handle(*message); };
  std::optional<json> response = co_await RunBlocking(ctx.pool(), handle);
  if (!response) {
    co_await SendEmpty(ex, bhttp::status::accepted);
    co_return;
  }
  auto status = IsMalformed(*response) ? bhttp::status::bad_request : bhttp::status::ok;
  co_await SendJsonBody(ex, status, *response);
}

}  // namespace

McpHttpContext::McpHttpContext(boost::asio::thread_pool& pool, BackendFactory factory,
                               McpHttpOptions options)
    : pool_(pool),
      options_(options),
      sessions_(options.max_sessions, options.max_sessions_per_key, options.session_idle_ttl),
      factory_(std::move(factory)) {}

McpHttpContext::McpHttpContext(boost::asio::thread_pool& pool, McpHttpOptions options)
    : McpHttpContext(pool, BackendFactory(), options) {}

McpHttpContext::McpHttpContext(std::string_view api_url, boost::asio::thread_pool& pool,
                               McpHttpOptions options)
    : McpHttpContext(pool, options) {
  if (auto status = SetApiUrl(api_url); !status) {
    spdlog::error("mcp: bad berthd URL {}: {}", api_url, status.error().message);
  }
}

Status McpHttpContext::SetApiUrl(std::string_view api_url) {
  auto endpoint = ParseBaseUrl(api_url);
  if (!endpoint) return Fail(endpoint.error());
  std::lock_guard lock(mutex_);
  api_endpoint_ = std::move(*endpoint);
  return {};
}

std::optional<Endpoint> McpHttpContext::api_endpoint() const {
  std::lock_guard lock(mutex_);
  return api_endpoint_;
}

bool McpHttpContext::ready() const { return factory_ || api_endpoint().has_value(); }

Result<std::shared_ptr<Backend>> McpHttpContext::OpenBackend(Exchange& ex,
                                                             const std::string& api_key) {
  if (factory_) return factory_(ex, api_key);
  auto endpoint = api_endpoint();
  if (!endpoint) return Fail(ErrorCode::kUnavailable, "MCP is not ready: berthd's address is not set yet");
  auto backend = std::make_shared<HttpBackend>(*endpoint, api_key);
  // The key is checked once here; a key revoked later fails the tools' calls as it fails the API.
  auto me = backend->WhoAmI(DeadlineIn(std::chrono::seconds(30)));
  if (!me) {
    if (me.error().code == ErrorCode::kUnauthenticated) return Fail(me.error());
    return Fail(ErrorCode::kUnavailable,
                fmt::format("cannot check the API key: {}", me.error().message));
  }
  return std::shared_ptr<Backend>(std::move(backend));
}

Task<void> ServeMcpHttp(Exchange& ex, McpHttpContext& ctx) {
  auto method = ex.method();
  if (method != bhttp::verb::post && method != bhttp::verb::delete_) {
    // GET would open a server-to-client stream; this server has nothing to send on one.
    HeaderList headers = {{"Allow", "POST, DELETE"}};
    co_await SendRpcError(ex, bhttp::status::method_not_allowed, jsonrpc::kServerError,
                          "Method Not Allowed: no server-initiated stream; POST messages",
                          &headers);
    co_return;
  }
  if (ctx.options().check_origin && !OriginAllowed(ex)) {
    co_await SendRpcError(ex, bhttp::status::forbidden, jsonrpc::kServerError,
                          "Forbidden: Origin does not match the host");
    co_return;
  }
  std::string key(BearerToken(ex.header(bhttp::field::authorization)));
  if (key.empty()) {
    HeaderList headers = {{"WWW-Authenticate", "Bearer"}};
    co_await SendRpcError(ex, bhttp::status::unauthorized, jsonrpc::kServerError,
                          "Unauthorized: send Authorization: Bearer <Berth API key>", &headers);
    co_return;
  }
  std::string key_hash = Sha256Hex(key);
  if (method == bhttp::verb::delete_) {
    co_await HandleDelete(ex, ctx, key_hash);
    co_return;
  }
  co_await HandlePost(ex, ctx, key, key_hash);
}

}  // namespace berth::mcp
