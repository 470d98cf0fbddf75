// Wire types of berthd's checkpoint routes (docs/api.md, "Checkpoints"). JSON both ways;
// parsers are strict and never throw.
//
//   POST   /v1/workspaces/{ws}/checkpoints                CreateCheckpoint -> 201 Checkpoint
//   GET    /v1/workspaces/{ws}/checkpoints                -> {"checkpoints": [Checkpoint...]}
//   GET    /v1/workspaces/{ws}/checkpoints/{cp}           -> Checkpoint
//   DELETE /v1/workspaces/{ws}/checkpoints/{cp}           -> Checkpoint (gone)
//   POST   /v1/workspaces/{ws}/checkpoints/{cp}/restore   RestoreCheckpoint -> Restored
//   GET    /v1/workspaces/{ws}/checkpoints/{cp}/diff?to=  -> CheckpointDiff
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/protocol/diff.h"

namespace berth::v1 {

struct CreateCheckpoint {
  CreateCheckpoint() = default;
  std::optional<std::string> name;  // a name unique in the workspace; absent: the id
  bool memory = false;
};
nlohmann::json ToJson(const CreateCheckpoint& request);
// Strict: "name" a workspace-style name, "memory" a boolean, nothing else.
Result<CreateCheckpoint> CreateCheckpointFromJson(const nlohmann::json& json);

struct Checkpoint {
  Checkpoint() = default;
  std::string id;
  std::string workspace_id;
  std::string name;
  std::string kind;  // "manual" | "before_restore" | "rolling"
  bool memory = false;
  std::optional<std::string> parent;  // the checkpoint under this one
  std::string taken_while;            // the workspace's state then
  std::optional<int64_t> pause_ms;    // how long the guest was paused, for a memory checkpoint
  int64_t size_bytes = 0;             // what its layers take on the host
  std::string created_by;             // who took it, as the timeline names actors (a key id)
  int64_t created_at = 0;
};
nlohmann::json ToJson(const Checkpoint& checkpoint);
Result<Checkpoint> CheckpointFromJson(const nlohmann::json& json);
nlohmann::json CheckpointListJson(const std::vector<Checkpoint>& checkpoints);
Result<std::vector<Checkpoint>> CheckpointListFromJson(const nlohmann::json& json);

struct RestoreCheckpoint {
  RestoreCheckpoint() = default;
  // Checkpoint the state the restore leaves first, so that the restore can be undone.
  bool undo = true;
};
nlohmann::json ToJson(const RestoreCheckpoint& request);
// Strict: "undo" a boolean, nothing else; an empty body is {}.
Result<RestoreCheckpoint> RestoreCheckpointFromJson(const nlohmann::json& json);

// What changed from checkpoint `from` to checkpoint `to` or "current" (the workspace now): the
// guest's comparison (common/protocol/diff.h, whose JSON it is) with both ends named.
struct CheckpointDiff {
  CheckpointDiff() = default;
  std::string from;
  std::string to;
  protocol::DiffResult result;
};
nlohmann::json ToJson(const CheckpointDiff& diff);
Result<CheckpointDiff> CheckpointDiffFromJson(const nlohmann::json& json);

}  // namespace berth::v1
