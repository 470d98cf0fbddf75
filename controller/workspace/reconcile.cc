// Reconciliation: the store says what should be, the hypervisor what is, and the files on disk
// what exists. Run at start-up (after a crash, any operation may have been cut anywhere) and
// periodically. Every case ends in a defined state, and nothing here deletes a disk: only
// DeleteOp does, for an explicit DELETE.
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "controller/workspace/service.h"
#include "controller/workspace/service_runtime.h"

namespace berth::workspace {

namespace fs = std::filesystem;
using hypervisor::DomainState;

void WorkspaceService::Reconcile() {
  if (stopping_) return;
  auto records = store_.ListAllWorkspaces();
  if (!records) {
    spdlog::error("reconcile: reading workspaces: {}", records.error().message);
    return;
  }
  auto domains = hypervisor_.List("berth-ws_");
  if (!domains) {
    spdlog::error("reconcile: listing domains: {}", domains.error().message);
    return;
  }
  std::map<std::string, DomainState> by_name;
  for (const auto& d : *domains) by_name[d.name] = d.state;

  std::set<std::string> known;
  for (auto& ws : *records) {
    known.insert(ws.DomainName());
    auto rt = RuntimeFor(ws.id);
    {
      std::lock_guard lock(mutex_);
      if (rt->pending_ops > 0) continue;  // an operation owns it right now
      rt->state = ws.state;
      if (rt->last_activity == 0) rt->last_activity = ws.last_active_at.value_or(ws.updated_at);
    }
    auto it = by_name.find(ws.DomainName());
    ReconcileOne(ws, it == by_name.end() ? DomainState::kMissing : it->second);
  }
  // A VM of ours (its files are under our data directory) with no record: stop it and drop
  // its definition. Its disks stay where they are, for an operator to look at.
  for (const auto& [name, state] : by_name) {
    if (known.contains(name)) continue;
    std::string id = name.substr(std::string_view("berth-").size());
    std::error_code ec;
    if (!fs::exists(LayoutFor(id).dir, ec)) continue;  // another berthd's, or not ours
    spdlog::warn("reconcile: domain {} has no workspace record; destroying it (disks kept in {})",
                 name, LayoutFor(id).dir.string());
    hypervisor_.Destroy(name);
    hypervisor_.Undefine(name);
  }
}

void WorkspaceService::ReconcileOne(Workspace ws, DomainState domain) {
  const std::string id = ws.id;
  bool up = domain == DomainState::kRunning || domain == DomainState::kPaused;
  switch (ws.state) {
    case State::kCreating:
      Spawn(id, [this, id] { FinishCreate(id); });
      return;
    case State::kStarting:
      Spawn(id, [this, id] { Boot(id, false); });
      return;
    case State::kRunning:
      if (up) return;
      transport_->AfterStop(ws, LayoutFor(id), domain == DomainState::kSaved);
      store_.CloseUsage(id, Now());
      if (domain == DomainState::kSaved) {
        Transition(ws, State::kHibernated, "reconciled", "the VM had been saved");
      } else {
        Transition(ws, State::kStopped, "reconciled",
                   fmt::format("the VM was not running ({})", hypervisor::DomainStateName(domain)));
      }
      return;
    case State::kStopping:
      Spawn(id, [this, id] { StopOp(id, false, "stopped"); });
      return;
    case State::kHibernating:
      if (domain == DomainState::kSaved) {
        store_.CloseUsage(id, Now());
        Transition(ws, State::kHibernated, "hibernated", "the save had completed");
      } else if (up) {
        Spawn(id, [this, id] { HibernateOp(id, "hibernated"); });
      } else {
        store_.CloseUsage(id, Now());
        Transition(ws, State::kStopped, "reconciled",
                   "the hibernation was cut short; the next start boots from disk");
      }
      return;
    case State::kHibernated:
      if (domain == DomainState::kSaved) return;
      if (up) {
        if (Transition(ws, State::kStarting, "reconciled", "the VM was running; adopting it")) {
          Spawn(id, [this, id] { Boot(id, false); });
        }
      } else {
        Transition(ws, State::kStopped, "reconciled",
                   "the saved memory image is gone; the next start boots from disk");
      }
      return;
    case State::kStopped:
      if (up) {
        if (Transition(ws, State::kStarting, "reconciled", "the VM was running; adopting it")) {
          Spawn(id, [this, id] { Boot(id, false); });
        }
      }
      return;
    case State::kDeleting:
      Spawn(id, [this, id] { DeleteOp(id); });
      return;
    case State::kError:
      return;
  }
}

}  // namespace berth::workspace
