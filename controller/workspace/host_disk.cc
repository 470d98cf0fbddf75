#include "controller/workspace/host_disk.h"

#include <sys/statvfs.h>

#include <cerrno>

#include <fmt/format.h>

#include "common/json.h"

namespace berth::workspace {

Result<HostDisk> StatHostDisk(const std::filesystem::path& path) {
  struct statvfs st{};
  if (::statvfs(path.c_str(), &st) != 0) return Fail(ErrnoError(errno, "statvfs " + path.string()));
  HostDisk out;
  out.free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  out.total_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  return out;
}

Status CheckHostDisk(const HostDisk& disk, const DiskFloor& floor) {
  double percent = disk.total_bytes == 0
                       ? 0.0
                       : 100.0 * static_cast<double>(disk.free_bytes) / static_cast<double>(disk.total_bytes);
  bool short_bytes = disk.free_bytes < floor.min_free_bytes;
  bool short_percent = percent < floor.min_free_percent;
  if (!short_bytes && !short_percent) return {};
  constexpr double kMiB = 1024.0 * 1024.0;
  nlohmann::json details = {{"free_bytes", disk.free_bytes},
                            {"total_bytes", disk.total_bytes},
                            {"min_free_bytes", floor.min_free_bytes},
                            {"min_free_percent", floor.min_free_percent}};
  return Fail(Error{ErrorCode::kInsufficientStorage,
                    fmt::format("the host is short of disk: {:.0f} MiB free ({:.1f} %), under the "
                                "minimum of {:.0f} MiB and {:.1f} %; no new disks are made until "
                                "the operator frees space",
                                static_cast<double>(disk.free_bytes) / kMiB, percent,
                                static_cast<double>(floor.min_free_bytes) / kMiB,
                                floor.min_free_percent),
                    DumpJson(details)});
}

}  // namespace berth::workspace
