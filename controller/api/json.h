// The API's answers (docs/api.md) built from the controller's records through the v1 wire types
// of common/v1/ (the same types the CLI and MCP read them back with), and the small parsers
// its routes share.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/v1/admin.h"
#include "common/v1/checkpoint.h"
#include "common/v1/events.h"
#include "common/v1/template.h"
#include "common/v1/workspace.h"
#include "controller/store/store.h"
#include "controller/workspace/service.h"

namespace berth::api {

// "2026-11-29T21:45:35Z"
std::string IsoTime(int64_t unix_seconds);
nlohmann::json IsoOrNull(const std::optional<int64_t>& unix_seconds);
// ISO 8601 UTC ("…Z") or unix seconds.
Result<int64_t> ParseTime(std::string_view text);

// The records as the API shows them. `awake` appears only while the workspace runs.
v1::Workspace WorkspaceWire(const workspace::Workspace& ws,
                            const std::optional<workspace::AwakeInfo>& awake = std::nullopt);
v1::State StateWire(workspace::State state);
v1::Tenant TenantWire(const store::Tenant& tenant);
v1::ApiKey KeyWire(const store::ApiKey& key);
v1::Event EventWire(const store::Event& event);
// `size_bytes`: what its layers take (WorkspaceService::GetCheckpoint), 0 for one deleted.
v1::Checkpoint CheckpointWire(const store::Checkpoint& checkpoint, int64_t size_bytes);
// A template with what a workspace made from it is: its source's image and size (read from the
// source while it is there; it cannot be deleted while the template is).
// `with_log`: a build's log too (GET /v1/templates/{tpl}).
v1::Template TemplateWire(workspace::WorkspaceService& service, const store::Template& t, bool with_log = false);

// The same as JSON.
nlohmann::json WorkspaceJson(const workspace::Workspace& ws,
                             const std::optional<workspace::AwakeInfo>& awake = std::nullopt);
nlohmann::json TenantJson(const store::Tenant& tenant);
nlohmann::json KeyJson(const store::ApiKey& key);
nlohmann::json EventJson(const store::Event& event);

}  // namespace berth::api
