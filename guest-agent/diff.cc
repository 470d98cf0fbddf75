#include "guest-agent/diff.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/unique.h"

namespace berth::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Deeper trees are compared to this depth; what lies below counts as truncated.
constexpr int kMaxDepth = 128;

struct Entry {
  std::string name;
  struct stat st {};
};

std::string TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISLNK(mode)) return "symlink";
  return "other";
}

// The entries of directory `dir`, sorted by name, lstat'ed; none when it cannot be read (a
// missing tree is an empty one).
std::vector<Entry> List(const fs::path& dir) {
  std::vector<Entry> out;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    Entry entry{std::string(name), {}};
    if (::fstatat(::dirfd(d), e->d_name, &entry.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back(std::move(entry));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

std::string LinkTarget(const fs::path& path) {
  std::string target(4096, '\0');
  ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
  target.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return target;
}

class Walk {
 public:
  Walk(DiffLimits& limits, protocol::DiffResult& result) : limits_(limits), result_(result) {}

  bool stopped() const { return stopped_; }

  // Compares directory `from` with `to` (both directories, or missing), `rel` their path under
  // the tree ("" at its top).
  void Dirs(const fs::path& from, const fs::path& to, const std::string& shown, int depth) {
    if (depth > kMaxDepth) {
      result_.files.truncated = true;
      return;
    }
    auto a = List(from);
    auto b = List(to);
    size_t i = 0, j = 0;
    while ((i < a.size() || j < b.size()) && !Expired()) {
      int order = i == a.size() ? 1 : j == b.size() ? -1 : a[i].name.compare(b[j].name);
      if (order < 0) {
        Whole(from / a[i].name, a[i].st, Join(shown, a[i].name), result_.files.removed, result_.files.counts.removed);
        ++i;
      } else if (order > 0) {
        Whole(to / b[j].name, b[j].st, Join(shown, b[j].name), result_.files.added, result_.files.counts.added);
        ++j;
      } else {
        Both(from / a[i].name, a[i].st, to / b[j].name, b[j].st, Join(shown, a[i].name), depth);
        ++i;
        ++j;
      }
    }
  }

  dev_t from_dev = 0, to_dev = 0;

 private:
  static std::string Join(const std::string& shown, const std::string& name) {
    return shown.ends_with('/') ? shown + name : shown + "/" + name;
  }

  bool Expired() {
    if (!stopped_ && (++ticks_ & 63) == 0 && Clock::now() >= limits_.deadline) {
      stopped_ = true;
      result_.files.truncated = true;
    }
    return stopped_;
  }

  void Record(std::vector<protocol::FileChange>& list, int64_t& count, protocol::FileChange change) {
    ++count;
    if (list.size() < static_cast<size_t>(limits_.max_entries)) {
      list.push_back(std::move(change));
    } else {
      result_.files.truncated = true;
    }
  }

  // An entry on one side only: one change, a directory's contents counted under it.
  void Whole(const fs::path& path, const struct stat& st, std::string shown, std::vector<protocol::FileChange>& list,
             int64_t& count) {
    protocol::FileChange change{std::move(shown), TypeOf(st.st_mode), S_ISREG(st.st_mode) ? st.st_size : 0, 0};
    if (S_ISDIR(st.st_mode)) Count(path, st.st_dev, change, 0);
    Record(list, count, std::move(change));
  }

  void Count(const fs::path& dir, dev_t dev, protocol::FileChange& into, int depth) {
    if (depth > kMaxDepth) return;
    for (const auto& e : List(dir)) {
      if (Expired()) return;
      ++into.entries;
      if (S_ISREG(e.st.st_mode)) into.size += e.st.st_size;
      if (S_ISDIR(e.st.st_mode) && e.st.st_dev == dev) Count(dir / e.name, dev, into, depth + 1);
    }
  }

  void Both(const fs::path& from, const struct stat& a, const fs::path& to, const struct stat& b, std::string shown,
            int depth) {
    const bool dirs = S_ISDIR(a.st_mode) && S_ISDIR(b.st_mode);
    if (dirs) {
      // A file system mounted inside the tree (on either side) is not walked into.
      if (a.st_dev == from_dev && b.st_dev == to_dev) Dirs(from, to, shown, depth + 1);
      if ((a.st_mode & 07777) != (b.st_mode & 07777) || a.st_uid != b.st_uid || a.st_gid != b.st_gid) {
        Record(result_.files.changed, result_.files.counts.changed, {std::move(shown), "dir", 0, 0});
      }
      return;
    }
    if (Differ(from, a, to, b)) {
      Record(result_.files.changed, result_.files.counts.changed,
             {std::move(shown), TypeOf(b.st_mode), S_ISREG(b.st_mode) ? b.st_size : 0, 0});
    }
  }

  bool Differ(const fs::path& from, const struct stat& a, const fs::path& to, const struct stat& b) {
    if ((a.st_mode & S_IFMT) != (b.st_mode & S_IFMT)) return true;
    if ((a.st_mode & 07777) != (b.st_mode & 07777) || a.st_uid != b.st_uid || a.st_gid != b.st_gid) return true;
    if (S_ISLNK(a.st_mode)) return LinkTarget(from) != LinkTarget(to);
    if (!S_ISREG(a.st_mode)) return false;
    if (a.st_size != b.st_size) return true;
    if (a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec) return false;
    return !SameBytes(from, to, a.st_size);
  }

  // Whether two files of `size` bytes hold the same bytes; false past the content budget.
  bool SameBytes(const fs::path& from, const fs::path& to, int64_t size) {
    if (size > limits_.content_bytes) return false;
    limits_.content_bytes -= size;
    UniqueFd a(::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    UniqueFd b(::open(to.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (a.get() < 0 || b.get() < 0) return false;
    std::vector<char> x(64 * 1024), y(64 * 1024);
    while (true) {
      ssize_t n = ::read(a.get(), x.data(), x.size());
      if (n < 0) return false;
      size_t got = 0;
      while (got < static_cast<size_t>(n)) {
        ssize_t m = ::read(b.get(), y.data() + got, static_cast<size_t>(n) - got);
        if (m <= 0) return false;
        got += static_cast<size_t>(m);
      }
      if (n == 0) return ::read(b.get(), y.data(), 1) == 0;
      if (std::memcmp(x.data(), y.data(), static_cast<size_t>(n)) != 0) return false;
      if (Expired()) return false;
    }
  }

  DiffLimits& limits_;
  protocol::DiffResult& result_;
  bool stopped_ = false;
  uint64_t ticks_ = 0;
};

dev_t DeviceOf(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_dev : 0;
}

}  // namespace

bool DiffTree(const fs::path& from, const fs::path& to, const std::string& shown, DiffLimits& limits,
              protocol::DiffResult& result) {
  result.paths.push_back(shown);
  Walk walk(limits, result);
  walk.from_dev = DeviceOf(from);
  walk.to_dev = DeviceOf(to);
  walk.Dirs(from, to, shown, 0);
  return !walk.stopped();
}

std::map<std::string, std::string> ParseDpkgStatus(std::string_view status) {
  struct Stanza {
    std::string package, arch, version;
    bool installed = false;
  };
  std::vector<Stanza> stanzas(1);
  std::string native;
  size_t at = 0;
  while (at <= status.size()) {
    size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    std::string_view line = status.substr(at, end - at);
    at = end + 1;
    if (line.empty()) {
      if (!stanzas.back().package.empty()) stanzas.emplace_back();
      if (end == status.size()) break;
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') continue;  // a continuation line
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) value.remove_suffix(1);
    Stanza& s = stanzas.back();
    if (key == "Package") s.package = value;
    if (key == "Architecture") s.arch = value;
    if (key == "Version") s.version = value;
    // "want flag status": installed in its last word (also "hold ok installed").
    if (key == "Status") s.installed = value.ends_with(" installed");
    if (end == status.size()) break;
  }
  // dpkg's own architecture is the native one.
  for (const auto& s : stanzas) {
    if (s.package == "dpkg" && s.installed) native = s.arch;
  }
  std::map<std::string, std::string> out;
  for (const auto& s : stanzas) {
    if (s.package.empty() || !s.installed) continue;
    bool foreign = !s.arch.empty() && s.arch != "all" && !native.empty() && s.arch != native;
    out[foreign ? s.package + ":" + s.arch : s.package] = s.version;
  }
  return out;
}

void DiffPackages(const std::map<std::string, std::string>& from, const std::map<std::string, std::string>& to,
                  protocol::DiffResult& result) {
  auto add = [](std::vector<protocol::PackageChange>& list, protocol::PackageChange change) {
    if (list.size() < static_cast<size_t>(protocol::kMaxDiffEntries)) list.push_back(std::move(change));
  };
  auto& p = result.packages;
  for (const auto& [name, version] : to) {
    auto was = from.find(name);
    if (was == from.end()) {
      add(p.installed, {name, "", version});
    } else if (was->second != version) {
      add(p.changed, {name, was->second, version});
    }
  }
  for (const auto& [name, version] : from) {
    if (!to.contains(name)) add(p.removed, {name, version, ""});
  }
}

namespace {

// The block device whose virtio serial is `serial`, if one is there now.
std::optional<std::string> DeviceWithSerial(const std::string& serial) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/block", ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with("vd")) continue;
    std::ifstream in(entry.path() / "serial");
    std::string value;
    if (in && std::getline(in, value) && value == serial) return "/dev/" + name;
  }
  return std::nullopt;
}

// Whether the device holds an ext2/3/4 file system (its superblock's magic, at 1080).
bool HasExtFileSystem(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  unsigned char magic[2] = {};
  return fd.get() >= 0 && ::pread(fd.get(), magic, 2, 1080) == 2 && magic[0] == 0x53 && magic[1] == 0xef;
}

}  // namespace

Result<std::unique_ptr<DiskMount>> DiskMount::Mount(const std::string& serial, const fs::path& under,
                                                    Clock::time_point deadline) {
  std::optional<std::string> device;
  while (!(device = DeviceWithSerial(serial))) {
    if (Clock::now() >= deadline) {
      return Fail(ErrorCode::kDeadlineExceeded, fmt::format("no disk with serial {} appeared in the guest", serial));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::unique_ptr<DiskMount> mount(new DiskMount());
  std::error_code ec;
  fs::create_directories(under, ec);
  fs::permissions(under, fs::perms::owner_all, ec);
  mount->dir_ = under / serial;
  fs::create_directories(mount->dir_, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + mount->dir_.string()));
  if (!HasExtFileSystem(*device)) {
    spdlog::info("diff: {} ({}) holds no file system: an empty tree", *device, serial);
    return mount;
  }
  // Read-only, but on a writable device (berthd's scratch overlay): ext4 replays its journal
  // into the overlay, so the tree is what the checkpoint's guest had written, not older.
  unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME;
  if (::mount(device->c_str(), mount->dir_.c_str(), "ext4", flags, nullptr) != 0) {
    return Fail(ErrnoError(errno, fmt::format("mount {} ({}) read-only", *device, serial)));
  }
  mount->path_ = mount->dir_;
  return mount;
}

DiskMount::~DiskMount() {
  if (!path_.empty() && ::umount2(path_.c_str(), 0) != 0) {
    spdlog::warn("diff: umount {}: {}; detaching it", path_.string(), std::strerror(errno));
    ::umount2(path_.c_str(), MNT_DETACH);
  }
  if (!dir_.empty()) ::rmdir(dir_.c_str());
}

}  // namespace berth::agent
