// Routes requests by method and path pattern. Patterns are literal segments, "{name}" (one
// segment) and a final "{*name}" (the rest of the path, slashes included, may be empty).
//
// Matching splits the raw (still encoded) path at its '/' and decodes each segment on its
// own, so an encoded slash never creates a segment: "/v1/workspaces/demo%2Ffiles/exec/ws" is
// the workspace "demo/files" followed by "exec/ws", never the workspace "demo" and a file.
// Where a segment cannot hold a '/' or '\' (a literal, or a "{name}" parameter) an encoded one
// means nothing, and such a request is refused with 400, as is a parameter that is not valid
// UTF-8 (ids, names and tags are text). Only a "{*name}" rest, a path in its own right, keeps
// them: there "%2F" is a separator like '/', and '\' is an ordinary file name character.
#pragma once

#include <string>
#include <vector>

#include "common/http/server.h"

namespace berth::http {

class Router {
 public:
  void Add(bhttp::verb method, std::string pattern, Handler handler);
  // Finds the route, binds its (decoded) parameters into the exchange and runs it; 400 for a
  // bad segment (see above), 405 or 404 when no route matches.
  Task<void> Dispatch(Exchange& exchange) const;

  enum class Match { kNo, kYes, kBadSegment };
  using Params = std::map<std::string, std::string, std::less<>>;
  // Pure: matches a raw path (no query) against a pattern, binding decoded parameters. On
  // kBadSegment, `why` says what was wrong. Exposed for tests.
  static Match MatchPath(std::string_view pattern, std::string_view raw_path, Params& params,
                         std::string* why = nullptr);

 private:
  struct Route {
    bhttp::verb method;
    std::vector<std::string> segments;
    Handler handler;
  };
  static Match MatchSegments(const std::vector<std::string>& segments, std::string_view raw_path,
                             Params& params, std::string* why);
  std::vector<Route> routes_;
};

}  // namespace berth::http
