// The idle loop (DESIGN.md, "Idle"): a running workspace is awake while berthd sees API
// traffic or open streams to it, or its agent reports processes started through the API, a
// busy CPU, or keep-awake leases. When none of these has been true for `idle_timeout`,
// `idle_action` runs. `max_runtime` stops a workspace however busy it is.
//
// Every tick starts one check per running workspace, each on its own strand and each with its
// own deadline for the agent's answer, so a slow or hostile guest delays only its own check; a
// workspace whose previous check is still waiting is skipped until it is done.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace asio = boost::asio;

namespace {

// What the agent's GET /v1/activity says keeps the guest awake. A guest is not trusted: any
// field may be missing or of the wrong type, and nothing of it is copied but what is shown.
std::vector<std::string> GuestReasons(const nlohmann::json& a, bool cpu_counts) {
  std::vector<std::string> reasons;
  if (!a.is_object()) return reasons;
  if (auto procs = a.find("running_processes");
      procs != a.end() && procs->is_number_integer() && procs->get<int64_t>() > 0) {
    int64_t n = procs->get<int64_t>();
    reasons.push_back(fmt::format("{} process{} started through the API", n, n == 1 ? "" : "es"));
  }
  if (auto cpu = a.find("cpu"); cpu_counts && cpu != a.end() && cpu->is_object()) {
    auto pct = cpu->find("percent");
    auto threshold = cpu->find("busy_threshold_percent");
    double limit = threshold != cpu->end() && threshold->is_number() ? threshold->get<double>() : 100.0;
    if (pct != cpu->end() && pct->is_number() && pct->get<double>() >= limit) {
      reasons.push_back(fmt::format("guest CPU at {:.0f}%", pct->get<double>()));
    }
  }
  if (auto leases = a.find("leases"); leases != a.end() && leases->is_array()) {
    for (const auto& lease : *leases) {
      if (reasons.size() >= 20) break;
      // The guest writes this: anything but a string is ignored, never thrown on.
      std::string why;
      if (lease.is_object()) {
        if (auto r = lease.find("reason"); r != lease.end() && r->is_string()) {
          const auto& text = r->get_ref<const std::string&>();
          why = text.substr(0, 200);
        }
      }
      reasons.push_back(why.empty() ? "keep-awake lease" : "keep-awake lease: " + why);
    }
  }
  return reasons;
}

}  // namespace

Task<void> WorkspaceService::IdleLoop() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping_) {
    timer.expires_after(options_.idle_poll);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || stopping_) co_return;
    IdleTick();
  }
}

void WorkspaceService::IdleTick() {
  for (auto& a : AllActors()) {
    auto check = [this, a]() { return IdleCheck(a); };
    asio::co_spawn(a->strand(), std::move(check), asio::detached);
  }
}

void WorkspaceService::IdleTickForTest(bool wait) {
  if (!wait) {
    IdleTick();
    return;
  }
  std::vector<std::future<void>> done;
  for (auto& a : AllActors()) {
    auto check = [this, a]() { return IdleCheck(a); };
    done.push_back(asio::co_spawn(a->strand(), std::move(check), asio::use_future));
  }
  for (auto& d : done) d.get();
}

Task<void> WorkspaceService::IdleCheck(ActorPtr a) {
  if (stopping_ || a->record().state != State::kRunning || a->pending_ops() > 0 || a->idle_check_running) {
    co_return;
  }
  a->idle_check_running = true;
  struct Done {
    Actor& actor;
    ~Done() { actor.idle_check_running = false; }
  } done{*a};

  std::vector<std::string> guest;
  if (auto link = a->link()) {
    auto activity = co_await Probe(*link, options_.probe_deadline);
    if (activity) guest = GuestReasons(*activity, !transport_->SharesHostCpu());
  }
  // Refused connections and names since the last check: at most one event a minute.
  if (options_.network) {
    auto ws = a->record();
    auto take = [this, ws] { return options_.network->TakeDenied(ws); };
    auto denied = co_await Blocking(std::move(take));
    if (denied) {
      nlohmann::json destinations = nlohmann::json::array();
      for (const auto& d : denied->destinations) destinations.push_back(fmt::format("{}:{}", d.address, d.port));
      nlohmann::json names = nlohmann::json::array();
      for (const auto& n : denied->refused_names) names.push_back(n.name);
      nlohmann::json data = {{"connections", denied->connections},
                             {"names", denied->names},
                             {"destinations", destinations},
                             {"refused_names", names}};
      Record(*a, "egress_denied",
             fmt::format("{} connection{} and {} name{} refused", denied->connections,
                         denied->connections == 1 ? "" : "s", denied->names, denied->names == 1 ? "" : "s"),
             data, store::kGuestActor);
    }
  }
  // The world may have moved on while the guest answered.
  if (stopping_ || a->record().state != State::kRunning || a->pending_ops() > 0) co_return;
  const Workspace& ws = a->record();
  int64_t now = Now();
  if (a->streams_open() || !guest.empty()) a->NoteActivity(now);
  a->SetGuestReasons(guest);
  int64_t last = std::max({a->last_activity(), ws.last_active_at.value_or(0), ws.started_at.value_or(0)});
  a->SetIdleAt(last + ws.idle_timeout_s);
  // last_active_at is for the API and for a restarted berthd; once a minute is enough.
  if (last - a->persisted_activity >= 60 || (last > a->persisted_activity && now - last > 5)) {
    a->persisted_activity = last;
    if (last > ws.last_active_at.value_or(0)) {
      Workspace fresh = ws;
      fresh.last_active_at = last;
      if (auto s = Commit(*a, std::move(fresh)); !s) co_return;  // logged by Commit
    }
  }

  co_await MaybeRollCheckpoint(a, now, last);
  if (stopping_ || a->record().state != State::kRunning || a->pending_ops() > 0) co_return;
  const Workspace& cur = a->record();
  bool over_runtime = cur.max_runtime_s && cur.started_at && now >= *cur.started_at + *cur.max_runtime_s;
  bool idle = now >= last + cur.idle_timeout_s;
  if (!over_runtime && !idle) co_return;
  // A request that arrived since the check keeps it awake.
  if (!over_runtime && (a->streams_open() || a->last_activity() > last)) co_return;
  if (over_runtime) {
    auto message = fmt::format("ran for its max_runtime of {} s", *cur.max_runtime_s);
    if (auto s = Transition(*a, State::kStopping, "max_runtime", message); !s) co_return;
    a->Enqueue([this, a] { return StopOp(a, false, "stopped"); });
    co_return;
  }
  auto message = fmt::format("idle for {} s", now - last);
  if (cur.idle_action == IdleAction::kHibernate) {
    if (auto s = Transition(*a, State::kHibernating, "hibernating", message); !s) co_return;
    a->Enqueue([this, a] { return HibernateOp(a, "hibernated_by_idle"); });
  } else {
    if (auto s = Transition(*a, State::kStopping, "stopping", message); !s) co_return;
    a->Enqueue([this, a] { return StopOp(a, false, "stopped_by_idle"); });
  }
}

}  // namespace berth::workspace
