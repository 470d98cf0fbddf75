#include "common/v1/template.h"

#include "common/v1/reader.h"
#include "common/v1/time.h"

namespace berth::v1 {

using nlohmann::json;

namespace {

constexpr size_t kMaxTemplates = 100000;
constexpr int64_t kMaxCount = int64_t{1} << 40;
// A script (64 KiB), a build's log (16 KiB) or an error: with room for JSON's escapes.
constexpr size_t kMaxText = 512 * 1024;

}  // namespace

json ToJson(const CreateTemplate& c) {
  if (c.script) {
    json j{{"name", c.name}, {"script", *c.script}};
    if (c.start) j["start"] = *c.start;
    if (c.ready) j["ready"] = *c.ready;
    if (c.image) j["image"] = *c.image;
    if (c.size) j["size"] = *c.size;
    if (c.timeout_s) j["timeout_s"] = *c.timeout_s;
    return j;
  }
  json from = {{"workspace", c.workspace}};
  if (c.checkpoint) from["checkpoint"] = *c.checkpoint;
  return json{{"name", c.name}, {"from", std::move(from)}};
}

json ToJson(const Template& t) {
  json j = json::object();
  j["id"] = t.id;
  j["name"] = t.name;
  j["workspace_id"] = t.workspace_id;
  j["checkpoint_id"] = t.checkpoint_id;
  if (t.workspace) j["workspace"] = *t.workspace;
  if (t.image) j["image"] = *t.image;
  if (t.cpus) j["cpus"] = *t.cpus;
  if (t.memory_mib) j["memory_mib"] = *t.memory_mib;
  if (t.disk_gib) j["disk_gib"] = *t.disk_gib;
  j["created_by"] = t.created_by;
  j["created_at"] = FormatTime(t.created_at);
  j["state"] = t.state;
  if (t.error) j["error"] = *t.error;
  if (t.script) j["script"] = *t.script;
  if (t.start) j["start"] = *t.start;
  if (t.ready) j["ready"] = *t.ready;
  if (t.timeout_s) j["timeout_s"] = *t.timeout_s;
  if (t.build_log) j["build_log"] = *t.build_log;
  return j;
}

Result<Template> TemplateFromJson(const json& j) {
  Template t;
  std::optional<std::string> state;  // a berthd before builds has none: ready
  Reader r(j, "template");
  r.String("id", t.id)
      .String("name", t.name)
      .String("workspace_id", t.workspace_id)
      .String("checkpoint_id", t.checkpoint_id)
      .OptString("workspace", t.workspace)
      .OptString("image", t.image)
      .OptInteger("cpus", t.cpus, 0, kMaxCount)
      .OptInteger("memory_mib", t.memory_mib, 0, kMaxCount)
      .OptInteger("disk_gib", t.disk_gib, 0, kMaxCount)
      .String("created_by", t.created_by)
      .Time("created_at", t.created_at)
      .OptString("state", state)
      .OptString("error", t.error, kMaxText)
      .OptString("script", t.script, kMaxText)
      .OptString("start", t.start, kMaxText)
      .OptString("ready", t.ready, kMaxText)
      .OptInteger("timeout_s", t.timeout_s, 0, kMaxCount)
      .OptString("build_log", t.build_log, kMaxText);
  if (auto done = r.Done(); !done) return Fail(done.error());
  t.state = state.value_or("ready");
  return t;
}

json TemplateListJson(const std::vector<Template>& templates) {
  json list = json::array();
  for (const auto& t : templates) list.push_back(ToJson(t));
  return json{{"templates", std::move(list)}};
}

Result<std::vector<Template>> TemplateListFromJson(const json& j) {
  std::vector<Template> out;
  if (auto read = ReadList(j, "templates", "template list", kMaxTemplates, TemplateFromJson, out); !read) {
    return Fail(read.error());
  }
  return out;
}

}  // namespace berth::v1
