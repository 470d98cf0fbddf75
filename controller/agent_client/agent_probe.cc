#include "controller/agent_client/agent_probe.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "common/http/types.h"
#include "common/json.h"

namespace berth::agent_client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

Error ProbeError(const boost::system::error_code& ec, std::string_view step) {
  if (ec == beast::error::timeout) {
    return Error(ErrorCode::kDeadlineExceeded, fmt::format("the agent did not answer in time ({})", step));
  }
  return Error(ErrorCode::kUnavailable, fmt::format("the agent cannot be reached ({}): {}", step, ec.message()));
}

// One call to the agent, its answer a JSON object of at most kMaxActivityAnswer bytes.
asio::awaitable<Result<nlohmann::json>> AskAgent(const AgentLink& link, bhttp::verb verb, const char* target,
                                                 std::chrono::milliseconds deadline, std::string body = {},
                                                 size_t max_answer = kMaxActivityAnswer) {
  auto endpoint = link.endpoint.ToAsio();
  if (!endpoint) co_return Fail(endpoint.error());
  auto executor = co_await asio::this_coro::executor;
  http::Stream stream(executor);
  // Set once: every step below counts against the same deadline.
  stream.expires_after(deadline);
  {
    auto [ec] = co_await stream.async_connect(*endpoint, kTuple);
    if (ec) co_return Fail(ProbeError(ec, "connect"));
  }
  bhttp::request<bhttp::string_body> req{verb, target, 11};
  req.set(bhttp::field::host, "berth-agent");
  req.set(bhttp::field::authorization, "Bearer " + link.token);
  if (!body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = std::move(body);
  }
  req.keep_alive(false);
  req.prepare_payload();
  {
    auto [ec, n] = co_await bhttp::async_write(stream, req, kTuple);
    if (ec) co_return Fail(ProbeError(ec, "request"));
  }
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(8 * 1024);
  parser.body_limit(max_answer);
  {
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, kTuple);
    if (ec) co_return Fail(ProbeError(ec, "answer"));
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
  const auto& res = parser.get();
  if (res.result_int() / 100 != 2) {  // 202: a background exec, started
    // The agent's own reason, when it gave one (the guest's words: cut short).
    std::string why;
    if (auto error = ParseJson(res.body()); error && error->is_object() && error->contains("error") &&
                                            (*error)["error"].is_object()) {
      auto message = OptionalString((*error)["error"], "message");
      if (message && message->has_value()) why = ": " + (*message)->substr(0, 512);
    }
    co_return Fail(ErrorCode::kUnavailable, fmt::format("the agent answered {} to {} {}{}", res.result_int(),
                                                        bhttp::to_string(verb), target, why));
  }
  // A guest's text: depth-bounded, so no later copy of it can overflow a stack.
  auto parsed = ParseJson(res.body());
  if (!parsed || !parsed->is_object()) {
    co_return Fail(ErrorCode::kUnavailable, fmt::format("the agent's answer to {} is not a JSON object", target));
  }
  co_return std::move(*parsed);
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> ProbeActivity(const AgentLink& link, std::chrono::milliseconds deadline) {
  co_return co_await AskAgent(link, bhttp::verb::get, "/v1/activity", deadline);
}

asio::awaitable<Result<nlohmann::json>> SyncGuest(const AgentLink& link, std::chrono::milliseconds deadline) {
  co_return co_await AskAgent(link, bhttp::verb::post, "/v1/sync", deadline);
}

asio::awaitable<Result<nlohmann::json>> GiveIdentity(const AgentLink& link, protocol::IdentityRequest request,
                                                     std::chrono::milliseconds deadline) {
  std::string body = DumpJson(protocol::ToJson(request));
  co_return co_await AskAgent(link, bhttp::verb::post, "/v1/identity", deadline, std::move(body));
}

asio::awaitable<Result<nlohmann::json>> RunInGuest(const AgentLink& link, protocol::ExecRequest request,
                                                   std::chrono::milliseconds deadline) {
  std::string body = DumpJson(request.ToJson());
  co_return co_await AskAgent(link, bhttp::verb::post, "/v1/exec", deadline, std::move(body));
}

asio::awaitable<Result<nlohmann::json>> DiffInGuest(const AgentLink& link, protocol::DiffRequest request,
                                                    std::chrono::milliseconds deadline) {
  std::string body = DumpJson(protocol::ToJson(request));
  co_return co_await AskAgent(link, bhttp::verb::post, "/v1/diff", deadline, std::move(body), kMaxDiffAnswer);
}

}  // namespace berth::agent_client
