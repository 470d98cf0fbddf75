// libvirt's QEMU save image (libvirt's src/qemu/qemu_saveimage.h, version 2): what a
// hibernate, a memory snapshot and CopySave write, and what a restore reads. A 92-byte header
// ("LibvirtQemudSave", then 32-bit fields in the host's byte order: version, data length,
// was running, format, cookie offset, 14 unused), then `data_len` bytes (the domain XML and a
// NUL, the save cookie and a NUL, zero padding), then QEMU's migration stream to the end.
//
// libvirt refuses, through its own XML argument, a restore whose machine has another name,
// uuid or generation ID than the image's. berthd resumes an image as another machine (a fork:
// another workspace, a new generation ID) by writing a copy of the image with the new XML in
// its header, which libvirtd then restores from, reading it itself: a restore berthd asked for
// completes even if berthd dies during it. (A FIFO that berthd writes while libvirtd reads
// saves the copy, but a berthd killed mid-restore takes the writer with it: measured in the
// crash suite, it left domains shut off that the restarted berthd took for running.)
//
// The image is written by libvirt (root) but holds the memory of a guest: every length read
// from it is bounded before it is used.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"

namespace berth::hypervisor {

inline constexpr size_t kSaveHeaderSize = 92;
// The most header data (XML, cookie, padding) berthd reads: libvirt writes the XML plus 64 KiB.
inline constexpr uint32_t kMaxSaveData = 16u << 20;

struct SaveImageHead {
  uint32_t data_len = 0;  // bytes after the header before QEMU's stream
  uint32_t was_running = 0;
  std::string xml;     // the domain XML, without its NUL
  std::string cookie;  // the save cookie, without its NUL; empty when there is none

  uint64_t stream_offset() const { return kSaveHeaderSize + data_len; }
};

// The head of an image from its first bytes (at least kSaveHeaderSize + data_len of them):
// magic (an image libvirt did not finish is refused as such), version 2, the raw format (a
// compressed image is refused), lengths within `bytes`, NUL-terminated XML and cookie.
Result<SaveImageHead> ParseSaveImageHead(std::string_view bytes);

// The same, read from the start of an open image.
Result<SaveImageHead> ReadSaveImageHead(int fd);

// The header and data of an image that holds `xml` in place of `head.xml`: the same cookie
// and was-running flag, and 64 KiB of padding as libvirt leaves (room for a later edit).
std::string EncodeSaveImageHead(const SaveImageHead& head, std::string_view xml);

// Writes to `out_fd` (a new file of berthd's) the image `image_fd` with `xml` as its machine:
// the new header and data, then the image's stream from head.stream_offset() to its end, copied
// in the kernel (copy_file_range: a clone of the blocks where the file system shares them).
Status WriteReboundImage(int image_fd, const SaveImageHead& head, std::string_view xml, int out_fd);

}  // namespace berth::hypervisor
