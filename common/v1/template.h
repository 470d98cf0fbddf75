// Wire types of berthd's template routes (docs/api.md, "Templates"). JSON both ways; pure.
//
//   POST   /v1/templates          CreateTemplate -> 201 Template
//   GET    /v1/templates          -> {"templates": [Template...]}
//   GET    /v1/templates/{tpl}    -> Template (with a build's log)
//   DELETE /v1/templates/{tpl}    -> Template (gone)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::v1 {

struct CreateTemplate {
  CreateTemplate() = default;
  std::string name;
  std::string workspace;                  // the workspace it is made from (id or name)
  std::optional<std::string> checkpoint;  // a checkpoint with memory; none: one is taken now
  // Or built: a workspace of `image` and `size` runs `script`, then `start` in the background,
  // then `ready` until it exits 0 (workspace and checkpoint are not sent then).
  std::optional<std::string> script;
  std::optional<std::string> start;
  std::optional<std::string> ready;
  std::optional<std::string> image;
  std::optional<std::string> size;
  std::optional<int64_t> timeout_s;
};
nlohmann::json ToJson(const CreateTemplate& request);

struct Template {
  Template() = default;
  std::string id;  // "tpl_" + 16 hex
  std::string name;
  std::string workspace_id;
  std::string checkpoint_id;
  // What a workspace made from it is (its workspace's, while that one is there).
  std::optional<std::string> workspace;
  std::optional<std::string> image;
  std::optional<int64_t> cpus;
  std::optional<int64_t> memory_mib;
  std::optional<int64_t> disk_gib;
  std::string created_by;
  int64_t created_at = 0;
  std::string state = "ready";  // building, ready or failed (a build's)
  std::optional<std::string> error;
  // A build's request, and the end of its output (GET /v1/templates/{tpl} only).
  std::optional<std::string> script;
  std::optional<std::string> start;
  std::optional<std::string> ready;
  std::optional<int64_t> timeout_s;
  std::optional<std::string> build_log;
};
nlohmann::json ToJson(const Template& t);
Result<Template> TemplateFromJson(const nlohmann::json& json);
nlohmann::json TemplateListJson(const std::vector<Template>& templates);
Result<std::vector<Template>> TemplateListFromJson(const nlohmann::json& json);

}  // namespace berth::v1
