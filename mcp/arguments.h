// Checks tool arguments against the tool's JSON Schema, for the subset of JSON Schema the
// tools use: type, anyOf, properties, required, additionalProperties, enum, minimum, maximum,
// minLength, maxLength, items, minItems, maxItems. Pure.
#pragma once

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::mcp {

// invalid_argument naming the argument and what was expected, e.g.
// "argument 'timeout' must be at most 3600 (got 5000)".
Status ValidateArguments(const nlohmann::json& schema, const nlohmann::json& args);

}  // namespace berth::mcp
