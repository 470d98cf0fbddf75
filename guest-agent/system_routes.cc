// GET /v1/health (no token: the controller polls it while a VM boots), GET /v1/info, and
// POST /v1/sync (berthd's, before it checkpoints the running guest's disks).
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "common/blocking.h"
#include "guest-agent/api_context.h"

namespace berth::agent {
namespace {

const auto kStarted = std::chrono::steady_clock::now();

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string OsName() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("PRETTY_NAME=")) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return "Linux";
}

nlohmann::json MemInfo() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  nlohmann::json out;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemTotal:") out["total_bytes"] = value * 1024;
    if (key == "MemAvailable:") out["available_bytes"] = value * 1024;
  }
  return out;
}

nlohmann::json DiskUse(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return nullptr;
  uint64_t total = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  uint64_t avail = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  uint64_t free_ = static_cast<uint64_t>(st.f_bfree) * st.f_frsize;
  return {{"path", path}, {"total_bytes", total}, {"used_bytes", total - free_},
          {"available_bytes", avail}};
}

}  // namespace

void AddSystemRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(http::bhttp::verb::get, "/v1/health", [](http::Exchange& ex) -> http::Task<void> {
    auto uptime = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - kStarted)
                      .count();
    // Built before co_await: g++ 12 miscompiles braced lists of literals inside co_await.
    nlohmann::json body = {{"status", "ok"},
                           {"version", std::string(BERTH_VERSION)},
                           {"uptime_ms", uptime},
                           {"boot_id", ReadFirstLine("/proc/sys/kernel/random/boot_id")}};
    co_await ex.SendJson(http::bhttp::status::ok, body);
  });
  router.Add(http::bhttp::verb::get, "/v1/info",
             [&options = ctx.options](http::Exchange& ex) -> http::Task<void> {
               utsname u{};
               uname(&u);
               nlohmann::json disks = nlohmann::json::array();
               disks.push_back(DiskUse("/"));
               if (auto w = DiskUse(options.workspace_dir); !w.is_null()) disks.push_back(w);
               double uptime = 0;
               std::ifstream("/proc/uptime") >> uptime;
               nlohmann::json body = {{"os", OsName()},
                    {"kernel", u.release},
                    {"arch", u.machine},
                    {"hostname", u.nodename},
                    {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
                    {"memory", MemInfo()},
                    {"disks", disks},
                    {"system_uptime_s", uptime},
                    {"default_user", options.default_user},
                    {"agent_version", std::string(BERTH_VERSION)}};
               co_await ex.SendJson(http::bhttp::status::ok, body);
             });
}

void AddSyncRoute(http::Router& router, ApiContext& ctx) {
  // Writes every file system's dirty pages to its disk, so that a checkpoint taken of the
  // running disks right after holds what the guest's programs wrote (and did not fsync). Off
  // the I/O thread: sync(2) waits for the disk, seconds when much is dirty.
  // The pool, not `ctx`: ctx is the caller's local, gone once the routes are added.
  router.Add(http::bhttp::verb::post, "/v1/sync", [&pool = ctx.blocking](http::Exchange& ex) -> http::Task<void> {
    auto start = std::chrono::steady_clock::now();
    auto flush = [] { ::sync(); };
    co_await RunBlocking(pool, std::move(flush));
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    nlohmann::json body = {{"synced", true}, {"took_ms", took.count()}};
    co_await ex.SendJson(http::bhttp::status::ok, body);
  });
}

}  // namespace berth::agent
