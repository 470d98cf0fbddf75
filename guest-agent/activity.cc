#include "guest-agent/activity.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/protocol/ports.h"

namespace berth::agent {
namespace {

std::string ReadFile(const char* path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

}  // namespace

std::optional<CpuTimes> ParseProcStat(std::string_view text) {
  auto nl = text.find('\n');
  std::string_view line = text.substr(0, nl);
  if (!line.starts_with("cpu ")) return std::nullopt;
  line.remove_prefix(4);
  // user nice system idle iowait irq softirq steal [guest guest_nice]
  uint64_t v[8] = {};
  for (auto& value : v) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (ec != std::errc() || ptr == line.data()) return std::nullopt;
    line.remove_prefix(static_cast<size_t>(ptr - line.data()));
  }
  CpuTimes out;
  out.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  out.total = out.busy + v[3] + v[4];
  return out;
}

double CpuPercent(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) return 0;
  double percent = 100.0 * static_cast<double>(after.busy - before.busy) /
                   static_cast<double>(after.total - before.total);
  return std::min(100.0, percent);
}

ActivityTracker::ActivityTracker() {
  // The first window starts with the agent, so the first snapshot already has a figure.
  cpu_sample_ = ParseProcStat(ReadFile("/proc/stat", 4096));
  cpu_sample_time_ = Steady::now();
}

ActivityTracker::StreamGuard::StreamGuard(ActivityTracker* tracker, std::string kind)
    : tracker_(tracker), alive_(tracker->alive_), kind_(std::move(kind)) {
  ++tracker_->streams_[kind_];
}

ActivityTracker::StreamGuard::StreamGuard(StreamGuard&& other) noexcept
    : tracker_(std::exchange(other.tracker_, nullptr)),
      alive_(std::move(other.alive_)),
      kind_(std::move(other.kind_)) {}

ActivityTracker::StreamGuard& ActivityTracker::StreamGuard::operator=(
    StreamGuard&& other) noexcept {
  if (this != &other) {
    this->~StreamGuard();
    tracker_ = std::exchange(other.tracker_, nullptr);
    alive_ = std::move(other.alive_);
    kind_ = std::move(other.kind_);
  }
  return *this;
}

ActivityTracker::StreamGuard::~StreamGuard() {
  if (tracker_ == nullptr || alive_.expired()) return;
  // Streams end after activity, so closing one counts as the last moment of use.
  tracker_->last_request_ = Clock::now();
  if (--tracker_->streams_[kind_] <= 0) tracker_->streams_.erase(kind_);
  tracker_ = nullptr;
}

void ActivityTracker::ExpireLeases() {
  auto now = Steady::now();
  std::erase_if(leases_, [&](const auto& kv) { return kv.second.until <= now; });
}

uint64_t ActivityTracker::AddLease(std::string reason, std::chrono::seconds duration) {
  ExpireLeases();
  if (leases_.size() >= kMaxLeases) return 0;
  uint64_t id = next_lease_++;
  leases_[id] = Lease{std::move(reason), Steady::now() + duration};
  return id;
}

uint64_t ActivityTracker::AddLease(std::string reason, Clock::time_point until) {
  auto left = std::chrono::ceil<std::chrono::seconds>(until - Clock::now());
  return AddLease(std::move(reason), std::max(left, std::chrono::seconds(0)));
}

bool ActivityTracker::RenewLease(uint64_t id, std::chrono::seconds duration) {
  ExpireLeases();
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  it->second.until = Steady::now() + duration;
  return true;
}

bool ActivityTracker::RemoveLease(uint64_t id) {
  ExpireLeases();
  return leases_.erase(id) > 0;
}

std::optional<ActivityTracker::Clock::time_point> ActivityTracker::LeaseUntil(uint64_t id) {
  ExpireLeases();
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(it->second.until - Steady::now());
}

std::optional<std::string> ActivityTracker::LeaseReason(uint64_t id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return it->second.reason;
}

void ActivityTracker::SampleCpu() {
  auto now = Steady::now();
  if (cpu_sample_ && now - cpu_sample_time_ < kCpuWindow) return;
  auto times = ParseProcStat(ReadFile("/proc/stat", 4096));
  if (!times) return;
  if (cpu_sample_) {
    cpu_percent_ = CpuPercent(*cpu_sample_, *times);
    cpu_window_s_ = std::chrono::duration<double>(now - cpu_sample_time_).count();
  }
  cpu_sample_ = times;
  cpu_sample_time_ = now;
}

nlohmann::json ActivityTracker::Snapshot() {
  auto now = Clock::now();
  auto steady_now = Steady::now();
  ExpireLeases();

  nlohmann::json out;
  auto last = last_request_ == Clock::time_point{} ? started_ : last_request_;
  out["last_request"] = last_request_ == Clock::time_point{}
                            ? nlohmann::json(nullptr)
                            : nlohmann::json(protocol::Iso8601(last_request_));
  out["idle_seconds"] = std::chrono::duration_cast<std::chrono::seconds>(now - last).count();
  int total = 0;
  nlohmann::json streams = nlohmann::json::object();
  std::string stream_list;
  for (const auto& [kind, n] : streams_) {
    streams[kind] = n;
    total += n;
    stream_list += fmt::format("{}{}: {}", stream_list.empty() ? "" : ", ", kind, n);
  }
  out["open_streams"] = streams;
  out["open_streams_total"] = total;
  int running = counter_ ? counter_() : 0;
  out["running_processes"] = running;

  SampleCpu();
  double load1 = 0;
  std::istringstream(ReadFile("/proc/loadavg", 256)) >> load1;
  out["cpu"] = {{"percent", cpu_percent_},
                {"window_s", cpu_window_s_},
                {"load1", load1},
                {"busy_threshold_percent", kCpuBusyPercent}};

  nlohmann::json leases = nlohmann::json::array();
  for (const auto& [id, lease] : leases_) {
    auto remaining = std::chrono::ceil<std::chrono::seconds>(lease.until - steady_now);
    leases.push_back({{"id", id},
                      {"reason", lease.reason},
                      {"until", protocol::Iso8601(now + remaining)},
                      {"remaining_s", remaining.count()}});
  }
  out["leases"] = leases;

  nlohmann::json reasons = nlohmann::json::array();
  nlohmann::json details = nlohmann::json::array();
  if (total > 0) {
    reasons.push_back("open_streams");
    details.push_back(fmt::format("{} open stream{} ({})", total, total == 1 ? "" : "s",
                                  stream_list));
  }
  if (running > 0) {
    reasons.push_back("running_processes");
    details.push_back(fmt::format("{} process{} started through the API still running", running,
                                  running == 1 ? "" : "es"));
  }
  if (!leases_.empty()) {
    reasons.push_back("keepawake_leases");
    std::string list;
    for (const auto& [id, lease] : leases_) {
      auto remaining = std::chrono::ceil<std::chrono::seconds>(lease.until - steady_now);
      list += fmt::format("{}#{} '{}' for {}s more", list.empty() ? "" : ", ", id,
                          lease.reason, remaining.count());
      if (list.size() > 1000) {
        list += ", ...";
        break;
      }
    }
    details.push_back(fmt::format("keep-awake lease{}: {}", leases_.size() == 1 ? "" : "s", list));
  }
  if (cpu_percent_ >= kCpuBusyPercent) {
    reasons.push_back("cpu_busy");
    details.push_back(fmt::format("CPU {:.0f}% over the last {:.0f}s (threshold {:.0f}%)",
                                  cpu_percent_, cpu_window_s_, kCpuBusyPercent));
  }
  out["reasons"] = reasons;
  out["details"] = details;
  out["active"] = !reasons.empty();
  return out;
}

}  // namespace berth::agent
