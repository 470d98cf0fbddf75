// Times on berthd's v1 API: ISO 8601 UTC strings with whole seconds ("2026-11-29T21:45:35Z")
// in answers, unix seconds inside Berth. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::v1 {

// Unix seconds -> "2026-11-29T21:45:35Z".
std::string FormatTime(int64_t unix_seconds);
// A time as an answer carries it: null when absent.
nlohmann::json TimeOrNull(const std::optional<int64_t>& unix_seconds);

// "YYYY-MM-DDTHH:MM:SS" with "Z" or "+00:00" (a fraction of a second is accepted and dropped)
// -> unix seconds. invalid_argument for anything else, fields out of range included.
Result<int64_t> ParseTime(std::string_view text);

// A time as a caller writes it in a query (?from=, ?to=): unix seconds (up to 12 digits), or
// ISO 8601 UTC as above, where the zone may be left out (it is UTC).
Result<int64_t> ParseTimeArgument(std::string_view text);

}  // namespace berth::v1
