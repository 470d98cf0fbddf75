// Reads the fields of one JSON object strictly and without throwing, for the v1 wire types'
// parsers: a field of the wrong type, out of its bounds or missing is recorded (the first
// problem only, naming the object and the field) and later reads do nothing. Answers may carry
// fields this reader is not asked about (a newer berthd): they are left alone; requests check
// for them with OnlyFields. Pure.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::v1 {

// Bounds on what an answer may carry, each generous for what berthd sends and small enough
// that a hostile or broken server cannot make a client hold much.
inline constexpr size_t kMaxIdBytes = 256;          // ids, names, enum words, key prefixes
inline constexpr size_t kMaxTextBytes = 64 * 1024;  // messages, error texts
inline constexpr size_t kMaxMapEntries = 1024;      // labels, env (berthd allows 64 and 256)
inline constexpr size_t kMaxMapValueBytes = 16 * 1024;

using StringMap = std::map<std::string, std::string>;

class Reader {
 public:
  // `what` names the object in errors ("workspace", "event").
  Reader(const nlohmann::json& object, std::string_view what);

  Reader& String(const char* key, std::string& out, size_t max_bytes = kMaxIdBytes);
  // Absent or null: nullopt.
  Reader& OptString(const char* key, std::optional<std::string>& out,
                    size_t max_bytes = kMaxIdBytes);
  Reader& Bool(const char* key, bool& out);
  Reader& OptBool(const char* key, std::optional<bool>& out);
  template <class Int>
  Reader& Integer(const char* key, Int& out, int64_t min = std::numeric_limits<Int>::min(),
                  int64_t max = std::numeric_limits<Int>::max()) {
    if (auto value = IntegerAt(key, min, max, false)) out = static_cast<Int>(**value);
    return *this;
  }
  template <class Int>
  Reader& OptInteger(const char* key, std::optional<Int>& out,
                     int64_t min = std::numeric_limits<Int>::min(),
                     int64_t max = std::numeric_limits<Int>::max()) {
    if (auto value = IntegerAt(key, min, max, true)) {
      out = *value ? std::optional<Int>(static_cast<Int>(**value)) : std::nullopt;
    }
    return *this;
  }
  // ISO 8601 UTC ("2026-11-29T21:45:35Z") -> unix seconds.
  Reader& Time(const char* key, int64_t& out);
  Reader& OptTime(const char* key, std::optional<int64_t>& out);
  // An object of strings (labels, env).
  Reader& Strings(const char* key, StringMap& out, size_t max_entries = kMaxMapEntries);
  Reader& OptStrings(const char* key, std::optional<StringMap>& out,
                     size_t max_entries = kMaxMapEntries);
  // Any JSON object (an event's data), kept as it is.
  Reader& Object(const char* key, nlohmann::json& out);

  // Fails on any field not in `known`: for requests, where a typo must not pass unnoticed.
  Reader& OnlyFields(std::initializer_list<std::string_view> known);

  // The field, when present and not null (for fields a parser reads itself); nullptr else.
  const nlohmann::json* Find(const char* key) const;
  // Records a problem found by the caller ("'state' is not one of ...").
  void Problem(std::string message);
  bool ok() const { return !error_; }
  // invalid_argument with the first problem, or success.
  Status Done() const;

 private:
  // nullopt: a problem (recorded). A value of nullopt: absent or null (only when `optional`).
  std::optional<std::optional<int64_t>> IntegerAt(const char* key, int64_t min, int64_t max,
                                                  bool optional);
  const nlohmann::json* Required(const char* key);

  const nlohmann::json& object_;
  std::string what_;
  std::optional<Error> error_;
};

// Reads an array field of objects with `parse` (json -> Result<T>) into `out`, at most `max`.
template <class T, class Parse>
Status ReadList(const nlohmann::json& object, const char* key, std::string_view what,
                size_t max, Parse parse, std::vector<T>& out) {
  auto it = object.is_object() ? object.find(key) : object.end();
  if (!object.is_object() || it == object.end() || !it->is_array()) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' must be an array", what, key));
  }
  if (it->size() > max) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("{}: '{}' has more than {} entries", what, key, max));
  }
  out.clear();
  out.reserve(it->size());
  for (const auto& item : *it) {
    auto parsed = parse(item);
    if (!parsed) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{}: '{}[{}]': {}", what, key, out.size(), parsed.error().message));
    }
    out.push_back(std::move(*parsed));
  }
  return {};
}

// The object form of a StringMap.
nlohmann::json ToJson(const StringMap& map);

}  // namespace berth::v1
