// What the controller's idle timer asks about: the last API request, open streams, processes
// started through the API that still run, CPU load, and keep-awake leases taken from inside
// the guest. Touched only on the agent's I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace berth::agent {

// Aggregate CPU time from the first line of /proc/stat, in jiffies.
struct CpuTimes {
  uint64_t busy = 0;   // user+nice+system+irq+softirq+steal (guest time is inside user)
  uint64_t total = 0;  // busy + idle + iowait
};
// Pure: parses the "cpu " line of /proc/stat text; nullopt when it is missing or malformed.
std::optional<CpuTimes> ParseProcStat(std::string_view text);
// Pure: busy share between two samples in percent of all CPUs (0..100); 0 when no time passed
// or the counters went backwards.
double CpuPercent(const CpuTimes& before, const CpuTimes& after);

class ActivityTracker {
 public:
  using Clock = std::chrono::system_clock;
  // CPU use at or above this share of all CPUs counts as activity ("cpu_busy"). Low enough to
  // see a build or a test run, high enough that the agent and systemd timers do not count.
  static constexpr double kCpuBusyPercent = 10.0;
  // At most this many leases at once: the local socket is open to every user of the guest.
  static constexpr size_t kMaxLeases = 1024;

  ActivityTracker();

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
    // Expires with the tracker: a coroutine frame destroyed after the agent (at shutdown,
    // with the io_context) must not write into the freed tracker.
    std::weak_ptr<int> alive_;
    std::string kind_;
  };
  StreamGuard OpenStream(std::string kind) { return StreamGuard(this, std::move(kind)); }

  // The process table tells how many API-started processes run.
  void SetRunningProcessCounter(std::function<int()> counter) { counter_ = std::move(counter); }

  // Keep-awake leases: `reason` for display; the lease expires after `duration` (measured on
  // the monotonic clock, so setting the wall clock neither ends nor stretches it). Returns the
  // lease id, or 0 when kMaxLeases are already held.
  uint64_t AddLease(std::string reason, std::chrono::seconds duration);
  // Same, with an absolute wall-clock end.
  uint64_t AddLease(std::string reason, Clock::time_point until);
  // Moves an unexpired lease's end to now + duration. False if there is no such lease.
  bool RenewLease(uint64_t id, std::chrono::seconds duration);
  bool RemoveLease(uint64_t id);
  // When the lease ends, on the wall clock; nullopt if it does not exist (or expired).
  std::optional<Clock::time_point> LeaseUntil(uint64_t id);
  std::optional<std::string> LeaseReason(uint64_t id);

  // {"last_request": iso8601|null, "idle_seconds": n, "open_streams": {kind: n},
  //  "open_streams_total": n, "running_processes": n,
  //  "cpu": {"percent": p, "window_s": s, "load1": l, "busy_threshold_percent": t},
  //  "leases": [{"id", "reason", "until", "remaining_s"}], "active": bool,
  //  "reasons": ["open_streams"|"running_processes"|"keepawake_leases"|"cpu_busy"],
  //  "details": ["why, in words", ...]}   (details[i] explains reasons[i])
  nlohmann::json Snapshot();

 private:
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  using Steady = std::chrono::steady_clock;
  struct Lease {
    std::string reason;
    Steady::time_point until;
  };
  void ExpireLeases();
  // Busy percent over the last window of at least kCpuWindow; sampling more often than that
  // returns the last value instead of a noisy figure over a few milliseconds.
  void SampleCpu();

  static constexpr std::chrono::seconds kCpuWindow{1};
  Clock::time_point started_ = Clock::now();
  Clock::time_point last_request_{};
  std::map<std::string, int> streams_;
  std::function<int()> counter_;
  std::map<uint64_t, Lease> leases_;
  uint64_t next_lease_ = 1;
  std::optional<CpuTimes> cpu_sample_;
  Steady::time_point cpu_sample_time_{};
  double cpu_percent_ = 0;
  double cpu_window_s_ = 0;
};

}  // namespace berth::agent
