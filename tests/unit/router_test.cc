// The router matches raw segments and decodes each on its own: an encoded '/' never makes a
// segment, and where a segment cannot hold '/' or '\' (literals, {name} parameters) an encoded
// one is a bad request, as is a parameter that is not UTF-8.
#include <catch2/catch.hpp>

#include "common/http/router.h"

namespace berth::http {
namespace {

using Match = Router::Match;

TEST_CASE("router: parameters are decoded per segment", "[router]") {
  Router::Params params;
  CHECK(Router::MatchPath("/v1/workspaces/{ws}/exec", "/v1/workspaces/my%20ws/exec", params) ==
        Match::kYes);
  CHECK(params.at("ws") == "my ws");
  CHECK(Router::MatchPath("/v1/workspaces/{ws}/exec", "/v1/workspaces/demo/ex%65c", params) ==
        Match::kYes);
  CHECK(Router::MatchPath("/v1/workspaces/{ws}", "/v1/workspaces/", params) == Match::kNo);
  CHECK(Router::MatchPath("/v1/workspaces/{ws}", "/v1/workspaces/a/b", params) == Match::kNo);
  CHECK(Router::MatchPath("/v1/health", "/v1/health/", params) == Match::kNo);
}

TEST_CASE("router: a rest parameter is a path: encoded '/' and '\\' mean what they say there",
          "[router]") {
  Router::Params params;
  CHECK(Router::MatchPath("/v1/workspaces/{ws}/files/{*rest}",
                          "/v1/workspaces/demo/files/a%2Fb/c%5Cd%FF", params) == Match::kYes);
  CHECK(params.at("ws") == "demo");
  CHECK(params.at("rest") == "/a/b/c\\d\xFF");
  CHECK(Router::MatchPath("/v1/files/{*rest}", "/v1/files", params) == Match::kYes);
  CHECK(params.at("rest") == "/");
}

TEST_CASE("router: an encoded '/' never splits a segment: the read-key escalation", "[router]") {
  // Decoded first, this was the workspace "demo" and files/{*rest} = "/exec/ws": a read key's
  // route, while the agent was sent /v1/exec/ws.
  Router::Params params;
  std::string why;
  CHECK(Router::MatchPath("/v1/workspaces/{ws}/files/{*rest}",
                          "/v1/workspaces/demo%2Ffiles/exec/ws", params, &why) == Match::kNo);
  CHECK(Router::MatchPath("/v1/workspaces/{ws}/exec/ws", "/v1/workspaces/demo%2Ffiles/exec/ws",
                          params, &why) == Match::kBadSegment);
  CHECK(why == "encoded '/' or '\\' in path segment 3 (the ws parameter)");
  CHECK(params.empty());
}

TEST_CASE("router: encoded '/' or '\\' in a parameter or a literal, or a parameter that is not "
          "UTF-8, is a bad segment", "[router]") {
  Router::Params params;
  CHECK(Router::MatchPath("/v1/workspaces/{ws}", "/v1/workspaces/demo%2Fports", params) ==
        Match::kBadSegment);
  CHECK(Router::MatchPath("/v1/workspaces/{ws}", "/v1/workspaces/demo%5Cports", params) ==
        Match::kBadSegment);
  std::string why;
  CHECK(Router::MatchPath("/v1/workspaces/{ws}", "/v1/workspaces/%FF", params, &why) ==
        Match::kBadSegment);
  CHECK(why == "path segment 3 (the ws parameter) is not valid UTF-8");
  CHECK(Router::MatchPath("/v1/workspaces/{ws}/ports", "/v1/workspaces/demo/po%2Frts", params) ==
        Match::kBadSegment);
  // Only when the rest of the pattern matches: another route's shape is simply no match.
  CHECK(Router::MatchPath("/v1/workspaces/{ws}/ports", "/v1/workspaces/demo%2Fports", params) ==
        Match::kNo);
  CHECK(Router::MatchPath("/v1/keys/{id}", "/v1/workspaces/demo%2Fports", params) == Match::kNo);
}

}  // namespace
}  // namespace berth::http
