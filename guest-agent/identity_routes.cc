// POST /v1/identity: a fork becomes its own machine (identity.h), then takes its own token.
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "common/blocking.h"
#include "common/protocol/identity.h"
#include "guest-agent/api_context.h"
#include "guest-agent/identity.h"

namespace berth::agent {
namespace {

http::Task<void> SetIdentity(ApiContext ctx, http::Exchange& ex) {
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = protocol::IdentityRequestFromJson(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  if (ctx.options.identity_root.empty()) {
    co_await ex.SendError({ErrorCode::kFailedPrecondition, "this agent changes no identity (it has no --identity-root)"});
    co_return;
  }
  auto apply = [request = *request, root = ctx.options.identity_root] { return ApplyIdentity(request, root); };
  auto applied = co_await RunBlocking(ctx.blocking, std::move(apply));
  if (!applied) {
    co_await ex.SendError(applied.error());
    co_return;
  }
  // From here on the parent's token, which this request carries, is refused.
  ctx.token = request->token;
  applied->applied.applied.push_back("token");
  nlohmann::json answer = protocol::ToJson(applied->applied);
  co_await ex.SendJson(http::bhttp::status::ok, answer);
  // The slow host keys, once the fork is handed out (identity.h). Nothing waits for them.
  if (!applied->later.empty()) {
    boost::asio::post(ctx.blocking, [keys = std::move(applied->later), guest = ctx.options.identity_root == "/"] {
      if (auto made = GenerateHostKeys(keys, guest); !made) {
        spdlog::warn("identity: the SSH host keys left for after the answer: {}", made.error().message);
      }
    });
  }
}

}  // namespace

void AddIdentityRoute(http::Router& router, ApiContext& ctx) {
  router.Add(http::bhttp::verb::post, "/v1/identity",
             [ctx](http::Exchange& ex) -> http::Task<void> { return SetIdentity(ctx, ex); });
}

}  // namespace berth::agent
