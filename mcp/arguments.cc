#include "mcp/arguments.h"

#include <fmt/format.h>

#include "common/json.h"

namespace berth::mcp {
namespace {

std::string_view TypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a number";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    default: return "a value of another kind";
  }
}

bool HasType(const nlohmann::json& value, std::string_view type) {
  if (type == "string") return value.is_string();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    // 3.0 is an integer to JSON Schema.
    return value.is_number_float() && value.get<double>() == static_cast<double>(static_cast<long long>(value.get<double>()));
  }
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "null") return value.is_null();
  return false;
}

std::string Article(std::string_view type) {
  if (type == "integer" || type == "array" || type == "object") return fmt::format("an {}", type);
  return fmt::format("a {}", type);
}

Status Check(const nlohmann::json& schema, const nlohmann::json& value, const std::string& where);

Status CheckAnyOf(const nlohmann::json& options, const nlohmann::json& value,
                  const std::string& where) {
  std::optional<Error> first;
  for (const auto& option : options) {
    auto status = Check(option, value, where);
    if (status) return {};
    if (!first) first = status.error();
  }
  std::vector<std::string> kinds;
  for (const auto& option : options) {
    if (option.contains("type") && option["type"].is_string()) {
      std::string kind = Article(option["type"].get<std::string>());
      if (option["type"] == "array" && option.contains("items") && option["items"].contains("type")) {
        kind = fmt::format("an array of {}s", option["items"]["type"].get<std::string>());
      }
      kinds.push_back(kind);
    }
  }
  if (kinds.empty() && first) return Fail(*first);
  return Fail(ErrorCode::kInvalidArgument,
              fmt::format("{} must be {} (got {})", where, fmt::join(kinds, " or "), TypeName(value)));
}

Status Check(const nlohmann::json& schema, const nlohmann::json& value, const std::string& where) {
  if (!schema.is_object()) return {};
  if (auto any = schema.find("anyOf"); any != schema.end() && any->is_array()) {
    auto status = CheckAnyOf(*any, value, where);
    if (!status) return status;
  }
  if (auto type = schema.find("type"); type != schema.end() && type->is_string()) {
    std::string t = type->get<std::string>();
    if (!HasType(value, t)) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} must be {} (got {})", where, Article(t), TypeName(value)));
    }
  }
  if (auto options = schema.find("enum"); options != schema.end() && options->is_array()) {
    bool found = false;
    for (const auto& option : *options) found = found || option == value;
    if (!found) {
      std::vector<std::string> names;
      for (const auto& option : *options) names.push_back(DumpJson(option));
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} must be one of {} (got {})", where, fmt::join(names, ", "),
                              DumpJson(value)));
    }
  }
  if (value.is_number()) {
    double v = value.get<double>();
    if (auto min = schema.find("minimum"); min != schema.end() && min->is_number() && v < min->get<double>()) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} must be at least {} (got {})", where, DumpJson(*min), DumpJson(value)));
    }
    if (auto max = schema.find("maximum"); max != schema.end() && max->is_number() && v > max->get<double>()) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} must be at most {} (got {})", where, DumpJson(*max), DumpJson(value)));
    }
  }
  if (value.is_string()) {
    size_t size = value.get_ref<const std::string&>().size();
    if (auto min = schema.find("minLength"); min != schema.end() && min->is_number_integer() &&
                                             size < min->get<size_t>()) {
      return Fail(ErrorCode::kInvalidArgument,
                  min->get<size_t>() == 1 ? fmt::format("{} must not be empty", where)
                                          : fmt::format("{} must be at least {} bytes long", where,
                                                        min->get<size_t>()));
    }
    if (auto max = schema.find("maxLength"); max != schema.end() && max->is_number_integer() &&
                                             size > max->get<size_t>()) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} is {} bytes long, over the limit of {}", where, size,
                              max->get<size_t>()));
    }
  }
  if (value.is_array()) {
    if (auto min = schema.find("minItems"); min != schema.end() && min->is_number_integer() &&
                                            value.size() < min->get<size_t>()) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} needs at least {} item(s)", where, min->get<size_t>()));
    }
    if (auto max = schema.find("maxItems"); max != schema.end() && max->is_number_integer() &&
                                            value.size() > max->get<size_t>()) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} has more than {} items", where, max->get<size_t>()));
    }
    if (auto items = schema.find("items"); items != schema.end()) {
      for (size_t i = 0; i < value.size(); ++i) {
        auto status = Check(*items, value[i], fmt::format("{}[{}]", where, i));
        if (!status) return status;
      }
    }
  }
  if (value.is_object()) {
    auto properties = schema.find("properties");
    if (auto required = schema.find("required"); required != schema.end() && required->is_array()) {
      for (const auto& name : *required) {
        if (name.is_string() && !value.contains(name.get<std::string>())) {
          return Fail(ErrorCode::kInvalidArgument,
                      fmt::format("missing required argument '{}'", name.get<std::string>()));
        }
      }
    }
    for (const auto& [key, item] : value.items()) {
      const nlohmann::json* property = nullptr;
      if (properties != schema.end() && properties->is_object()) {
        auto it = properties->find(key);
        if (it != properties->end()) property = &*it;
      }
      if (!property) {
        auto additional = schema.find("additionalProperties");
        if (additional != schema.end() && additional->is_object()) {
          std::string inner = where.empty() ? fmt::format("argument '{}'", key)
                                            : fmt::format("{}.{}", where, key);
          auto status = Check(*additional, item, inner);
          if (!status) return status;
          continue;
        }
        if (additional != schema.end() && additional->is_boolean() && !additional->get<bool>()) {
          std::vector<std::string> known;
          if (properties != schema.end()) {
            for (const auto& [name, unused] : properties->items()) known.push_back(name);
          }
          return Fail(ErrorCode::kInvalidArgument,
                      fmt::format("unknown argument '{}' (this tool takes: {})", key,
                                  fmt::join(known, ", ")));
        }
        continue;
      }
      std::string inner = where.empty() ? fmt::format("argument '{}'", key)
                                        : fmt::format("{}.{}", where, key);
      auto status = Check(*property, item, inner);
      if (!status) return status;
    }
  }
  return {};
}

}  // namespace

Status ValidateArguments(const nlohmann::json& schema, const nlohmann::json& args) {
  if (!args.is_object()) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("arguments must be an object (got {})", TypeName(args)));
  }
  return Check(schema, args, "");
}

}  // namespace berth::mcp
