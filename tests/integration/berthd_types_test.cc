// Bodies whose fields have the wrong type (a tenant's name given as a number, ...) are the
// caller's mistake: a 400 naming the field, never the 500 of a json::value() that threw.
#include <catch2/catch.hpp>

#include "tests/integration/berthd_hardening_util.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::HardeningBerthd;
using testing::MintKey;
using testing::StatusOf;

}  // namespace

TEST_CASE("berthd: fields of the wrong type are a 400 naming the field", "[berthd][types]") {
  auto& d = HardeningBerthd();
  auto op = d.Admin();
  struct Case {
    verb method;
    std::string target;
    json body;
  };
  std::vector<Case> cases = {
      {verb::post, "/v1/tenants", {{"name", 5}}},
      {verb::post, "/v1/tenants", json::array({"x"})},
      {verb::post, "/v1/tenants", "name"},
      {verb::post, "/v1/keys", {{"tenant", 5}, {"scope", "read"}}},
      {verb::post, "/v1/keys", {{"scope", 5}}},
      {verb::post, "/v1/keys", {{"scope", "read"}, {"name", json::object()}}},
      {verb::post, "/v1/keys", json::array()},
      {verb::post, "/v1/keys", 7},
      {verb::post, "/v1/workspaces", {{"name", 5}}},
      {verb::post, "/v1/workspaces", {{"name", "t"}, {"labels", 5}}},
      {verb::post, "/v1/workspaces", {{"name", "t"}, {"env", {{"A", 1}}}}},
      {verb::post, "/v1/workspaces", {{"name", "t"}, {"cpus", "2"}}},
      {verb::post, "/v1/workspaces", {{"name", "t"}, {"idle_action", 1}}},
      {verb::post, "/v1/workspaces/nope/wait", {{"state", 5}}},
      {verb::post, "/v1/workspaces/nope/wait", {{"timeout_s", "10"}}},
      {verb::post, "/v1/workspaces/nope/wait", json::array()},
      {verb::post, "/v1/workspaces/nope/stop", {{"force", "yes"}}},
  };
  for (const auto& c : cases) {
    auto r = op.Request(c.method, c.target, DumpJson(c.body), "application/json");
    INFO(c.target << " " << DumpJson(c.body));
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(client::ApiClient::ErrorFrom(*r).code == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("berthd: usage times outside 1970..2200 are a 400", "[berthd][types]") {
  auto op = HardeningBerthd().Admin();
  // Year 206 and year 33658: both overflowed a nanosecond time point (found by berthd_fuzz).
  for (const char* query : {"from=0206-01-01T00:00:00Z", "to=999999999999", "from=2300-01-01T00:00:00Z"}) {
    auto r = op.Request(verb::get, std::string("/v1/usage?") + query);
    INFO(query);
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  auto fine = op.Request(verb::get, "/v1/usage?from=2026-01-01T00:00:00Z&to=2100000000");
  REQUIRE(fine);
  CHECK(fine->status == 200);
}

}  // namespace berth
