#include "controller/workspace/image_store.h"

#include <fmt/format.h>

namespace berth::workspace {

namespace fs = std::filesystem;

Status ValidateImageName(std::string_view name) {
  if (name.empty() || name.size() > 32) {
    return Fail(ErrorCode::kInvalidArgument, "an image name has 1 to 32 characters");
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("image name '{}' may only hold a-z, 0-9 and '-'", name));
    }
  }
  return {};
}

Result<ImageVersion> ImageStore::Get(const std::string& name, const std::string& version) const {
  if (auto s = ValidateImageName(name); !s) return Fail(s.error());
  if (version.empty() || version.find('/') != std::string::npos || version.starts_with('.')) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("bad image version '{}'", version));
  }
  fs::path dir = dir_ / name / version;
  ImageVersion image{name, version, dir / "disk.qcow2", dir / "vmlinuz", dir / "initrd.img"};
  std::error_code ec;
  for (const auto& file : {image.disk, image.kernel, image.initrd}) {
    if (!fs::is_regular_file(file, ec)) {
      return Fail(ErrorCode::kNotFound,
                  fmt::format("image {} version {} is incomplete or gone ({} is missing)", name,
                              version, file.filename().string()));
    }
  }
  return image;
}

Result<ImageVersion> ImageStore::Current(const std::string& name) const {
  if (auto s = ValidateImageName(name); !s) return Fail(s.error());
  std::error_code ec;
  fs::path current = fs::read_symlink(dir_ / name / "current", ec);
  if (ec) {
    return Fail(ErrorCode::kNotFound,
                fmt::format("image '{}' is not built (run: images/build {})", name, name));
  }
  return Get(name, current.filename().string());
}

}  // namespace berth::workspace
