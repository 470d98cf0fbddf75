// Shared by the berthd hardening tests (issue 12): one berthd for all of them (in-process, on
// libvirt's test driver with real host agents) and small helpers.
#pragma once

#include <set>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "common/json.h"
#include "tests/support/test_berthd.h"

namespace berth::testing {

inline TestBerthd& HardeningBerthd() {
  static TestBerthd berthd;
  return berthd;
}

inline const std::string& Deep200K() {
  static const std::string deep(200 * 1024, '[');
  return deep;
}

// The status of `method target` with `body` as JSON.
inline int StatusOf(client::ApiClient& api, http::bhttp::verb method, const std::string& target,
                    const nlohmann::json& body) {
  auto r = api.Request(method, target, DumpJson(body), "application/json");
  REQUIRE(r);
  return r->status;
}

// A key of `scope` for `tenant`, made with the operator key: {id, secret}.
inline std::pair<std::string, std::string> MintKey(const std::string& tenant,
                                                   const std::string& scope) {
  auto op = HardeningBerthd().Admin();
  auto made = op.Json(http::bhttp::verb::post, "/v1/keys",
                      nlohmann::json{{"tenant", tenant}, {"scope", scope}});
  REQUIRE(made);
  return {(*made)["id"].get<std::string>(), (*made)["key"].get<std::string>()};
}

}  // namespace berth::testing
