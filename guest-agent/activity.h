// What the controller's idle timer asks about: the last API request, open streams, processes
// started through the API that still run, CPU load, and keep-awake leases taken from inside
// the guest. Touched only on the agent's I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace berth::agent {

class ActivityTracker {
 public:
  using Clock = std::chrono::system_clock;

  // An authenticated request arrived (health checks do not count).
  void Touch() { last_request_ = Clock::now(); }

  // An open stream (exec stream, PTY session, tunnel, watch, output follow) for as long as the
  // guard lives.
  class StreamGuard {
   public:
    StreamGuard() = default;
    StreamGuard(ActivityTracker* tracker, std::string kind);
    StreamGuard(StreamGuard&& other) noexcept;
    StreamGuard& operator=(StreamGuard&& other) noexcept;
    ~StreamGuard();

   private:
    ActivityTracker* tracker_ = nullptr;
    std::string kind_;
  };
  StreamGuard OpenStream(std::string kind) { return StreamGuard(this, std::move(kind)); }

  // The process table tells how many API-started processes run.
  void SetRunningProcessCounter(std::function<int()> counter) { counter_ = std::move(counter); }

  // Keep-awake leases: `reason` for display; expire at `until`. Returns the lease id.
  uint64_t AddLease(std::string reason, Clock::time_point until);
  bool RemoveLease(uint64_t id);

  // {"last_request": iso8601|null, "idle_seconds": n, "open_streams": {kind: n}, "open_streams_total": n,
  //  "running_processes": n, "cpu": {...}, "leases": [...], "active": bool, "reasons": [...]}
  nlohmann::json Snapshot();

 private:
  struct Lease {
    std::string reason;
    Clock::time_point until;
  };
  Clock::time_point started_ = Clock::now();
  Clock::time_point last_request_{};
  std::map<std::string, int> streams_;
  std::function<int()> counter_;
  std::map<uint64_t, Lease> leases_;
  uint64_t next_lease_ = 1;
  // CPU sampling (/proc/stat) between snapshots.
  uint64_t last_cpu_busy_ = 0;
  uint64_t last_cpu_total_ = 0;
};

}  // namespace berth::agent
