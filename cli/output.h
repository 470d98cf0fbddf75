// Human output of `berth`: aligned tables, ages and sizes, and the readable form of a
// workspace. Pure functions; `--json` output is the v1 wire type's JSON (common/v1/), which is
// the server's. Durations are common/duration.h's.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/duration.h"
#include "common/error.h"
#include "common/v1/checkpoint.h"
#include "common/v1/workspace.h"

namespace berth::cli {

// Columns separated by at least two spaces, each as wide as its widest cell (counted in UTF-8
// code points); the last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// "2026-11-29T21:45:35Z" (fractions and "+00:00" accepted) → the time; nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> ParseIsoTime(std::string_view text);

// A compact age such as "45s", "12m", "5h", "3d", "8w"; "-" for a time in the future by more
// than a minute or a malformed one.
std::string FormatAge(std::string_view iso_time, std::chrono::system_clock::time_point now);
// The same for unix seconds.
std::string FormatAge(int64_t unix_seconds, std::chrono::system_clock::time_point now);

// "K=V" → {K, V}; invalid_argument without '=' or with an empty K. `what` names the flag.
Result<std::pair<std::string, std::string>> SplitKeyValue(std::string_view text,
                                                           std::string_view what);

// Bytes as "512 B", "1.5 KiB", "20.0 MiB", "3.2 GiB".
std::string FormatBytes(uint64_t bytes);

// A JSON value as a table cell: strings bare, null as "-", the rest as compact JSON.
std::string Cell(const nlohmann::json& object, std::string_view key);

// The readable form of a workspace (`berth get`): one "field: value" line each.
std::string FormatWorkspace(const v1::Workspace& ws, std::chrono::system_clock::time_point now);
// One row of `berth ls`: NAME, ID, STATE, SIZE, IMAGE, AGE.
std::vector<std::string> WorkspaceRow(const v1::Workspace& ws,
                                      std::chrono::system_clock::time_point now);
std::vector<std::string> WorkspaceHeader();
// A short line for an action's result: "api-server (ws_…): stopping".
std::string StateLine(const v1::Workspace& ws);

// What a checkpoint holds, for `berth checkpoint` and `berth checkpoints`: "disks", or
// "memory (paused 312 ms)" for one with the guest's memory too (the pause as berthd measured
// it; "memory" alone when berthd gave none).
std::string CheckpointContents(const v1::Checkpoint& c);

}  // namespace berth::cli
