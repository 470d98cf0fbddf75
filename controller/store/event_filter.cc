#include "controller/store/event_filter.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/v1/time.h"

namespace berth::store {
namespace {

bool TypeChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }
bool ActorChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

template <typename Check>
Result<std::vector<std::string>> SplitList(std::string_view list, std::string_view what, Check check) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view entry = list.substr(pos, comma - pos);
    pos = comma + 1;
    if (entry.empty()) continue;  // "a,,b" and a trailing comma are forgiven
    if (!check(entry)) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' is not a valid {}", entry.substr(0, 140), what));
    }
    if (out.size() == kMaxFilterEntries) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("at most {} entries in the {} list", kMaxFilterEntries, what));
    }
    out.emplace_back(entry);
  }
  return out;
}

}  // namespace

std::string KeyActor(std::string_view key_id) {
  return key_id.empty() ? std::string(kSystemActor) : std::string(key_id);
}

bool IsActorKind(std::string_view entry) {
  return entry.find('_') == std::string_view::npos && entry.find(':') == std::string_view::npos;
}

bool EventFilter::Matches(std::string_view type, std::string_view actor, int64_t at) const {
  if (at < since) return false;
  if (!types.empty()) {
    bool any = std::ranges::any_of(types, [&](const std::string& t) {
      if (!t.empty() && t.back() == '*') return type.starts_with(std::string_view(t).substr(0, t.size() - 1));
      return type == t;
    });
    if (!any) return false;
  }
  if (!actors.empty()) {
    bool any = std::ranges::any_of(actors, [&](const std::string& a) {
      if (actor == a) return true;
      return IsActorKind(a) && actor.size() > a.size() && actor.starts_with(a) && actor[a.size()] == '_';
    });
    if (!any) return false;
  }
  return true;
}

Status ParseEventFilter(std::string_view types, std::string_view actors, std::string_view since,
                        EventFilter& filter) {
  if (!types.empty()) {
    auto parsed = ParseEventTypes(types);
    if (!parsed) return Fail(parsed.error());
    filter.types = std::move(*parsed);
  }
  if (!actors.empty()) {
    auto parsed = ParseEventActors(actors);
    if (!parsed) return Fail(parsed.error());
    filter.actors = std::move(*parsed);
  }
  if (!since.empty()) {
    auto t = v1::ParseTimeArgument(since);
    if (!t) return Fail(t.error());
    filter.since = *t;
  }
  return {};
}

Result<std::vector<std::string>> ParseEventTypes(std::string_view list) {
  return SplitList(list, "event type", [](std::string_view t) {
    std::string_view name = t.ends_with('*') ? t.substr(0, t.size() - 1) : t;
    return !name.empty() && name.size() <= 64 && std::ranges::all_of(name, TypeChar);
  });
}

Result<std::vector<std::string>> ParseEventActors(std::string_view list) {
  return SplitList(list, "actor", [](std::string_view a) {
    return a.size() <= 128 && std::ranges::all_of(a, ActorChar);
  });
}

}  // namespace berth::store
