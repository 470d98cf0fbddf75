// Which of a workspace's events a reader wants (GET …/events?type=&actor=&since=): the store
// turns it into SQL, the live follower applies it to each new event. Pure.
//
// Actors, who caused an event:
//   "system"        berthd itself (boots, idle stops, crashes, the reconciler)
//   "key_…"         an API key by its id, or a web UI session signed in with it
//   "guest"         the workspace's own guest (an egress refusal)
//   "preview"       a visitor through a preview link
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace berth::store {

inline constexpr std::string_view kSystemActor = "system";
inline constexpr std::string_view kGuestActor = "guest";
inline constexpr std::string_view kPreviewActor = "preview";
// An API key's actor: its id ("key_…"; an empty id is berthd's).
std::string KeyActor(std::string_view key_id);

// How many events each workspace keeps unless configured ("events_kept").
inline constexpr int64_t kDefaultEventsKept = 10000;
inline constexpr int64_t kMinEventsKept = 100;

struct EventFilter {
  int64_t after_id = 0;  // the cursor: events with a larger id
  int limit = 100;
  // Each a type ("exec") or a family, a prefix ending in '*' ("desktop_*"); empty: every type.
  std::vector<std::string> types;
  // Each an actor ("key_3f…", "system") or a kind of actor, an id's prefix before its '_'
  // ("key": every key); empty: every actor.
  std::vector<std::string> actors;
  int64_t since = 0;  // events at or after this unix time

  // Whether an event of this type, actor and time passes (the cursor is the caller's).
  bool Matches(std::string_view type, std::string_view actor, int64_t at) const;
};

// Whether an ?actor= entry names a kind ("key") rather than one actor ("key_3f…", "system"):
// it has neither '_' nor ':'. "system" is both, and matches only itself.
bool IsActorKind(std::string_view entry);

// The lists ?type= and ?actor= take: comma-separated, at most kMaxFilterEntries entries.
// Types: [a-z0-9_], 1-64 characters, optionally ending in '*'. Actors: [A-Za-z0-9_.:-], 1-128
// characters. Neither can hold a GLOB metacharacter. invalid_argument naming the bad entry.
inline constexpr size_t kMaxFilterEntries = 20;
Result<std::vector<std::string>> ParseEventTypes(std::string_view list);
Result<std::vector<std::string>> ParseEventActors(std::string_view list);
// `filter` with the types, actors and since of their text forms (?type=, ?actor=, ?since=:
// ISO 8601 UTC or unix seconds); an empty one leaves that part as it is.
Status ParseEventFilter(std::string_view types, std::string_view actors, std::string_view since,
                        EventFilter& filter);

}  // namespace berth::store
