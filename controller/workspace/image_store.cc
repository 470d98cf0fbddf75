#include "controller/workspace/image_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/unique.h"

namespace berth::workspace {

namespace fs = std::filesystem;

namespace {

// An exclusive flock(2) on `path` (created when missing), held while the object lives.
UniqueFd LockFile(const fs::path& path, bool wait) {
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return fd;
  while (flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    if (errno != EINTR) return UniqueFd();
  }
  return fd;
}

// True when a hold under `holds` names a root disk whose workspace directory still exists
// (the directory is made before the hold, the disk only later, when the workspace is built).
bool HasLiveHold(const fs::path& holds) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(holds, ec)) {
    std::ifstream in(entry.path());
    std::string disk;
    std::getline(in, disk);
    if (!disk.empty() && fs::is_directory(fs::path(disk).parent_path(), ec)) return true;
  }
  return false;
}

uint64_t TreeBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec)) total += entry.file_size(ec);
  }
  return total;
}

}  // namespace

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

Status ImageStore::Hold(const ImageVersion& version, const std::string& ws_id,
                        const fs::path& root_disk) {
  if (ws_id.empty() || ws_id.find('/') != std::string::npos || ws_id.starts_with('.')) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("bad workspace id '{}'", ws_id));
  }
  // Under the lock CollectUnused takes: the version either is still there and now held, or
  // is gone and the caller hears so.
  auto lock = LockFile(dir_ / ".holds.lock", /*wait=*/true);
  if (!lock) return Fail(ErrnoError(errno, "lock " + (dir_ / ".holds.lock").string()));
  if (auto still = Get(version.name, version.version); !still) return Fail(still.error());
  fs::path holds = dir_ / version.name / version.version / "holds";
  std::error_code ec;
  fs::create_directories(holds, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + holds.string()));
  fs::path tmp = holds / ("." + ws_id + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << root_disk.string() << "\n";
    if (!out.flush()) return Fail(ErrorCode::kInternal, "cannot write " + tmp.string());
  }
  fs::rename(tmp, holds / ws_id, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "rename " + tmp.string()));
  return {};
}

void ImageStore::Release(const std::string& name, const std::string& version,
                         const std::string& ws_id) {
  if (!ValidateImageName(name) || ws_id.empty() || ws_id.find('/') != std::string::npos ||
      version.empty() || version.find('/') != std::string::npos) {
    return;
  }
  std::error_code ec;
  fs::remove(dir_ / name / version / "holds" / ws_id, ec);
}

void ImageStore::ReleaseEverywhere(const std::string& ws_id) {
  if (ws_id.empty() || ws_id.find('/') != std::string::npos || ws_id.starts_with('.')) return;
  std::error_code ec;
  for (const auto& image : fs::directory_iterator(dir_, ec)) {
    if (!ValidateImageName(image.path().filename().string()) || !image.is_directory(ec)) continue;
    std::error_code vec;
    for (const auto& version : fs::directory_iterator(image.path(), vec)) {
      std::error_code rec;
      fs::remove(version.path() / "holds" / ws_id, rec);
    }
  }
}

std::vector<ImageStore::Collected> ImageStore::CollectUnused() {
  std::vector<Collected> out;
  auto build = LockFile(dir_.parent_path() / ".build.lock", /*wait=*/false);
  if (!build) return out;  // images/build runs: next time
  auto lock = LockFile(dir_ / ".holds.lock", /*wait=*/true);
  if (!lock) return out;
  // Iterators throw when a directory changes under them (an operator deleting by hand).
  try {
    CollectUnder(out);
  } catch (const fs::filesystem_error& e) {
    spdlog::warn("images: collection stopped: {}", e.what());
  }
  return out;
}

void ImageStore::CollectUnder(std::vector<Collected>& out) {
  std::error_code ec;
  for (const auto& image : fs::directory_iterator(dir_, ec)) {
    std::string name = image.path().filename().string();
    if (!ValidateImageName(name) || !image.is_directory(ec)) continue;
    std::error_code lec;
    fs::path current = fs::read_symlink(image.path() / "current", lec);
    if (lec) continue;  // never published: leave it to images/build
    // Listed first, renamed after: a directory changed while it is iterated may or may not
    // show the change.
    std::vector<fs::path> unused;
    std::error_code iec;
    for (const auto& entry : fs::directory_iterator(image.path(), iec)) {
      std::string version = entry.path().filename().string();
      if (version.starts_with(".trash-")) {
        unused.push_back(entry.path());  // left by a collection that was interrupted
        continue;
      }
      if (version == current.filename().string() || version == "current" ||
          version.starts_with('.') || entry.is_symlink(iec) || !entry.is_directory(iec)) {
        continue;
      }
      if (!HasLiveHold(entry.path() / "holds")) unused.push_back(entry.path());
    }
    for (const auto& path : unused) {
      std::string version = path.filename().string();
      bool leftover = version.starts_with(".trash-");
      uint64_t bytes = TreeBytes(path);
      // Renamed first, so no half-deleted version is ever under its own name.
      fs::path trash = leftover ? path : image.path() / fmt::format(".trash-{}-{}", version, getpid());
      std::error_code rec;
      if (!leftover) fs::rename(path, trash, rec);
      if (rec) {
        spdlog::warn("images: cannot remove {}/{}: {}", name, version, rec.message());
        continue;
      }
      fs::remove_all(trash, rec);
      if (!leftover) out.push_back({name, version, bytes});
    }
  }
}

}  // namespace berth::workspace
