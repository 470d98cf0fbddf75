#include "common/v1/reader.h"

#include <algorithm>

#include "common/v1/time.h"

namespace berth::v1 {

using nlohmann::json;

Reader::Reader(const json& object, std::string_view what) : object_(object), what_(what) {
  if (!object_.is_object()) Problem("not a JSON object");
}

void Reader::Problem(std::string message) {
  if (!error_) {
    error_ = Error{ErrorCode::kInvalidArgument, fmt::format("{}: {}", what_, message)};
  }
}

Status Reader::Done() const {
  if (error_) return Fail(*error_);
  return {};
}

const json* Reader::Find(const char* key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

const json* Reader::Required(const char* key) {
  if (error_) return nullptr;
  const json* value = Find(key);
  if (!value) Problem(fmt::format("'{}' is missing", key));
  return value;
}

Reader& Reader::String(const char* key, std::string& out, size_t max_bytes) {
  const json* value = Required(key);
  if (!value) return *this;
  if (!value->is_string()) {
    Problem(fmt::format("'{}' must be a string", key));
  } else if (value->get_ref<const std::string&>().size() > max_bytes) {
    Problem(fmt::format("'{}' is longer than {} bytes", key, max_bytes));
  } else {
    out = value->get<std::string>();
  }
  return *this;
}

Reader& Reader::OptString(const char* key, std::optional<std::string>& out, size_t max_bytes) {
  if (error_) return *this;
  if (!Find(key)) {
    out.reset();
    return *this;
  }
  std::string value;
  String(key, value, max_bytes);
  if (ok()) out = std::move(value);
  return *this;
}

Reader& Reader::Bool(const char* key, bool& out) {
  const json* value = Required(key);
  if (!value) return *this;
  if (!value->is_boolean()) {
    Problem(fmt::format("'{}' must be true or false", key));
  } else {
    out = value->get<bool>();
  }
  return *this;
}

Reader& Reader::OptBool(const char* key, std::optional<bool>& out) {
  if (error_) return *this;
  if (!Find(key)) {
    out.reset();
    return *this;
  }
  bool value = false;
  Bool(key, value);
  if (ok()) out = value;
  return *this;
}

std::optional<std::optional<int64_t>> Reader::IntegerAt(const char* key, int64_t min,
                                                        int64_t max, bool optional) {
  if (error_) return std::nullopt;
  const json* value = Find(key);
  if (!value) {
    if (optional) return std::optional<int64_t>();
    Problem(fmt::format("'{}' is missing", key));
    return std::nullopt;
  }
  if (!value->is_number_integer()) {
    Problem(fmt::format("'{}' must be an integer", key));
    return std::nullopt;
  }
  // Compared in the number's own signedness: a huge unsigned value must not wrap to a small one.
  bool in_range = value->is_number_unsigned()
                      ? max >= 0 && value->get<uint64_t>() <= static_cast<uint64_t>(max) &&
                            (min <= 0 || value->get<uint64_t>() >= static_cast<uint64_t>(min))
                      : value->get<int64_t>() >= min && value->get<int64_t>() <= max;
  if (!in_range) {
    Problem(fmt::format("'{}' must be between {} and {}", key, min, max));
    return std::nullopt;
  }
  return std::optional<int64_t>(value->get<int64_t>());
}

Reader& Reader::Time(const char* key, int64_t& out) {
  std::string text;
  String(key, text, 64);
  if (!ok()) return *this;
  auto parsed = ParseTime(text);
  if (!parsed) {
    Problem(fmt::format("'{}': {}", key, parsed.error().message));
  } else {
    out = *parsed;
  }
  return *this;
}

Reader& Reader::OptTime(const char* key, std::optional<int64_t>& out) {
  if (error_) return *this;
  if (!Find(key)) {
    out.reset();
    return *this;
  }
  int64_t value = 0;
  Time(key, value);
  if (ok()) out = value;
  return *this;
}

Reader& Reader::Strings(const char* key, StringMap& out, size_t max_entries) {
  const json* value = Required(key);
  if (!value) return *this;
  if (!value->is_object()) {
    Problem(fmt::format("'{}' must be an object of strings", key));
    return *this;
  }
  if (value->size() > max_entries) {
    Problem(fmt::format("'{}' has more than {} entries", key, max_entries));
    return *this;
  }
  StringMap map;
  for (const auto& [k, v] : value->items()) {
    if (!v.is_string() || k.size() > kMaxIdBytes ||
        v.get_ref<const std::string&>().size() > kMaxMapValueBytes) {
      Problem(fmt::format("'{}.{}' must be a string of at most {} bytes", key,
                          k.substr(0, 64), kMaxMapValueBytes));
      return *this;
    }
    map.emplace(k, v.get<std::string>());
  }
  out = std::move(map);
  return *this;
}

Reader& Reader::OptStrings(const char* key, std::optional<StringMap>& out, size_t max_entries) {
  if (error_) return *this;
  if (!Find(key)) {
    out.reset();
    return *this;
  }
  StringMap map;
  Strings(key, map, max_entries);
  if (ok()) out = std::move(map);
  return *this;
}

Reader& Reader::Object(const char* key, json& out) {
  const json* value = Required(key);
  if (!value) return *this;
  if (!value->is_object()) {
    Problem(fmt::format("'{}' must be an object", key));
  } else {
    out = *value;
  }
  return *this;
}

Reader& Reader::OnlyFields(std::initializer_list<std::string_view> known) {
  if (error_) return *this;
  for (const auto& [k, v] : object_.items()) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      Problem(fmt::format("unknown field '{}'", k.substr(0, 64)));
      break;
    }
  }
  return *this;
}

json ToJson(const StringMap& map) {
  json out = json::object();
  for (const auto& [k, v] : map) out[k] = v;
  return out;
}

}  // namespace berth::v1
