#include "guest-agent/services.h"

namespace berth::agent {

void RegisterActivityRoutes(http::Router& router, Services& services) {
  router.Add(http::bhttp::verb::get, "/v1/activity",
             [&activity = services.activity](http::Exchange& ex) -> http::Task<void> {
               co_await ex.SendJson(http::bhttp::status::ok, activity.Snapshot());
             });
}

void RegisterLocalRoutes(http::Router&, Services&) {}

}  // namespace berth::agent
