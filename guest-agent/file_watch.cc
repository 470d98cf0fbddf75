// GET ?watch=1[&recursive=1]: an NDJSON stream of changes in a directory, from inotify. The
// inotify descriptor is read asynchronously on the I/O thread; adding watches (which checks
// the user's permissions) runs on the blocking pool with the user's credentials.
#include <dirent.h>
#include <errno.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "common/json.h"
#include "common/protocol/files.h"
#include "guest-agent/file_handlers.h"
#include "guest-agent/fs_ops.h"

namespace berth::agent::files {
namespace {

using namespace boost::asio::experimental::awaitable_operators;
using http::bhttp::status;
using http::Exchange;
using http::Task;

constexpr auto kTuple = boost::asio::as_tuple(boost::asio::use_awaitable);
// Directories one watch stream may cover; each costs a kernel watch (a per-user limit).
constexpr size_t kMaxWatches = 4096;
// An idle stream says it is alive this often (and notices a client that left).
constexpr std::chrono::seconds kKeepalive{15};
// Events are sent in lines batched up to about this size per write.
constexpr size_t kMaxBatchBytes = 256 * 1024;
constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO |
                           IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW |
                           IN_EXCL_UNLINK;

std::string Join(const std::string& dir, std::string_view name) {
  return dir == "/" ? "/" + std::string(name) : dir + "/" + std::string(name);
}

bool IsUnder(const std::string& path, const std::string& dir) {
  return path == dir || (path.starts_with(dir) && path.size() > dir.size() &&
                         (dir == "/" || path[dir.size()] == '/'));
}

std::string Line(const protocol::WatchEvent& event) { return DumpJson(protocol::ToJson(event)) + "\n"; }

protocol::WatchEvent ErrorEvent(std::string message, std::string path = {}) {
  protocol::WatchEvent event("error", std::move(path), false);
  event.message = std::move(message);
  return event;
}

// The watched directories of one stream.
class WatchSet {
 public:
  WatchSet(int fd, bool recursive) : fd_(fd), recursive_(recursive) {}

  // Blocking, with the user's credentials: watches `path` and, when recursive, the directories
  // below it (symlinks are not followed), up to the cap. Returns error events to report.
  std::vector<protocol::WatchEvent> Add(const std::string& path) {
    std::vector<protocol::WatchEvent> errors;
    std::deque<std::string> pending{path};
    while (!pending.empty()) {
      std::string dir = std::move(pending.front());
      pending.pop_front();
      if (dirs_.size() >= kMaxWatches) {
        if (!limit_reported_) {
          errors.push_back(ErrorEvent(
              fmt::format("watch limit of {} directories reached; changes in {} and other "
                          "directories are not reported",
                          kMaxWatches, dir),
              dir));
          limit_reported_ = true;
        }
        break;
      }
      int wd = inotify_add_watch(fd_, dir.c_str(), kMask);
      if (wd < 0) {
        if (errno == ENOSPC) {  // the kernel's per-user watch limit
          errors.push_back(ErrorEvent(
              fmt::format("the system's inotify watch limit is reached; changes in {} and "
                          "below are not reported",
                          dir),
              dir));
          break;
        }
        if (errno != ENOENT && errno != ENOTDIR) {  // vanished meanwhile: nothing to say
          errors.push_back(ErrorEvent(ErrnoError(errno, "watch " + dir).message, dir));
        }
        continue;
      }
      dirs_[wd] = dir;
      if (!recursive_) continue;
      DIR* d = opendir(dir.c_str());
      if (d == nullptr) continue;
      while (dirent* entry = readdir(d)) {
        std::string_view name = entry->d_name;
        if (name == "." || name == "..") continue;
        bool is_dir = entry->d_type == DT_DIR;
        if (entry->d_type == DT_UNKNOWN) {
          struct stat st {};
          is_dir = fstatat(dirfd(d), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                   S_ISDIR(st.st_mode);
        }
        if (is_dir) pending.push_back(Join(dir, name));
      }
      closedir(d);
    }
    return errors;
  }

  // I/O thread: forgets the watches of `dir` and everything below it (moved away).
  void Forget(const std::string& dir) {
    for (auto it = dirs_.begin(); it != dirs_.end();) {
      if (IsUnder(it->second, dir)) {
        inotify_rm_watch(fd_, it->first);
        it = dirs_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const std::string* Find(int wd) const {
    auto it = dirs_.find(wd);
    return it == dirs_.end() ? nullptr : &it->second;
  }
  void Erase(int wd) { dirs_.erase(wd); }
  bool recursive() const { return recursive_; }

 private:
  int fd_;
  bool recursive_;
  std::map<int, std::string> dirs_;
  bool limit_reported_ = false;
};

// Turns a buffer of inotify events into lines. Sets `root_gone` when the watched directory
// itself went away; collects new directories to watch when recursive.
void Translate(const char* buf, size_t len, WatchSet& set, int root_wd, std::string& out,
               std::vector<std::string>& new_dirs, bool& root_gone) {
  std::string last;
  for (size_t pos = 0; pos + sizeof(inotify_event) <= len;) {
    const auto* ev = reinterpret_cast<const inotify_event*>(buf + pos);
    pos += sizeof(inotify_event) + ev->len;
    if (ev->mask & IN_Q_OVERFLOW) {
      out += Line(ErrorEvent("the event queue overflowed; some changes were not reported"));
      continue;
    }
    const std::string* dir = set.Find(ev->wd);
    if (dir == nullptr) continue;
    if (ev->mask & IN_IGNORED) {
      if (ev->wd == root_wd) root_gone = true;
      set.Erase(ev->wd);
      continue;
    }
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
      // A subdirectory's own removal is reported by its parent; only the root's matters here.
      if (ev->wd == root_wd) {
        std::string type = (ev->mask & IN_DELETE_SELF) ? "deleted" : "moved_from";
        out += Line(protocol::WatchEvent(type, *dir, true));
        root_gone = true;
      }
      continue;
    }
    if (ev->len == 0) continue;
    std::string path = Join(*dir, ev->name);  // ev->name is NUL-padded
    bool is_dir = (ev->mask & IN_ISDIR) != 0;
    const char* type = (ev->mask & IN_CREATE)       ? "created"
                       : (ev->mask & IN_DELETE)     ? "deleted"
                       : (ev->mask & IN_MODIFY)     ? "modified"
                       : (ev->mask & IN_MOVED_FROM) ? "moved_from"
                       : (ev->mask & IN_MOVED_TO)   ? "moved_to"
                                                    : nullptr;
    if (type == nullptr) continue;
    std::string line = Line(protocol::WatchEvent(type, path, is_dir));
    if (line == last && (ev->mask & IN_MODIFY)) continue;  // a write loop: one line per batch
    out += line;
    last = std::move(line);
    if (set.recursive() && is_dir) {
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) new_dirs.push_back(path);
      if (ev->mask & IN_MOVED_FROM) set.Forget(path);
    }
  }
}

}  // namespace

Task<void> Watch(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto recursive = ex.query().GetBool("recursive", false);
  if (!recursive) {
    co_await ex.SendError(recursive.error());
    co_return;
  }
  UniqueFd fd(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd) {
    co_await ex.SendError(ErrnoError(errno, "inotify_init"));
    co_return;
  }
  WatchSet set(fd.get(), *recursive);
  int root_wd = -1;
  auto first = co_await RunAs(ctx, req.user,
                              [&]() -> Result<std::vector<protocol::WatchEvent>> {
                                struct stat st {};
                                if (stat(req.path.c_str(), &st) != 0) {
                                  return Fail(ErrnoError(errno, "watch " + req.path));
                                }
                                if (!S_ISDIR(st.st_mode)) {
                                  return Fail(ErrorCode::kFailedPrecondition,
                                              req.path + " is not a directory");
                                }
                                // The root's own watch decides whether the stream can start.
                                root_wd = inotify_add_watch(fd.get(), req.path.c_str(), kMask);
                                if (root_wd < 0) {
                                  return Fail(ErrnoError(errno, "watch " + req.path));
                                }
                                return set.Add(req.path);
                              });
  if (!first) {
    co_await ex.SendError(first.error());
    co_return;
  }
  auto executor = co_await boost::asio::this_coro::executor;
  boost::asio::posix::stream_descriptor inotify(executor, ::dup(fd.get()));
  boost::asio::steady_timer timer(executor);
  if (!co_await ex.BeginChunked(status::ok, "application/x-ndjson")) co_return;
  std::string out;
  for (const auto& e : *first) out += Line(e);
  if (!out.empty()) {
    // Not `a && co_await b`: a co_await evaluated only conditionally is the ?: pitfall again.
    auto wrote = co_await ex.WriteChunk(out);
    if (!wrote) co_return;
  }

  alignas(inotify_event) char buf[64 * 1024];
  for (;;) {
    timer.expires_after(kKeepalive);
    auto which = co_await (inotify.async_wait(boost::asio::posix::descriptor_base::wait_read, kTuple) ||
                           timer.async_wait(kTuple));
    out.clear();
    if (which.index() == 1) {
      std::string keepalive = Line(protocol::WatchEvent("keepalive", "", false));
      if (!co_await ex.WriteChunk(keepalive)) co_return;
      continue;
    }
    std::vector<std::string> new_dirs;
    bool root_gone = false;
    while (out.size() < kMaxBatchBytes) {
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // EAGAIN: drained
      Translate(buf, static_cast<size_t>(n), set, root_wd, out, new_dirs, root_gone);
    }
    if (!new_dirs.empty()) {
      auto errors = co_await RunAs(ctx, req.user,
                                   [&]() -> Result<std::vector<protocol::WatchEvent>> {
                                     std::vector<protocol::WatchEvent> all;
                                     for (const auto& dir : new_dirs) {
                                       for (auto& e : set.Add(dir)) all.push_back(std::move(e));
                                     }
                                     return all;
                                   });
      if (errors) {
        for (const auto& e : *errors) out += Line(e);
      }
    }
    if (!out.empty()) {
      auto wrote = co_await ex.WriteChunk(out);
      if (!wrote) co_return;
    }
    if (root_gone) {
      co_await ex.EndChunked();
      co_return;
    }
  }
}

}  // namespace berth::agent::files
