// Wire types of berthd's preview routes (docs/api.md, "Previews"). JSON both ways; parsers are
// strict and never throw.
//
//   POST   /v1/workspaces/{ws}/previews        CreatePreview -> 201 Preview (with token and link
//                                              for a private one: shown only here)
//   GET    /v1/workspaces/{ws}/previews        -> {"previews": [Preview...]}, newest first
//   DELETE /v1/workspaces/{ws}/previews/{id}   -> Preview (revoked)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::v1 {

struct CreatePreview {
  CreatePreview() = default;
  uint16_t port = 0;
  bool is_public = false;  // "public"
  // How long it lasts (seconds); nullopt: berthd's default (24 h). At most berthd's maximum.
  std::optional<int64_t> expires_in_s;
};
nlohmann::json ToJson(const CreatePreview& request);
// Strict: port 1-65535, "public" a boolean, "expires_in" seconds (an integer) or a duration
// ("2h"), nothing else.
Result<CreatePreview> CreatePreviewFromJson(const nlohmann::json& json);

struct Preview {
  Preview() = default;
  std::string id;
  std::string workspace_id;
  uint16_t port = 0;
  bool is_public = false;
  std::string status;  // "active" | "expired" | "revoked"
  std::string url;     // the preview's address (no credential in it)
  std::optional<std::string> token;  // at create, for a private preview
  std::optional<std::string> link;   // url with the token, to hand to a person (at create)
  int64_t created_at = 0;
  int64_t expires_at = 0;
  std::optional<int64_t> last_used_at;
  std::optional<int64_t> revoked_at;
};
nlohmann::json ToJson(const Preview& preview);
Result<Preview> PreviewFromJson(const nlohmann::json& json);
nlohmann::json PreviewListJson(const std::vector<Preview>& previews);
Result<std::vector<Preview>> PreviewListFromJson(const nlohmann::json& json);

}  // namespace berth::v1
