// The wire types of the agent's diff call, shared by berth-agent and berthd. Pure.
//
//   POST /v1/diff  DiffRequest -> 200 DiffResult
//
// berthd's, while it has plugged a checkpoint's two disks into the running guest (each under a
// scratch overlay of its own, so the checkpoint is never written: controller/workspace/diff.cc).
// The agent finds them by serial, mounts them read-only, compares what they hold under
// /workspace and the home directory, and the Debian packages installed, with another
// checkpoint's disks or the guest's own file system as it is now, unmounts them and answers.
// A guest's disk is never read on the host: the answer is the guest's word, bounded here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::protocol {

// The serials of a checkpoint's two disks as plugged in: 1-20 of [a-z0-9-].
struct DiffDisks {
  std::string root;
  std::string data;
};

inline constexpr int kMaxDiffEntries = 10000;  // per list, the most a caller may ask for
inline constexpr int kDefaultDiffEntries = 1000;

struct DiffRequest {
  DiffRequest() = default;
  DiffDisks from;
  std::optional<DiffDisks> to;  // none: the guest's own file system and packages, now
  int max_entries = kDefaultDiffEntries;  // per list (1..kMaxDiffEntries); the counts go on
  // How long the walk may take (1 s to 10 min): past it, what was compared is answered,
  // marked truncated.
  int64_t budget_ms = 60000;
};

nlohmann::json ToJson(const DiffRequest& request);
// Validates every field: a bad one is invalid_argument naming it.
Result<DiffRequest> DiffRequestFromJson(const nlohmann::json& json);

// A file, directory or link added, changed or removed. A directory added or removed whole is
// one entry: `entries` counts what it holds and `size` their bytes.
struct FileChange {
  std::string path;  // absolute, as the guest sees it: "/workspace/app/x.js"
  std::string type;  // "file" | "dir" | "symlink" | "other"
  int64_t size = 0;  // a file's bytes (the new one's for a change), 0 for the others
  int64_t entries = 0;
};

struct PackageChange {
  std::string name;  // "curl", or "libc6:i386" for a foreign architecture
  std::string from;  // the version before ("" when installed since)
  std::string to;    // the version after ("" when removed since)
};

struct DiffResult {
  DiffResult() = default;
  std::vector<std::string> paths;  // the trees compared: "/workspace", "/home/agent"
  struct Files {
    std::vector<FileChange> added, changed, removed;
    struct Counts {
      int64_t added = 0, changed = 0, removed = 0;
    } counts;  // all of them, also past max_entries
    // A list was cut at max_entries, or the walk stopped at its budget (then the counts too
    // are of what it compared).
    bool truncated = false;
  } files;
  struct Packages {
    std::vector<PackageChange> installed, changed, removed;  // changed: another version
  } packages;
  int64_t took_ms = 0;
};

// {"paths": [...], "files": {"added": [...], "changed": [...], "removed": [...], "counts":
// {...}, "truncated": b}, "packages": {"installed": [{name, version}], "removed": [{name,
// version}], "changed": [{name, from, to}]}, "took_ms": n}
nlohmann::json ToJson(const DiffResult& result);
// The guest's answer, checked: every list at most kMaxDiffEntries long, paths absolute and at
// most 4096 bytes, names and versions at most 256, known types, no negative numbers.
Result<DiffResult> DiffResultFromJson(const nlohmann::json& json);

}  // namespace berth::protocol
