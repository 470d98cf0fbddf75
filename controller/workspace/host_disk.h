// Whether the host has disk to spare for new workspace disks: statvfs of berthd's data
// directory against the operator's minimum free space. Creates (and disk growth) are refused
// below it, so that a full host disk never stops the guests that run already (their qcow2
// files grow as they write; a full host pauses them with an I/O error).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "common/error.h"

namespace berth::workspace {

struct HostDisk {
  uint64_t free_bytes = 0;   // available to berthd (statvfs f_bavail)
  uint64_t total_bytes = 0;
};

// The minimum free space; both must hold. The defaults keep room for a new image version
// (1.4-2 GiB) and for the growth of the disks of running guests.
struct DiskFloor {
  uint64_t min_free_bytes = uint64_t{5} << 30;
  double min_free_percent = 5.0;
};

// The free space of the file system that holds `path`. Blocking (a statvfs).
Result<HostDisk> StatHostDisk(const std::filesystem::path& path);

// insufficient_storage (507) naming what is free and the floor it is under; success otherwise.
// Pure.
Status CheckHostDisk(const HostDisk& disk, const DiskFloor& floor);

// Where the service reads the free space from: StatHostDisk normally, a fake in tests.
using HostDiskSource = std::function<Result<HostDisk>(const std::filesystem::path&)>;

}  // namespace berth::workspace
