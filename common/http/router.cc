#include "common/http/router.h"

#include <fmt/format.h>

namespace berth::http {
namespace {

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 1;  // paths start with '/'
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

void Router::Add(bhttp::verb method, std::string pattern, Handler handler) {
  Route route{method, {}, std::move(handler)};
  for (auto segment : Split(pattern)) route.segments.emplace_back(segment);
  routes_.push_back(std::move(route));
}

bool Router::Match(const Route& route, std::string_view path,
                   std::map<std::string, std::string, std::less<>>& params) {
  params.clear();
  size_t pos = 1;
  for (size_t i = 0; i < route.segments.size(); ++i) {
    const std::string& seg = route.segments[i];
    if (seg.starts_with("{*")) {
      // The rest of the path, with its leading slash kept so it reads as an absolute path.
      params[seg.substr(2, seg.size() - 3)] =
          pos - 1 < path.size() ? std::string(path.substr(pos - 1)) : std::string("/");
      return true;
    }
    if (pos > path.size()) return false;
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(pos, end - pos);
    if (seg.starts_with('{')) {
      if (part.empty()) return false;
      params[seg.substr(1, seg.size() - 2)] = std::string(part);
    } else if (part != seg) {
      return false;
    }
    pos = end + 1;
  }
  return pos == path.size() + 1;
}

Task<void> Router::Dispatch(Exchange& exchange) const {
  bool path_matched = false;
  for (const auto& route : routes_) {
    if (!Match(route, exchange.path(), exchange.params())) continue;
    if (route.method != exchange.method()) {
      path_matched = true;
      continue;
    }
    co_await route.handler(exchange);
    co_return;
  }
  exchange.params().clear();
  if (path_matched) {
    co_await exchange.SendError({ErrorCode::kMethodNotAllowed,
                                 fmt::format("{} is not allowed on {}",
                                             std::string(bhttp::to_string(exchange.method())),
                                             exchange.path())});
  } else {
    co_await exchange.SendError(
        {ErrorCode::kNotFound, fmt::format("no such endpoint: {}", exchange.path())});
  }
}

}  // namespace berth::http
