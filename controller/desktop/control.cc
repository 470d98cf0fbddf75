#include "controller/desktop/control.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/json.h"
#include "common/v1/time.h"

namespace berth::desktop {

std::string_view HolderName(Holder holder) { return holder == Holder::kHuman ? "human" : "agent"; }

nlohmann::json ControlState::ToJson() const {
  nlohmann::json j = {{"holder", HolderName(holder)},
                      {"since", since == 0 ? nlohmann::json(nullptr) : nlohmann::json(v1::FormatTime(since))},
                      {"by", by.empty() ? nlohmann::json(nullptr) : nlohmann::json(by)},
                      {"lease_expires", lease_expires ? nlohmann::json(v1::FormatTime(*lease_expires))
                                                      : nlohmann::json(nullptr)},
                      {"reason", reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason)},
                      {"private", is_private},
                      {"revision", revision}};
  j["request"] = request ? nlohmann::json{{"reason", request->reason},
                                          {"since", v1::FormatTime(request->since)},
                                          {"by", request->by},
                                          {"taken", request->taken}}
                         : nlohmann::json(nullptr);
  j["handback"] = handback ? nlohmann::json{{"note", handback->note},
                                            {"by", handback->by},
                                            {"cause", handback->cause},
                                            {"at", v1::FormatTime(handback->at)},
                                            {"request", handback->request.empty() ? nlohmann::json(nullptr)
                                                                                  : nlohmann::json(handback->request)},
                                            {"tabs_before", handback->tabs_before},
                                            {"tabs_after", handback->tabs_after}}
                           : nlohmann::json(nullptr);
  return j;
}

ControlState DesktopControl::Get(const std::string& workspace_id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(workspace_id);
  return it == entries_.end() ? ControlState{} : it->second.state;
}

Result<ControlChange> DesktopControl::Takeover(const std::string& workspace_id, const std::string& by,
                                               const std::string& reason, bool is_private, nlohmann::json tabs,
                                               std::optional<std::chrono::seconds> lease) {
  int64_t now = clock_();
  auto length = std::clamp(lease.value_or(options_.lease), std::chrono::seconds(1), options_.lease);
  std::lock_guard lock(mutex_);
  Entry& e = entries_[workspace_id];
  ControlChange out;
  if (e.state.holder == Holder::kHuman) {
    if (e.state.by != by) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{} has held the desktop since {}: they hand back first", e.state.by,
                              v1::FormatTime(e.state.since)));
    }
    if (lease) e.lease = length;
    e.state.lease_expires = now + e.lease.count();  // the same person again: a renewal
    out.state = e.state;
    return out;
  }
  FlushBurst(workspace_id, e.agent, false, out.events);
  e.state.holder = Holder::kHuman;
  e.state.since = now;
  e.state.by = by;
  e.lease = length;
  e.state.lease_expires = now + e.lease.count();
  e.state.reason = reason;
  e.state.is_private = is_private;
  if (e.state.request) e.state.request->taken = true;
  e.tabs_before = std::move(tabs);
  if (e.control_viewers == 0) e.grace_until = now + options_.viewer_grace.count();
  e.state.revision = ++last_revision_;
  ControlEvent ev{workspace_id, "desktop_control_taken",
                  fmt::format("{} took over the desktop{}{}", by, is_private ? " (private)" : "",
                              reason.empty() ? "" : ": " + reason)};
  ev.data = {{"by", by}, {"reason", reason}, {"private", is_private},
             {"lease_expires", v1::FormatTime(*e.state.lease_expires)}};
  out.events.push_back(std::move(ev));
  out.state = e.state;
  return out;
}

void DesktopControl::ReleaseLocked(const std::string& id, Entry& e, const std::string& by,
                                   const std::string& note, const std::string& cause, int64_t now,
                                   std::vector<ControlEvent>& out, nlohmann::json tabs_after) {
  FlushBurst(id, e.human, true, out);
  ControlEvent ev{id, "desktop_control_released",
                  fmt::format("control back to the agent ({}){}", cause, note.empty() ? "" : ": " + note)};
  ev.data = {{"by", by}, {"held_by", e.state.by}, {"cause", cause}, {"note", note},
             {"held_s", now - e.state.since}, {"private", e.state.is_private}};
  Handback handback;
  handback.note = note;
  handback.by = by;
  handback.cause = cause;
  handback.at = now;
  handback.tabs_before = std::move(e.tabs_before);
  handback.tabs_after = std::move(tabs_after);
  e.tabs_before = nullptr;
  ev.data["tabs_before"] = handback.tabs_before;
  ev.data["tabs_after"] = handback.tabs_after;
  out.push_back(std::move(ev));
  std::optional<HelpRequest> request = std::move(e.state.request);
  if (request && request->taken) {
    handback.request = request->reason;
    handback.request_id = request->id;
    request.reset();  // answered
  }
  e.state = ControlState{};
  e.state.since = now;
  e.state.by = by;
  e.state.request = std::move(request);
  e.state.handback = std::move(handback);
  e.state.revision = ++last_revision_;
  e.grace_until.reset();
}

ControlChange DesktopControl::RequestHelp(const std::string& workspace_id, const std::string& by,
                                          const std::string& reason) {
  int64_t now = clock_();
  std::lock_guard lock(mutex_);
  Entry& e = entries_[workspace_id];
  ControlChange out;
  e.state.request = HelpRequest{next_request_++, reason, now, by, e.state.holder == Holder::kHuman};
  e.state.revision = ++last_revision_;
  ControlEvent ev{workspace_id, "desktop_help_requested", fmt::format("the agent asks a person to take over: {}", reason)};
  ev.data = {{"by", by}, {"reason", reason}};
  out.events.push_back(std::move(ev));
  out.state = e.state;
  return out;
}

ControlChange DesktopControl::WithdrawHelp(const std::string& workspace_id, const std::string& by) {
  std::lock_guard lock(mutex_);
  ControlChange out;
  auto it = entries_.find(workspace_id);
  if (it == entries_.end()) return out;
  Entry& e = it->second;
  if (e.state.request && !e.state.request->taken) {
    ControlEvent ev{workspace_id, "desktop_help_withdrawn",
                    fmt::format("the agent no longer waits for a person: {}", e.state.request->reason)};
    ev.data = {{"by", by}, {"reason", e.state.request->reason}};
    out.events.push_back(std::move(ev));
    e.state.request.reset();
    e.state.revision = ++last_revision_;
  }
  out.state = e.state;
  return out;
}

ControlChange DesktopControl::Release(const std::string& workspace_id, const std::string& by,
                                      const std::string& note, nlohmann::json tabs) {
  int64_t now = clock_();
  std::lock_guard lock(mutex_);
  ControlChange out;
  auto it = entries_.find(workspace_id);
  if (it == entries_.end() || it->second.state.holder != Holder::kHuman) {
    if (it != entries_.end()) out.state = it->second.state;
    return out;
  }
  ReleaseLocked(workspace_id, it->second, by, note, "released", now, out.events, std::move(tabs));
  out.state = it->second.state;
  return out;
}

bool DesktopControl::InputAllowed(const std::string& workspace_id, ViewerMode mode) const {
  if (mode != ViewerMode::kControl) return false;
  std::lock_guard lock(mutex_);
  auto it = entries_.find(workspace_id);
  return it != entries_.end() && it->second.state.holder == Holder::kHuman;
}

std::string ControlEvent::Actor() const {
  auto by = data.find("by");
  if (by == data.end() || !by->is_string()) return std::string(store::kSystemActor);
  const auto& key = by->get_ref<const std::string&>();
  if (key.empty() || key == kBerthdActor) return std::string(store::kSystemActor);
  return store::KeyActor(key);
}

void DesktopControl::FlushBurst(const std::string& id, std::optional<Burst>& burst, bool human,
                                std::vector<ControlEvent>& out) {
  if (!burst) return;
  ControlEvent ev{id, "desktop_input",
                  fmt::format("{} input: {} click(s), {} key(s)", human ? "human" : "agent", burst->clicks,
                              burst->keys)};
  ev.data = {{"actor", human ? "human" : "agent"}, {"by", burst->by}, {"clicks", burst->clicks},
             {"keys", burst->keys}, {"messages", burst->messages}, {"from", v1::FormatTime(burst->from)},
             {"to", v1::FormatTime(burst->last)}};
  out.push_back(std::move(ev));
  burst.reset();
}

std::vector<ControlEvent> DesktopControl::NoteInput(const std::string& workspace_id, bool human,
                                                    const std::string& by, int clicks, int keys) {
  int64_t now = clock_();
  std::vector<ControlEvent> out;
  std::lock_guard lock(mutex_);
  Entry& e = entries_[workspace_id];
  auto& burst = human ? e.human : e.agent;
  if (burst && (now - burst->last >= options_.burst_gap.count() || burst->by != by)) {
    FlushBurst(workspace_id, burst, human, out);
  }
  if (!burst) burst = Burst{by, now, now, 0, 0, 0};
  burst->last = now;
  burst->clicks += clicks;
  burst->keys += keys;
  burst->messages += 1;
  if (human && e.state.holder == Holder::kHuman) e.state.lease_expires = now + e.lease.count();
  return out;
}

void DesktopControl::ViewerOpened(const std::string& workspace_id, ViewerMode mode) {
  std::lock_guard lock(mutex_);
  Entry& e = entries_[workspace_id];
  e.viewers += 1;
  if (mode == ViewerMode::kControl) {
    e.control_viewers += 1;
    e.grace_until.reset();
  }
}

void DesktopControl::ViewerClosed(const std::string& workspace_id, ViewerMode mode) {
  int64_t now = clock_();
  std::lock_guard lock(mutex_);
  auto it = entries_.find(workspace_id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.viewers = std::max(0, e.viewers - 1);
  if (mode == ViewerMode::kControl) {
    e.control_viewers = std::max(0, e.control_viewers - 1);
    if (e.control_viewers == 0 && e.state.holder == Holder::kHuman) {
      e.grace_until = now + options_.viewer_grace.count();
    }
  }
}

std::vector<ControlEvent> DesktopControl::Tick() {
  int64_t now = clock_();
  std::vector<ControlEvent> out;
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const std::string& id = it->first;
    Entry& e = it->second;
    if (e.human && now - e.human->last >= options_.burst_gap.count()) FlushBurst(id, e.human, true, out);
    if (e.agent && now - e.agent->last >= options_.burst_gap.count()) FlushBurst(id, e.agent, false, out);
    if (e.state.holder == Holder::kHuman) {
      if (e.state.lease_expires && *e.state.lease_expires <= now) {
        ReleaseLocked(id, e, std::string(kBerthdActor), "", "lease_expired", now, out);
      } else if (e.grace_until && *e.grace_until <= now && e.control_viewers == 0) {
        ReleaseLocked(id, e, std::string(kBerthdActor), "", "viewer_gone", now, out);
      }
    }
    // Nothing left to remember: the agent holds it, nobody watches, no burst is open, no help
    // request is open, and the last hand-back is old news (an hour: the agent has read it).
    const bool recent_handback = e.state.handback && now - e.state.handback->at < kHandbackKept.count();
    if (e.state.holder == Holder::kAgent && e.viewers == 0 && !e.human && !e.agent && !e.state.request &&
        !recent_handback) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<ControlEvent> DesktopControl::ReleaseAll(const std::string& cause) {
  int64_t now = clock_();
  std::vector<ControlEvent> out;
  std::lock_guard lock(mutex_);
  for (auto& [id, e] : entries_) {
    FlushBurst(id, e.agent, false, out);
    if (e.state.holder == Holder::kHuman) {
      ReleaseLocked(id, e, std::string(kBerthdActor), "", cause, now, out);
    } else {
      FlushBurst(id, e.human, true, out);
    }
  }
  return out;
}

Status DesktopControl::CheckAgentInput(const std::string& workspace_id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(workspace_id);
  if (it == entries_.end() || it->second.state.holder != Holder::kHuman) return {};
  const ControlState& s = it->second.state;
  return Fail(Error(ErrorCode::kLocked,
                    fmt::format("a person ({}) has held the desktop since {}: the agent's input waits until "
                                "they hand back (GET …/desktop/control?wait=release)",
                                s.by, v1::FormatTime(s.since)),
                    DumpJson(s.ToJson())));
}

Status DesktopControl::CheckAgentScreen(const std::string& workspace_id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(workspace_id);
  if (it == entries_.end() || it->second.state.holder != Holder::kHuman || !it->second.state.is_private) return {};
  const ControlState& s = it->second.state;
  return Fail(Error(ErrorCode::kLocked,
                    fmt::format("a person ({}) has held the desktop privately since {}: the screen is theirs "
                                "alone until they hand back (GET …/desktop/control?wait=release)",
                                s.by, v1::FormatTime(s.since)),
                    DumpJson(s.ToJson())));
}

}  // namespace berth::desktop
