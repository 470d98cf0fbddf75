// A workspace's two disks, made with qemu-img: root.qcow2, an overlay on the image's disk
// (installed packages land here), and data.qcow2, blank, mounted at /workspace in the guest.
// Blocking; call off I/O threads.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace berth::workspace {

// Runs argv[0] with argv and waits at most `timeout`; its stderr (bounded) is in the error. The
// command is killed when the thread that runs it (a blocking-pool thread, berthd) goes.
Status RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout);

// qemu-img create -f qcow2 -F qcow2 -b BACKING PATH: the backing format is explicit, so
// QEMU never probes it (a probed format is a known escape).
Status CreateOverlay(const std::filesystem::path& backing, const std::filesystem::path& path);
// qemu-img create -f qcow2 PATH SIZE: sparse; costs nothing until the guest writes.
Status CreateBlankDisk(const std::filesystem::path& path, int size_gib);
// Grows the qcow2 disk at `path` to `size_gib` when it is smaller (qemu-img resize; the guest
// grows its file system at boot). Never shrinks; a missing file or one that is not qcow2 is
// left alone (the create makes it; QEMU refuses a broken one). The size is read from the qcow2
// header, which QEMU writes and the guest cannot.
Status GrowDisk(const std::filesystem::path& path, int size_gib);
// The backing file the qcow2 layer at `path` names in its header ("" for none), or nothing
// when it cannot be read as qcow2. The header is qemu-img's (berthd makes and rebases every
// layer; QEMU writes only data clusters), read within the bounds the format sets.
std::optional<std::string> BackingFile(const std::filesystem::path& path);

}  // namespace berth::workspace
