// Extracts a tar stream into a directory, refusing anything that would land outside it.
// Shared by berth-agent (PUT ?archive=tar) and the client (DownloadTar).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace berth::tar {

struct TarStats {
  uint64_t entries = 0;  // entries written (the "." entry of an archive is not counted)
  uint64_t bytes = 0;    // bytes of file data
  uint64_t skipped = 0;  // entries left out by ExtractOptions (FIFOs on the host)
};

// What an extraction may recreate beyond plain files, directories and links. The defaults are
// the host's: a tar that comes from a guest is the guest's to write, and `berth cp WS:/dir .`
// may run as root, so nothing in it may leave a setuid-root file or a special file behind.
struct ExtractOptions {
  // Keep set-user-ID and set-group-ID bits. Off: they are cleared from every entry (other
  // permission bits stay). Ownership is never restored either way.
  bool keep_setid = false;
  // Create FIFOs. Off: FIFOs are left out and counted in TarStats::skipped.
  bool fifos = false;
};

// Yields the next piece of the archive: data (valid until the next call), an empty view at the
// end, or an error that aborts the extraction and is returned as is.
using TarSource = std::function<Result<std::string_view>()>;

// Extracts the tar stream from `source` into the existing directory `dir`, streaming: only the
// current block is in memory. Entries are plain files, directories, symlinks, hard links and
// (with options.fifos) FIFOs; modes (without set-id bits unless options.keep_setid) and mtimes
// are restored, ownership, ACLs and extended attributes (file capabilities) are not: new files
// belong to the calling thread's fs credentials. Refused with invalid_argument naming the
// entry: absolute names, '..' components, paths through a symlink (one created earlier by the
// same archive or one already on disk), hard links whose target is outside or through a
// symlink, device nodes and sockets.
// libarchive's ARCHIVE_EXTRACT_SECURE_{SYMLINKS,NODOTDOT,NOABSOLUTEPATHS} back these checks
// up. Entries extracted before a refused one stay. Blocking; changes the calling thread's
// working directory while it runs (made private to the thread, restored after).
Result<TarStats> ExtractTar(const std::string& dir, const TarSource& source,
                            const ExtractOptions& options = {});

// Checks one entry name (or hard-link target) and returns it relative and normalised: a
// leading "./" dropped, duplicate slashes collapsed; "" for the archive's "." itself.
Result<std::string> SafeEntryName(std::string_view name);

}  // namespace berth::tar
