#include "common/http/router.h"

#include <fmt/format.h>

#include "common/protocol/exec.h"

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

Router::Match Router::MatchPath(std::string_view pattern, std::string_view raw_path,
                                Params& params, std::string* why) {
  std::vector<std::string> segments;
  for (auto segment : Split(pattern)) segments.emplace_back(segment);
  return MatchSegments(segments, raw_path, params, why);
}

Router::Match Router::MatchSegments(const std::vector<std::string>& segments,
                                    std::string_view path, Params& params, std::string* why) {
  params.clear();
  if (!path.starts_with('/')) return Match::kNo;
  std::optional<std::string> bad;
  size_t pos = 1;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& seg = segments[i];
    if (seg.starts_with("{*")) {
      // The rest of the path, with its leading slash kept so it reads as an absolute path.
      std::string_view rest = pos - 1 < path.size() ? path.substr(pos - 1) : std::string_view("/");
      auto decoded = PercentDecode(rest);
      if (!decoded) return Match::kNo;  // Exchange::Prepare has refused such paths already
      params[seg.substr(2, seg.size() - 3)] = std::move(*decoded);
      break;
    }
    if (pos > path.size()) return Match::kNo;
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    auto part = PercentDecode(path.substr(pos, end - pos));
    if (!part) return Match::kNo;
    pos = end + 1;
    bool meaningless = part->find_first_of("/\\") != std::string::npos;
    if (!seg.starts_with('{')) {
      if (*part == seg) continue;
      // "files%2Fx" where "files" is expected: refused if the rest of the pattern matches, so
      // the answer does not depend on which route happens to be tried first.
      if (!meaningless) return Match::kNo;
      if (!bad) bad = fmt::format("encoded '/' or '\\' in path segment {}", i + 1);
      continue;
    }
    if (part->empty()) return Match::kNo;
    if (meaningless && !bad) {
      bad = fmt::format("encoded '/' or '\\' in path segment {} (the {} parameter)", i + 1,
                        seg.substr(1, seg.size() - 2));
    } else if (!protocol::IsValidUtf8(*part) && !bad) {
      bad = fmt::format("path segment {} (the {} parameter) is not valid UTF-8", i + 1,
                        seg.substr(1, seg.size() - 2));
    }
    params[seg.substr(1, seg.size() - 2)] = std::move(*part);
  }
  if (segments.empty() || !segments.back().starts_with("{*")) {
    if (pos != path.size() + 1) return Match::kNo;
  }
  if (bad) {
    params.clear();
    if (why != nullptr) *why = std::move(*bad);
    return Match::kBadSegment;
  }
  return Match::kYes;
}

Task<void> Router::Dispatch(Exchange& exchange) const {
  std::string_view raw_path = SplitTarget(exchange.target()).first;
  // Order-independent: a route that matches wins over one that finds a bad segment (a file
  // path may hold what a parameter may not), and a bad segment is a 400 only when nothing
  // matches.
  const Route* found = nullptr;
  bool path_matched = false;
  std::optional<std::string> bad_segment;
  Params params;
  for (const auto& route : routes_) {
    std::string why;
    auto match = MatchSegments(route.segments, raw_path, params, &why);
    if (match == Match::kBadSegment) {
      if (!bad_segment) bad_segment = std::move(why);
      continue;
    }
    if (match == Match::kNo) continue;
    if (route.method != exchange.method()) {
      path_matched = true;
      continue;
    }
    found = &route;
    exchange.params() = std::move(params);
    break;
  }
  if (found != nullptr) {
    co_await found->handler(exchange);
    co_return;
  }
  exchange.params().clear();
  if (path_matched) {
    Error error(ErrorCode::kMethodNotAllowed,
                fmt::format("{} is not allowed on {}",
                            std::string(bhttp::to_string(exchange.method())), exchange.path()));
    co_await exchange.SendError(error);
  } else if (bad_segment) {
    Error error(ErrorCode::kInvalidArgument, fmt::format("bad request path: {}", *bad_segment));
    co_await exchange.SendError(error);
  } else {
    Error error(ErrorCode::kNotFound, fmt::format("no such endpoint: {}", exchange.path()));
    co_await exchange.SendError(error);
  }
}

}  // namespace berth::http
