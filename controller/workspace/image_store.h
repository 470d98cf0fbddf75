// Guest images as images/build publishes them: <images>/<name>/<version>/{disk.qcow2, vmlinuz,
// initrd.img, image.json}, with <images>/<name>/current pointing at the newest version. A
// workspace is pinned to the version it was created from: its root disk is an overlay on that
// version's disk, so it keeps booting that version's kernel even after a newer one appears.
//
// Holds and collection: a workspace holds its version with a file
// <images>/<name>/<version>/holds/<workspace id> naming the workspace's root disk. Versions
// that are not `current` and that no live hold keeps (a hold whose workspace directory is
// gone, because the workspace or its whole berthd data directory was removed, is stale) are
// deleted by CollectUnused. Several berthds may share one images directory: each holds its own.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"

namespace berth::workspace {

struct ImageVersion {
  std::string name;
  std::string version;
  std::filesystem::path disk;
  std::filesystem::path kernel;
  std::filesystem::path initrd;
};

class ImageStore {
 public:
  explicit ImageStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // The current version of `name` (not_found when it was never built).
  Result<ImageVersion> Current(const std::string& name) const;
  // A given version (not_found when it is gone).
  Result<ImageVersion> Get(const std::string& name, const std::string& version) const;
  const std::filesystem::path& dir() const { return dir_; }

  // Holds `version` for workspace `ws_id`, whose root disk (an overlay on the version's disk)
  // is `root_disk`; the disk's directory must exist already. not_found when the version is
  // gone. Idempotent.
  Status Hold(const ImageVersion& version, const std::string& ws_id,
              const std::filesystem::path& root_disk);
  // Drops the hold (nothing when there is none).
  void Release(const std::string& name, const std::string& version, const std::string& ws_id);
  // Drops `ws_id`'s holds on every version (for a workspace whose record was never stored, so
  // its image is not known).
  void ReleaseEverywhere(const std::string& ws_id);

  struct Collected {
    std::string name;
    std::string version;
    uint64_t bytes = 0;
  };
  // Deletes every version that is neither `current` nor held by a live hold. Does nothing
  // while images/build runs (it holds <images>/../.build.lock): a build publishes its version
  // and then moves `current` to it.
  std::vector<Collected> CollectUnused();

 private:
  void CollectUnder(std::vector<Collected>& out);

  std::filesystem::path dir_;
};

// Image names: [a-z0-9-], 1..32 characters (they are directory names).
Status ValidateImageName(std::string_view name);

}  // namespace berth::workspace
