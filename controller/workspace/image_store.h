// Guest images as images/build publishes them: <images>/<name>/<version>/{disk.qcow2, vmlinuz,
// initrd.img, image.json}, with <images>/<name>/current pointing at the newest version. A
// workspace is pinned to the version it was created from: its root disk is an overlay on that
// version's disk, so it keeps booting that version's kernel even after a newer one appears.
#pragma once

#include <filesystem>
#include <string>

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

 private:
  std::filesystem::path dir_;
};

// Image names: [a-z0-9-], 1..32 characters (they are directory names).
Status ValidateImageName(std::string_view name);

}  // namespace berth::workspace
