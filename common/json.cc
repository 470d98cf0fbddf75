#include "common/json.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

namespace berth {
namespace {

using nlohmann::json;

// nlohmann's SAX interface, building the value as nlohmann's own DOM parser does (a stack of
// the open containers, no recursion) but stopping at the first container past `max_depth`.
// Only the public SAX events are used, so this does not depend on nlohmann's internals.
class DepthLimitedBuilder {
 public:
  DepthLimitedBuilder(json& root, size_t max_depth) : root_(root), max_depth_(max_depth) {}

  bool null() { return Put(nullptr) != nullptr; }
  bool boolean(bool value) { return Put(value) != nullptr; }
  bool number_integer(json::number_integer_t value) { return Put(value) != nullptr; }
  bool number_unsigned(json::number_unsigned_t value) { return Put(value) != nullptr; }
  bool number_float(json::number_float_t value, const json::string_t& /*text*/) {
    return Put(value) != nullptr;
  }
  bool string(json::string_t& value) { return Put(std::move(value)) != nullptr; }
  bool binary(json::binary_t& value) { return Put(json::binary(std::move(value))) != nullptr; }
  bool start_object(size_t /*elements*/) { return Open(json::value_t::object); }
  bool key(json::string_t& name) {
    // An object's member: null until its value arrives; a repeated name is overwritten, as
    // nlohmann's own parser does.
    member_ = &(*open_.back())[std::move(name)];
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(size_t /*elements*/) { return Open(json::value_t::array); }
  bool end_array() { return Close(); }
  bool parse_error(size_t /*position*/, const std::string& /*token*/, const json::exception& e) {
    error_ = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 3: ..." without the tag.
    if (auto tag_end = error_.find("] "); error_.starts_with("[json.") && tag_end != std::string::npos) {
      error_.erase(0, tag_end + 2);
    }
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }

 private:
  // Stores a value where the parser is (the root, the end of the open array, or the member
  // named last) and returns where it went. Pointers into arrays stay valid: an array only
  // grows while it is the innermost open container, and then no pointer into it is held.
  json* Put(json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& top = *open_.back();
    if (top.is_array()) {
      top.push_back(std::move(value));
      return &top.back();
    }
    *member_ = std::move(value);
    return member_;
  }
  bool Open(json::value_t type) {
    if (open_.size() >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    open_.push_back(Put(json(type)));
    return true;
  }
  bool Close() {
    open_.pop_back();
    return true;
  }

  json& root_;
  size_t max_depth_;
  std::vector<json*> open_;
  json* member_ = nullptr;
  bool too_deep_ = false;
  std::string error_;
};

Error WrongType(std::string_view key, std::string_view want) {
  return Error{ErrorCode::kInvalidArgument, fmt::format("'{}' must be {}", key, want)};
}

// The field, or nullptr when absent or null.
const json* Field(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

Result<json> ParseJson(std::string_view text, size_t max_depth) {
  json value;
  DepthLimitedBuilder builder(value, max_depth);
  bool ok = false;
  try {
    ok = json::sax_parse(text, &builder, json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception& e) {
    // The lexer reports through parse_error; this is only a backstop (bad_alloc).
    return Fail(ErrorCode::kInvalidArgument, fmt::format("invalid JSON: {}", e.what()));
  }
  if (builder.too_deep()) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("JSON nested deeper than {} levels", max_depth));
  }
  if (!ok) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("invalid JSON: {}", builder.error()));
  }
  return value;
}

std::string DumpJson(const json& value, int indent, bool ensure_ascii) {
  return value.dump(indent, ' ', ensure_ascii, json::error_handler_t::replace);
}

Result<std::optional<std::string>> OptionalString(const json& object, std::string_view key) {
  const json* v = Field(object, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return Fail(WrongType(key, "a string"));
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::optional<bool>> OptionalBool(const json& object, std::string_view key) {
  const json* v = Field(object, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return Fail(WrongType(key, "true or false"));
  return std::optional<bool>(v->get<bool>());
}

Result<std::optional<int64_t>> OptionalInt(const json& object, std::string_view key) {
  const json* v = Field(object, key);
  if (v == nullptr) return std::optional<int64_t>();
  // A number_unsigned above INT64_MAX is no int64 either.
  if (!v->is_number_integer() ||
      (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
    return Fail(WrongType(key, "an integer"));
  }
  return std::optional<int64_t>(v->get<int64_t>());
}

}  // namespace berth
