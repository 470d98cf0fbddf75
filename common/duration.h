// Durations as people write them on command lines ("90s", "30m", "1h30m", "2d", "1w"; a bare
// number is seconds) and as Berth prints them. The API itself carries integer seconds; this is
// the one parser and the one printer for the CLI, the agent's keep-awake and MCP. Pure.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/error.h"

namespace berth {

// The longest duration ParseDuration takes: ten years is past any timeout, idle time or lease,
// and keeps the arithmetic far from overflowing.
inline constexpr std::chrono::seconds kMaxParsedDuration{10LL * 366 * 24 * 3600};

// "90", "90s", "30m", "1h30m", "2d", "1w" -> seconds. Units s, m, h, d, w, each after its
// digits; a bare number is seconds, but only alone ("1h30" is ambiguous). No signs, spaces or
// fractions. invalid_argument (with examples) for anything else or past kMaxParsedDuration.
// Zero is a duration; callers that need a positive one check for it.
Result<std::chrono::seconds> ParseDuration(std::string_view text);

// Seconds as "45s", "30m", "1h30m", "2d4h" (the two largest units; days drop minutes and
// seconds, hours drop seconds). "-" for a negative duration.
std::string FormatDuration(std::chrono::seconds duration);

}  // namespace berth
