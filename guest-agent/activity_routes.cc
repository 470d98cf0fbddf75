// GET /v1/activity and keep-awake leases, on the authenticated API and on the local token-less
// socket that code inside the guest uses (`berth-agent keepawake`):
//   POST   /v1/leases             {"reason": "make test", "duration_s": 7200}
//                                 -> 201 {"id": N, "reason": "...", "until": ISO8601}
//   POST   /v1/leases/{id}/renew  {"duration_s": N} -> 200 {"id", "reason", "until"}
//   DELETE /v1/leases/{id}        -> 204
#include <fmt/format.h>

#include "common/protocol/ports.h"
#include "guest-agent/api_context.h"

namespace berth::agent {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

protocol::Lease LeaseAnswer(ActivityTracker& activity, uint64_t id) {
  protocol::Lease lease;
  lease.id = id;
  lease.reason = activity.LeaseReason(id).value_or("");
  lease.until = protocol::Iso8601(activity.LeaseUntil(id).value_or(ActivityTracker::Clock::now()));
  return lease;
}

http::Task<void> CreateLease(ActivityTracker& activity, http::Exchange& ex) {
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = protocol::LeaseRequestFromJson(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  uint64_t id = activity.AddLease(request->reason, request->duration);
  if (id == 0) {
    co_await ex.SendError({ErrorCode::kResourceExhausted,
                           fmt::format("{} keep-awake leases are held already; release some first",
                                       ActivityTracker::kMaxLeases)});
    co_return;
  }
  nlohmann::json answer = protocol::ToJson(LeaseAnswer(activity, id));
  co_await ex.SendJson(status::created, answer);
}

http::Task<void> RenewLease(ActivityTracker& activity, http::Exchange& ex) {
  auto id = protocol::ParseLeaseId(ex.param("id"));
  if (!id) {
    co_await ex.SendError(id.error());
    co_return;
  }
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto duration = protocol::LeaseDurationFromJson(*body);
  if (!duration) {
    co_await ex.SendError(duration.error());
    co_return;
  }
  if (!activity.RenewLease(*id, *duration)) {
    co_await ex.SendError({ErrorCode::kNotFound, fmt::format("no lease {} (expired?)", *id)});
    co_return;
  }
  nlohmann::json answer = protocol::ToJson(LeaseAnswer(activity, *id));
  co_await ex.SendJson(status::ok, answer);
}

http::Task<void> DeleteLease(ActivityTracker& activity, http::Exchange& ex) {
  auto id = protocol::ParseLeaseId(ex.param("id"));
  if (!id) {
    co_await ex.SendError(id.error());
    co_return;
  }
  if (!activity.RemoveLease(*id)) {
    co_await ex.SendError({ErrorCode::kNotFound, fmt::format("no lease {} (expired?)", *id)});
    co_return;
  }
  http::bhttp::response<http::bhttp::string_body> res{status::no_content, 11};
  co_await ex.Send(std::move(res));
}

void AddRoutes(http::Router& router, ActivityTracker& activity) {
  router.Add(verb::get, "/v1/activity", [&activity](http::Exchange& ex) -> http::Task<void> {
    co_await ex.SendJson(status::ok, activity.Snapshot());
  });
  router.Add(verb::post, "/v1/leases",
             [&activity](http::Exchange& ex) { return CreateLease(activity, ex); });
  router.Add(verb::post, "/v1/leases/{id}/renew",
             [&activity](http::Exchange& ex) { return RenewLease(activity, ex); });
  router.Add(verb::delete_, "/v1/leases/{id}",
             [&activity](http::Exchange& ex) { return DeleteLease(activity, ex); });
}

}  // namespace

void AddActivityRoutes(http::Router& router, ApiContext& ctx) {
  AddRoutes(router, ctx.activity);
}

void AddLocalRoutes(http::Router& router, ApiContext& ctx) {
  AddRoutes(router, ctx.activity);
}

}  // namespace berth::agent
