// How a workspace's record changes: on its strand, stored first, then made the owner's record
// and published with its timeline event. Nothing else writes a workspace's record.
#include <spdlog/spdlog.h>

#include "controller/workspace/service_internal.h"

namespace berth::workspace {

Status WorkspaceService::Commit(Actor& actor, Workspace ws, const std::string& event,
                                const std::string& message, const nlohmann::json& data) {
  Change change;
  if (event.empty()) {
    if (auto s = store_.UpdateWorkspace(ws); !s) {
      spdlog::error("workspace {}: writing: {}", ws.id, s.error().message);
      return s;
    }
  } else {
    // The change and its event in one transaction: a berthd killed between the two would leave
    // a state on record that no event reports. Each event names the state it leaves the
    // workspace in, so the timeline alone tells every state the workspace went through.
    store::NewEvent line{Now(), event, message, data.is_object() ? data : nlohmann::json::object(),
                         actor.event_actor};
    line.data["state"] = std::string(StateName(ws.state));
    auto added = store_.UpdateWorkspace(ws, line);
    if (!added) {
      spdlog::error("workspace {}: writing ({}): {}", ws.id, event, added.error().message);
      return Fail(added.error());
    }
    change.event = std::move(*added);
    spdlog::info("workspace {} ({}): {}{}{}", ws.id, ws.name, event, message.empty() ? "" : ": ", message);
  }
  const Workspace& old = actor.record();
  if (old.name != ws.name) {
    std::lock_guard lock(registry_mutex_);
    auto it = by_name_.find({old.tenant_id, old.name});
    if (it != by_name_.end() && it->second == ws.id) by_name_.erase(it);
    by_name_[{ws.tenant_id, ws.name}] = ws.id;
  }
  change.tenant_id = ws.tenant_id;
  change.workspace_id = ws.id;
  change.workspace = ws;
  actor.SetRecord(std::move(ws));
  feed_.Publish(change);
  return {};
}

Status WorkspaceService::Transition(Actor& actor, State state, const std::string& event,
                                    const std::string& message, std::optional<std::string> error) {
  Workspace ws = actor.record();
  ws.state = state;
  ws.error = std::move(error);
  ws.updated_at = Now();
  return Commit(actor, std::move(ws), event, message);
}

void WorkspaceService::Record(const Actor& actor, const std::string& type, const std::string& message,
                              const nlohmann::json& data, std::string_view by) {
  const Workspace& ws = actor.record();
  auto added = store_.AddEvent(ws.id, ws.tenant_id, store::NewEvent{Now(), type, message, data, by.empty() ? actor.event_actor : std::string(by)});
  spdlog::info("workspace {} ({}): {}{}{}", ws.id, ws.name, type, message.empty() ? "" : ": ", message);
  if (!added) {
    spdlog::warn("workspace {}: event {}: {}", ws.id, type, added.error().message);
    return;
  }
  Change change;
  change.tenant_id = ws.tenant_id;
  change.workspace_id = ws.id;
  change.event = std::move(*added);
  feed_.Publish(change);
}

void WorkspaceService::EnterError(Actor& actor, const std::string& message) {
  if (auto s = Transition(actor, State::kError, "error", message, message); !s) {
    // The store refused the write: the record stays as it was, in a transitional state the
    // reconciler picks up again.
    spdlog::error("workspace {}: cannot record the error '{}': {}", actor.id(), message, s.error().message);
  }
}

}  // namespace berth::workspace
