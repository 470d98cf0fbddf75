// Writes a directory tree as a tar stream, as it is produced. Shared by berth-agent
// (GET ?archive=tar) and the client (UploadTar).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "common/tar/tar_extract.h"

namespace berth::tar {

// Takes the next piece of the archive; an error aborts the archive and is returned as is.
using TarSink = std::function<Status(std::string_view data)>;

// Walks `dir` (pax format, names relative to `dir`, no "." entry) and hands the archive to
// `sink` in pieces of at most `chunk` bytes. Symlinks are stored as symlinks, never followed;
// file contents are read block by block. Entries that cannot be read (permissions, vanished
// meanwhile) are skipped; `skipped` counts them when given. Blocking; changes the calling
// thread's working directory while it runs (made private to the thread, restored after).
Result<TarStats> CreateTar(const std::string& dir, const TarSink& sink, size_t chunk = 256 * 1024,
                           uint64_t* skipped = nullptr);

}  // namespace berth::tar
