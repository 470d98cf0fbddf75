// JSON in and out of Berth, for text it does not trust. Every parse in the tree goes through
// ParseJson and every serialisation through DumpJson (tests/lint/json_calls checks it):
//  - ParseJson refuses nesting deeper than a small limit while it parses. nlohmann parses
//    iteratively, but copying or dumping a value recurses once per level: 200 KB of '[' is
//    100k levels, enough to overflow a thread's stack wherever the value is copied later (a
//    guest's /v1/activity answer in the idle loop, an MCP initialize's params).
//  - DumpJson replaces invalid UTF-8 with U+FFFD instead of throwing. Parsed JSON is always
//    valid UTF-8, but strings built from a guest's bytes (console lines, file names, error
//    messages quoting either) need not be, and nlohmann's default dump throws on them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth {

// Containers (objects and arrays) nested deeper than this are refused. Berth's own messages
// nest at most five or six levels; 64 leaves room for tool arguments and labels, and keeps
// the recursion of a copy or a dump a few kilobytes of stack.
inline constexpr size_t kMaxJsonDepth = 64;

// Parses `text` as one JSON value (nothing but whitespace may follow it). invalid_argument
// when it is not JSON or nests deeper than `max_depth`; the message says which, and where.
// Never throws, never recurses per level. Any thread.
Result<nlohmann::json> ParseJson(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Serialises `value` (compact when `indent` < 0); invalid UTF-8 in strings becomes U+FFFD.
// `ensure_ascii` escapes everything outside ASCII (for HTTP header values). Never throws.
std::string DumpJson(const nlohmann::json& value, int indent = -1, bool ensure_ascii = false);

// Typed reads of a field of an untrusted object, for request bodies: json::value() throws
// when the field has another type (a 500 for what is the caller's mistake). Each returns
// nullopt when `object` has no such field or it is null, invalid_argument naming the field
// when it has another type. `object` must be an object.
Result<std::optional<std::string>> OptionalString(const nlohmann::json& object,
                                                  std::string_view key);
Result<std::optional<bool>> OptionalBool(const nlohmann::json& object, std::string_view key);
Result<std::optional<int64_t>> OptionalInt(const nlohmann::json& object, std::string_view key);

}  // namespace berth
