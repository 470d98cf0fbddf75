#include "guest-agent/activity.h"

#include <fstream>
#include <sstream>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace berth::agent {
namespace {

std::string Iso8601(std::chrono::system_clock::time_point t) {
  return fmt::format("{:%FT%TZ}", std::chrono::floor<std::chrono::seconds>(t));
}

// Reads aggregate busy and total jiffies from /proc/stat.
bool ReadCpu(uint64_t& busy, uint64_t& total) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal)) {
    return false;
  }
  busy = user + nice + system + irq + softirq + steal;
  total = busy + idle + iowait;
  return true;
}

}  // namespace

ActivityTracker::StreamGuard::StreamGuard(ActivityTracker* tracker, std::string kind)
    : tracker_(tracker), kind_(std::move(kind)) {
  ++tracker_->streams_[kind_];
}

ActivityTracker::StreamGuard::StreamGuard(StreamGuard&& other) noexcept
    : tracker_(std::exchange(other.tracker_, nullptr)), kind_(std::move(other.kind_)) {}

ActivityTracker::StreamGuard& ActivityTracker::StreamGuard::operator=(
    StreamGuard&& other) noexcept {
  if (this != &other) {
    this->~StreamGuard();
    tracker_ = std::exchange(other.tracker_, nullptr);
    kind_ = std::move(other.kind_);
  }
  return *this;
}

ActivityTracker::StreamGuard::~StreamGuard() {
  if (tracker_ == nullptr) return;
  // Streams end after activity, so closing one counts as the last moment of use.
  tracker_->last_request_ = Clock::now();
  if (--tracker_->streams_[kind_] <= 0) tracker_->streams_.erase(kind_);
  tracker_ = nullptr;
}

uint64_t ActivityTracker::AddLease(std::string reason, Clock::time_point until) {
  uint64_t id = next_lease_++;
  leases_[id] = Lease{std::move(reason), until};
  return id;
}

bool ActivityTracker::RemoveLease(uint64_t id) { return leases_.erase(id) > 0; }

nlohmann::json ActivityTracker::Snapshot() {
  auto now = Clock::now();
  std::erase_if(leases_, [&](const auto& kv) { return kv.second.until <= now; });

  nlohmann::json out;
  auto last = last_request_ == Clock::time_point{} ? started_ : last_request_;
  out["last_request"] =
      last_request_ == Clock::time_point{} ? nlohmann::json(nullptr) : nlohmann::json(Iso8601(last_request_));
  out["idle_seconds"] = std::chrono::duration_cast<std::chrono::seconds>(now - last).count();
  int total = 0;
  nlohmann::json streams = nlohmann::json::object();
  for (const auto& [kind, n] : streams_) {
    streams[kind] = n;
    total += n;
  }
  out["open_streams"] = streams;
  out["open_streams_total"] = total;
  int running = counter_ ? counter_() : 0;
  out["running_processes"] = running;

  uint64_t busy = 0, all = 0;
  double percent = 0;
  if (ReadCpu(busy, all) && all > last_cpu_total_ && last_cpu_total_ != 0) {
    percent = 100.0 * static_cast<double>(busy - last_cpu_busy_) /
              static_cast<double>(all - last_cpu_total_);
  }
  last_cpu_busy_ = busy;
  last_cpu_total_ = all;
  double load1 = 0;
  std::ifstream("/proc/loadavg") >> load1;
  out["cpu"] = {{"percent_since_last_check", percent}, {"load1", load1}};

  nlohmann::json leases = nlohmann::json::array();
  for (const auto& [id, lease] : leases_) {
    leases.push_back({{"id", id}, {"reason", lease.reason}, {"until", Iso8601(lease.until)}});
  }
  out["leases"] = leases;

  nlohmann::json reasons = nlohmann::json::array();
  if (total > 0) reasons.push_back("open_streams");
  if (running > 0) reasons.push_back("running_processes");
  if (!leases_.empty()) reasons.push_back("keepawake_leases");
  out["reasons"] = reasons;
  out["active"] = !reasons.empty();
  return out;
}

}  // namespace berth::agent
