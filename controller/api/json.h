// The API's JSON shapes (docs/api.md) and the small parsers its routes share.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/store/store.h"
#include "controller/workspace/service.h"

namespace berth::api {

// "2026-11-29T21:45:35Z"
std::string IsoTime(int64_t unix_seconds);
nlohmann::json IsoOrNull(const std::optional<int64_t>& unix_seconds);
// ISO 8601 UTC ("…Z") or unix seconds.
Result<int64_t> ParseTime(std::string_view text);

nlohmann::json WorkspaceJson(const workspace::Workspace& ws,
                             const std::optional<workspace::AwakeInfo>& awake = std::nullopt);
nlohmann::json TenantJson(const store::Tenant& tenant);
nlohmann::json KeyJson(const store::ApiKey& key);
nlohmann::json EventJson(const store::Event& event);

}  // namespace berth::api
