// What POST /v1/diff compares (common/protocol/diff.h), in three parts:
//  - DiffTree: two directory trees, walked side by side one directory at a time (memory is the
//    depth times a directory's width, not the tree), each entry compared by type, size, mode,
//    owner, link target, and for a file whose size matches but whose mtime does not, by its
//    bytes (within a budget: past it, such a file counts as changed). A directory only on one
//    side is one entry with what it holds counted. Never follows a link, never leaves the file
//    system it starts on.
//  - ParseDpkgStatus / DiffPackages: the packages dpkg has installed, from its status file.
//  - DiskMount: a disk berthd plugged in, found by its serial and mounted read-only.
// The first two are pure reads of any directory, unit-tested on the host.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"
#include "common/protocol/diff.h"

namespace berth::agent {

struct DiffLimits {
  int max_entries = protocol::kDefaultDiffEntries;  // per list; the counts go on past it
  std::chrono::steady_clock::time_point deadline;   // past it: stop, truncated
  int64_t content_bytes = 256LL << 20;               // bytes read to compare files, in all
};

// Compares the tree at `from` with the one at `to` (either may be missing: an empty tree),
// adding what changed to `result.files` with paths under `shown` ("/workspace"). Returns false
// once the deadline passed (result.files.truncated is then set).
bool DiffTree(const std::filesystem::path& from, const std::filesystem::path& to, const std::string& shown,
              DiffLimits& limits, protocol::DiffResult& result);

// Installed packages by name ("curl"; "libc6:i386" for one not of dpkg's own architecture or
// "all") -> version, from a dpkg status file's text. Stanzas not installed are left out.
std::map<std::string, std::string> ParseDpkgStatus(std::string_view status);
// What `to` has that `from` has not (installed), the reverse (removed), and another version
// (changed), by name, each list at most protocol::kMaxDiffEntries long.
void DiffPackages(const std::map<std::string, std::string>& from, const std::map<std::string, std::string>& to,
                  protocol::DiffResult& result);

// A disk berthd plugged into this guest, found by its virtio serial (/sys/block/vd*/serial,
// waiting until `deadline` for the hot plug to arrive) and mounted read-only, without setuid,
// devices or exec, at `under`/<serial>. Unmounted, and the directory removed, on destruction.
// A disk without a file system (a workspace's data disk before its first boot) mounts as
// nothing: path() is empty, an empty tree.
class DiskMount {
 public:
  static Result<std::unique_ptr<DiskMount>> Mount(const std::string& serial, const std::filesystem::path& under,
                                                  std::chrono::steady_clock::time_point deadline);
  ~DiskMount();
  DiskMount(const DiskMount&) = delete;
  DiskMount& operator=(const DiskMount&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  DiskMount() = default;
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

}  // namespace berth::agent
