#include "common/tar/tar_extract.h"

#include <limits.h>
#include <sys/stat.h>

#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/tar/archive_handles.h"

namespace berth::tar {
namespace {

constexpr int kExtractFlags = ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                              ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_PERM |
                              ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_UNLINK;

struct ReadState {
  const TarSource* source;
  std::optional<Error> error;  // the source's own failure, reported instead of libarchive's
};

la_ssize_t ReadCallback(archive* a, void* opaque, const void** buffer) {
  auto* state = static_cast<ReadState*>(opaque);
  auto chunk = (*state->source)();
  if (!chunk) {
    state->error = chunk.error();
    archive_set_error(a, EIO, "%s", chunk.error().message.c_str());
    return -1;
  }
  *buffer = chunk->data();
  return static_cast<la_ssize_t>(chunk->size());
}

Error Refuse(std::string_view name, std::string_view why) {
  return Error{ErrorCode::kInvalidArgument, fmt::format("tar entry '{}' refused: {}", name, why)};
}

// True when `path` is `prefix` or lies below it.
bool IsUnder(std::string_view path, std::string_view prefix) {
  return path == prefix || (path.starts_with(prefix) && path.size() > prefix.size() &&
                            path[prefix.size()] == '/');
}

}  // namespace

Result<std::string> SafeEntryName(std::string_view name) {
  if (name.starts_with('/')) return Fail(Refuse(name, "absolute path"));
  if (name.size() >= PATH_MAX) return Fail(Refuse(name.substr(0, 64), "name too long"));
  std::string out;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t end = name.find('/', pos);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return Fail(Refuse(name, "'..' in path"));
    if (!out.empty()) out.push_back('/');
    out.append(part);
  }
  return out;
}

Result<TarStats> ExtractTar(const std::string& dir, const TarSource& source,
                            const ExtractOptions& options) {
  ScopedThreadCwd cwd;
  if (auto entered = cwd.Enter(dir); !entered) return Fail(entered.error());

  Unique<archive> reader(archive_read_new());
  Unique<archive> writer(archive_write_disk_new());
  if (!reader || !writer) return Fail(ErrorCode::kResourceExhausted, "libarchive: out of memory");
  // Plain tar only (ustar, pax, GNU): decompression filters could run external programs.
  archive_read_support_format_tar(reader.get());
  archive_write_disk_set_options(writer.get(), kExtractFlags);

  ReadState state{&source, std::nullopt};
  if (archive_read_open(reader.get(), &state, nullptr, ReadCallback, nullptr) != ARCHIVE_OK) {
    if (state.error) return Fail(*state.error);
    return Fail(ArchiveError(reader.get(), "", "open tar stream"));
  }

  TarStats stats;
  std::set<std::string> symlinks;  // created by this archive: nothing may go through them
  auto through_symlink = [&](const std::string& path) {
    for (const auto& link : symlinks) {
      if (IsUnder(path, link) && path != link) return true;
    }
    return false;
  };
  for (;;) {
    archive_entry* entry = nullptr;
    int r = archive_read_next_header(reader.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (state.error) return Fail(*state.error);
    if (r < ARCHIVE_WARN) return Fail(ArchiveError(reader.get(), "", "read tar header"));

    const char* raw = archive_entry_pathname(entry);
    if (raw == nullptr) return Fail(Refuse("?", "entry without a name"));
    auto name = SafeEntryName(raw);
    if (!name) return Fail(name.error());
    if (name->empty()) continue;  // the archive's "." : the target directory itself
    if (through_symlink(*name)) return Fail(Refuse(raw, "path goes through a symlink"));

    if (const char* link = archive_entry_hardlink(entry); link != nullptr) {
      auto target = SafeEntryName(link);
      if (!target) return Fail(Refuse(raw, fmt::format("hard link target '{}' is outside", link)));
      if (target->empty() || through_symlink(*target)) {
        return Fail(Refuse(raw, fmt::format("hard link target '{}' is not allowed", link)));
      }
      archive_entry_set_hardlink(entry, target->c_str());
    } else {
      switch (archive_entry_filetype(entry)) {
        case AE_IFREG:
        case AE_IFDIR:
        case AE_IFLNK:
          break;
        case AE_IFIFO:
          if (options.fifos) break;
          ++stats.skipped;
          continue;  // libarchive skips the (empty) entry's data on the next header read
        default:
          return Fail(Refuse(raw, "device nodes and sockets are not extracted"));
      }
    }
    archive_entry_set_pathname(entry, name->c_str());
    // With ARCHIVE_EXTRACT_PERM libarchive restores set-id bits whenever the archive's owner
    // matches the extracting user's: as root, a guest's tar saying uid 0 would leave a
    // setuid-root file on the host. Cleared on the entry itself, so hard links share it.
    if (!options.keep_setid) {
      archive_entry_set_perm(entry, archive_entry_perm(entry) & ~static_cast<mode_t>(S_ISUID | S_ISGID));
    }

    r = archive_write_header(writer.get(), entry);
    if (r < ARCHIVE_WARN) return Fail(ArchiveError(writer.get(), raw, "tar entry"));
    if (archive_entry_size(entry) > 0) {
      for (;;) {
        const void* buf = nullptr;
        size_t size = 0;
        la_int64_t offset = 0;
        r = archive_read_data_block(reader.get(), &buf, &size, &offset);
        if (r == ARCHIVE_EOF) break;
        if (state.error) return Fail(*state.error);
        if (r < ARCHIVE_WARN) return Fail(ArchiveError(reader.get(), raw, "read tar entry"));
        if (archive_write_data_block(writer.get(), buf, size, offset) < ARCHIVE_WARN) {
          return Fail(ArchiveError(writer.get(), raw, "write tar entry"));
        }
        stats.bytes += size;
      }
    }
    if (archive_write_finish_entry(writer.get()) < ARCHIVE_WARN) {
      return Fail(ArchiveError(writer.get(), raw, "finish tar entry"));
    }
    if (archive_entry_filetype(entry) == AE_IFLNK && archive_entry_hardlink(entry) == nullptr) {
      symlinks.insert(*name);
    }
    ++stats.entries;
  }
  // Directory modes and times are applied last (so read-only directories can be filled).
  if (archive_write_close(writer.get()) != ARCHIVE_OK) {
    return Fail(ArchiveError(writer.get(), "", "finish extraction"));
  }
  return stats;
}

}  // namespace berth::tar
