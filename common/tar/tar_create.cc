#include "common/tar/tar_create.h"

#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/tar/archive_handles.h"

namespace berth::tar {
namespace {

// Collects libarchive's small blocks into pieces of `chunk` bytes before handing them on.
struct WriteState {
  const TarSink* sink;
  size_t chunk;
  std::string pending;
  std::optional<Error> error;

  bool Flush() {
    if (pending.empty()) return true;
    auto status = (*sink)(pending);
    pending.clear();
    if (!status) {
      error = status.error();
      return false;
    }
    return true;
  }
};

la_ssize_t WriteCallback(archive* a, void* opaque, const void* buffer, size_t length) {
  auto* state = static_cast<WriteState*>(opaque);
  if (state->error) return -1;
  state->pending.append(static_cast<const char*>(buffer), length);
  if (state->pending.size() >= state->chunk && !state->Flush()) {
    archive_set_error(a, EIO, "%s", state->error->message.c_str());
    return -1;
  }
  return static_cast<la_ssize_t>(length);
}

}  // namespace

Result<TarStats> CreateTar(const std::string& dir, const TarSink& sink, size_t chunk,
                           uint64_t* skipped) {
  ScopedThreadCwd cwd;
  if (auto entered = cwd.Enter(dir); !entered) return Fail(entered.error());

  Unique<archive> disk(archive_read_disk_new());
  Unique<archive> writer(archive_write_new());
  if (!disk || !writer) return Fail(ErrorCode::kResourceExhausted, "libarchive: out of memory");
  archive_read_disk_set_symlink_physical(disk.get());
  archive_read_disk_set_standard_lookup(disk.get());
  if (archive_read_disk_open(disk.get(), ".") != ARCHIVE_OK) {
    return Fail(ArchiveError(disk.get(), dir, "open directory"));
  }
  archive_write_set_format_pax_restricted(writer.get());
  WriteState state{&sink, chunk, {}, std::nullopt};
  state.pending.reserve(chunk + 16 * 1024);
  if (archive_write_open2(writer.get(), &state, nullptr, WriteCallback, nullptr, nullptr) !=
      ARCHIVE_OK) {
    return Fail(ArchiveError(writer.get(), "", "open tar writer"));
  }

  TarStats stats;
  std::vector<char> zeros;
  for (;;) {
    Unique<archive_entry> entry(archive_entry_new());
    int r = archive_read_next_header2(disk.get(), entry.get());
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_FAILED) {  // this entry only (unreadable, vanished): go on without it
      if (skipped != nullptr) ++*skipped;
      continue;
    }
    if (r < ARCHIVE_WARN) return Fail(ArchiveError(disk.get(), "", "walk directory"));
    archive_read_disk_descend(disk.get());

    std::string name = archive_entry_pathname(entry.get());
    if (name == ".") continue;
    if (name.starts_with("./")) name.erase(0, 2);
    archive_entry_set_pathname(entry.get(), name.c_str());

    r = archive_write_header(writer.get(), entry.get());
    if (state.error) return Fail(*state.error);
    if (r < ARCHIVE_WARN) return Fail(ArchiveError(writer.get(), name, "tar header for"));
    if (archive_entry_filetype(entry.get()) == AE_IFREG && archive_entry_size(entry.get()) > 0) {
      la_int64_t written = 0;
      for (;;) {
        const void* buf = nullptr;
        size_t size = 0;
        la_int64_t offset = 0;
        r = archive_read_data_block(disk.get(), &buf, &size, &offset);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) {
          // The header is out already; the writer pads the entry with zeros to its size.
          if (skipped != nullptr) ++*skipped;
          break;
        }
        if (offset > written) {  // a hole in a sparse file: tar stores it as zeros
          zeros.assign(static_cast<size_t>(std::min<la_int64_t>(offset - written, 1 << 20)), 0);
          while (offset > written) {
            size_t n = static_cast<size_t>(std::min<la_int64_t>(offset - written, zeros.size()));
            if (archive_write_data(writer.get(), zeros.data(), n) < 0) {
              if (state.error) return Fail(*state.error);
              return Fail(ArchiveError(writer.get(), name, "write tar data for"));
            }
            written += static_cast<la_int64_t>(n);
          }
        }
        if (archive_write_data(writer.get(), buf, size) < 0) {
          if (state.error) return Fail(*state.error);
          return Fail(ArchiveError(writer.get(), name, "write tar data for"));
        }
        written += static_cast<la_int64_t>(size);
        stats.bytes += size;
      }
    }
    if (archive_write_finish_entry(writer.get()) < ARCHIVE_WARN) {
      if (state.error) return Fail(*state.error);
      return Fail(ArchiveError(writer.get(), name, "finish tar entry"));
    }
    ++stats.entries;
  }
  if (archive_write_close(writer.get()) != ARCHIVE_OK) {
    if (state.error) return Fail(*state.error);
    return Fail(ArchiveError(writer.get(), "", "close tar writer"));
  }
  if (!state.Flush()) return Fail(*state.error);
  return stats;
}

}  // namespace berth::tar
