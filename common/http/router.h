// Routes requests by method and path pattern. Patterns are literal segments, "{name}" (one
// segment) and a final "{*name}" (the rest of the path, slashes included, may be empty).
#pragma once

#include <string>
#include <vector>

#include "common/http/server.h"

namespace berth::http {

class Router {
 public:
  void Add(bhttp::verb method, std::string pattern, Handler handler);
  // Finds the route, binds its parameters into the exchange and runs it; 404 or 405 otherwise.
  Task<void> Dispatch(Exchange& exchange) const;

 private:
  struct Route {
    bhttp::verb method;
    std::vector<std::string> segments;
    Handler handler;
  };
  static bool Match(const Route& route, std::string_view path,
                    std::map<std::string, std::string, std::less<>>& params);
  std::vector<Route> routes_;
};

}  // namespace berth::http
