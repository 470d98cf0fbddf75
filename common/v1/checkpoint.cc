#include "common/v1/checkpoint.h"

#include "common/json.h"
#include "common/v1/reader.h"
#include "common/v1/time.h"

namespace berth::v1 {

using nlohmann::json;

namespace {

constexpr size_t kMaxCheckpoints = 100000;

}  // namespace

json ToJson(const CreateCheckpoint& c) {
  json j = json::object();
  if (c.name) j["name"] = *c.name;
  j["memory"] = c.memory;
  return j;
}

Result<CreateCheckpoint> CreateCheckpointFromJson(const json& j) {
  CreateCheckpoint c;
  Reader r(j, "checkpoint");
  std::optional<bool> memory;
  r.OnlyFields({"name", "memory"}).OptString("name", c.name, 63).OptBool("memory", memory);
  c.memory = memory.value_or(false);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return c;
}

json ToJson(const Checkpoint& c) {
  json j = json::object();
  j["id"] = c.id;
  j["workspace_id"] = c.workspace_id;
  j["name"] = c.name;
  j["kind"] = c.kind;
  j["memory"] = c.memory;
  j["parent"] = c.parent ? json(*c.parent) : json(nullptr);
  j["taken_while"] = c.taken_while;
  j["pause_ms"] = c.pause_ms ? json(*c.pause_ms) : json(nullptr);
  j["size_bytes"] = c.size_bytes;
  j["created_by"] = c.created_by;
  j["created_at"] = FormatTime(c.created_at);
  return j;
}

Result<Checkpoint> CheckpointFromJson(const json& j) {
  Checkpoint c;
  Reader r(j, "checkpoint");
  r.String("id", c.id)
      .String("workspace_id", c.workspace_id)
      .String("name", c.name)
      .String("kind", c.kind)
      .Bool("memory", c.memory)
      .OptString("parent", c.parent)
      .String("taken_while", c.taken_while)
      .OptInteger("pause_ms", c.pause_ms, 0, int64_t{1} << 40)
      .Integer("size_bytes", c.size_bytes, 0, int64_t{1} << 60)
      .String("created_by", c.created_by)
      .Time("created_at", c.created_at);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return c;
}

json CheckpointListJson(const std::vector<Checkpoint>& checkpoints) {
  json list = json::array();
  for (const auto& c : checkpoints) list.push_back(ToJson(c));
  json j = json::object();
  j["checkpoints"] = std::move(list);
  return j;
}

Result<std::vector<Checkpoint>> CheckpointListFromJson(const json& j) {
  std::vector<Checkpoint> out;
  if (auto read = ReadList(j, "checkpoints", "checkpoint list", kMaxCheckpoints, CheckpointFromJson, out); !read) {
    return Fail(read.error());
  }
  return out;
}

json ToJson(const RestoreCheckpoint& r) { return json{{"undo", r.undo}}; }

Result<RestoreCheckpoint> RestoreCheckpointFromJson(const json& j) {
  RestoreCheckpoint out;
  if (j.is_null()) return out;
  Reader r(j, "restore");
  std::optional<bool> undo;
  r.OnlyFields({"undo"}).OptBool("undo", undo);
  out.undo = undo.value_or(true);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return out;
}

nlohmann::json ToJson(const CheckpointDiff& diff) {
  nlohmann::json out = protocol::ToJson(diff.result);
  out["from"] = diff.from;
  out["to"] = diff.to;
  return out;
}

Result<CheckpointDiff> CheckpointDiffFromJson(const nlohmann::json& json) {
  if (!json.is_object()) return Fail(ErrorCode::kInvalidArgument, "a checkpoint diff must be a JSON object");
  CheckpointDiff out;
  auto from = OptionalString(json, "from");
  auto to = OptionalString(json, "to");
  if (!from) return Fail(from.error());
  if (!to) return Fail(to.error());
  if (!from->has_value() || !to->has_value()) {
    return Fail(ErrorCode::kInvalidArgument, "a checkpoint diff names its 'from' and 'to'");
  }
  out.from = **from;
  out.to = **to;
  nlohmann::json rest = json;
  rest.erase("from");
  rest.erase("to");
  auto result = protocol::DiffResultFromJson(rest);
  if (!result) return Fail(result.error());
  out.result = std::move(*result);
  return out;
}

}  // namespace berth::v1
