// The idle loop (DESIGN.md, "Idle"): a running workspace is awake while berthd sees API
// traffic or open streams to it, or its agent reports processes started through the API, a
// busy CPU, or keep-awake leases. When none of these has been true for `idle_timeout`,
// `idle_action` runs. `max_runtime` stops a workspace however busy it is.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "controller/workspace/service.h"
#include "controller/workspace/service_runtime.h"

namespace berth::workspace {

namespace {

// What the agent's GET /v1/activity says keeps the guest awake. A guest is not trusted: any
// field may be missing or of the wrong type.
std::vector<std::string> GuestReasons(const nlohmann::json& a, bool cpu_counts) {
  std::vector<std::string> reasons;
  if (!a.is_object()) return reasons;
  auto procs = a.value("running_processes", nlohmann::json(0));
  if (procs.is_number_integer() && procs.get<int64_t>() > 0) {
    reasons.push_back(fmt::format("{} process{} started through the API", procs.get<int64_t>(),
                                  procs.get<int64_t>() == 1 ? "" : "es"));
  }
  if (auto cpu = a.find("cpu"); cpu_counts && cpu != a.end() && cpu->is_object()) {
    auto pct = cpu->value("percent", nlohmann::json(0.0));
    auto threshold = cpu->value("busy_threshold_percent", nlohmann::json(100.0));
    if (pct.is_number() && threshold.is_number() && pct.get<double>() >= threshold.get<double>()) {
      reasons.push_back(fmt::format("guest CPU at {:.0f}%", pct.get<double>()));
    }
  }
  if (auto leases = a.find("leases"); leases != a.end() && leases->is_array()) {
    for (const auto& lease : *leases) {
      if (reasons.size() >= 20) break;
      // The guest writes this: anything but a string is ignored, never thrown on.
      std::string why;
      if (lease.is_object() && lease.contains("reason") && lease["reason"].is_string()) {
        why = lease["reason"].get<std::string>();
      }
      if (why.size() > 200) why.resize(200);
      reasons.push_back(why.empty() ? "keep-awake lease" : "keep-awake lease: " + why);
    }
  }
  return reasons;
}

}  // namespace

void WorkspaceService::IdleTick() {
  if (stopping_) return;
  auto all = store_.ListAllWorkspaces();
  if (!all) return;
  for (const auto& ws : *all) {
    if (stopping_) return;
    if (ws.state != State::kRunning) continue;
    {
      std::lock_guard lock(mutex_);
      auto it = runtimes_.find(ws.id);
      if (it != runtimes_.end() && it->second->pending_ops > 0) continue;
    }
    IdleCheck(ws);
  }
}

void WorkspaceService::IdleCheck(const Workspace& ws) {
  std::vector<std::string> guest;
  if (auto link = Link(ws.id)) {
    auto activity = options_.probe(*link, std::chrono::milliseconds(3000));
    if (activity) guest = GuestReasons(*activity, !transport_->SharesHostCpu());
  }
  int64_t now = Now();
  auto rt = RuntimeFor(ws.id);
  int64_t last = 0;
  bool streams_open = false;
  bool persist = false;
  {
    std::lock_guard lock(mutex_);
    streams_open = !rt->streams.empty();
    if (streams_open || !guest.empty()) rt->last_activity = now;
    rt->guest_reasons = guest;
    last = std::max({rt->last_activity, ws.last_active_at.value_or(0), ws.started_at.value_or(0)});
    rt->idle_at = last + ws.idle_timeout_s;
    // last_active_at is for the API and for a restarted berthd; once a minute is enough.
    if (rt->last_activity - rt->last_persisted_activity >= 60 ||
        (rt->last_activity > rt->last_persisted_activity && now - rt->last_activity > 5)) {
      rt->last_persisted_activity = rt->last_activity;
      persist = rt->last_activity > ws.last_active_at.value_or(0);
    }
  }
  if (persist) {
    Modify(ws.id, [&](Workspace& fresh) -> Status {
      if (last > fresh.last_active_at.value_or(0)) fresh.last_active_at = last;
      return {};
    });
  }

  bool over_runtime = ws.max_runtime_s && ws.started_at && now >= *ws.started_at + *ws.max_runtime_s;
  bool idle = now >= last + ws.idle_timeout_s;
  if (!over_runtime && !idle) return;

  std::lock_guard api(api_mutex_);
  auto fresh = store_.GetWorkspaceById(ws.id);
  if (!fresh || fresh->state != State::kRunning) return;
  {
    std::lock_guard lock(mutex_);
    // A request that arrived since the check keeps it awake.
    if (!over_runtime && (!rt->streams.empty() || rt->last_activity > last)) return;
  }
  std::string id = fresh->id;
  if (over_runtime) {
    if (Transition(*fresh, State::kStopping, "max_runtime",
                   fmt::format("ran for its max_runtime of {} s", *ws.max_runtime_s))) {
      Spawn(id, [this, id] { StopOp(id, false, "stopped"); });
    }
    return;
  }
  auto message = fmt::format("idle for {} s", now - last);
  if (fresh->idle_action == IdleAction::kHibernate) {
    if (Transition(*fresh, State::kHibernating, "hibernating", message)) {
      Spawn(id, [this, id] { HibernateOp(id, "hibernated_by_idle"); });
    }
  } else {
    if (Transition(*fresh, State::kStopping, "stopping", message)) {
      Spawn(id, [this, id] { StopOp(id, false, "stopped_by_idle"); });
    }
  }
}

}  // namespace berth::workspace
