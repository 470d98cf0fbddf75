// Reconciliation: the records say what should be, the hypervisor what is, and the files on
// disk what exists. Run at start-up (after a crash, any operation may have been cut anywhere)
// and periodically. Every case ends in a defined state, and nothing here deletes a disk: only
// DeleteOp does, for an explicit DELETE.
#include <set>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <spdlog/spdlog.h>

#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using hypervisor::DomainState;

Task<void> WorkspaceService::ReconcileLoop() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping_) {
    timer.expires_after(options_.reconcile_every);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || stopping_) co_return;
    co_await ReconcileAll();
  }
}

void WorkspaceService::ReconcileForTest() {
  auto pass = [this] { return ReconcileAll(); };
  asio::co_spawn(loops_, std::move(pass), asio::use_future).get();
}

Task<void> WorkspaceService::ReconcileAll() {
  if (stopping_) co_return;
  auto list = [this] { return hypervisor_.List("berth-ws_"); };
  auto domains = co_await Blocking(std::move(list));
  if (!domains) {
    spdlog::error("reconcile: listing domains: {}", domains.error().message);
    co_return;
  }
  std::map<std::string, DomainState> by_name;
  for (const auto& d : *domains) by_name[d.name] = d.state;

  std::set<std::string> known;
  for (const auto& a : AllActors()) {
    std::string name = "berth-" + a->id();
    known.insert(name);
    auto it = by_name.find(name);
    DomainState domain = it == by_name.end() ? DomainState::kMissing : it->second;
    // Decided on the workspace's strand, one after another: the decision is a moment's work
    // (what it starts is queued there).
    auto decide = [this, a, domain] { ReconcileOne(a, domain); };
    co_await OnStrand(a, std::move(decide));
  }
  // A VM of ours (its files are under our data directory) with no record: stop it and drop
  // its definition. Its disks stay where they are, for an operator to look at.
  std::vector<std::string> orphans;
  for (const auto& [name, state] : by_name) {
    if (known.contains(name)) continue;
    std::string id = name.substr(std::string_view("berth-").size());
    std::error_code ec;
    if (!fs::exists(LayoutFor(id).dir, ec)) continue;  // another berthd's, or not ours
    orphans.push_back(name);
  }
  if (orphans.empty()) co_return;
  auto drop = [this, orphans] {
    for (const auto& name : orphans) {
      spdlog::warn("reconcile: domain {} has no workspace record; destroying it (its disks are kept)", name);
      if (auto s = hypervisor_.Destroy(name); !s) spdlog::warn("reconcile: {}: {}", name, s.error().message);
      if (auto s = hypervisor_.Undefine(name); !s) spdlog::warn("reconcile: {}: {}", name, s.error().message);
    }
  };
  co_await Blocking(std::move(drop));
}

void WorkspaceService::ReconcileOne(const ActorPtr& a, DomainState domain) {
  if (stopping_ || a->pending_ops() > 0) return;  // an operation owns it right now
  bool up = domain == DomainState::kRunning || domain == DomainState::kPaused;
  // Each case moves the workspace to a defined state or queues the operation that does.
  auto queue = [this, &a](Actor::Op op) { a->Enqueue(std::move(op)); };
  auto moved = [&](State to, const std::string& event, const std::string& message) {
    if (auto s = Transition(*a, to, event, message); !s) {
      spdlog::error("reconcile {}: {}", a->id(), s.error().message);
      return false;
    }
    return true;
  };
  auto close_usage = [&] {
    if (auto s = store_.CloseUsage(a->id(), Now()); !s) spdlog::warn("usage for {}: {}", a->id(), s.error().message);
  };
  switch (a->record().state) {
    case State::kCreating:
      queue([this, a] { return FinishCreate(a); });
      return;
    case State::kStarting:
      queue([this, a] { return Boot(a, false); });
      return;
    case State::kRunning:
      if (up) {
        // Adopted after a restart: the agent's link is read again from this boot's files.
        if (!a->link()) {
          if (auto link = ReadLink(a->record())) a->SetLink(*link);
        }
        return;
      }
      queue([this, a, domain]() -> Task<void> {
        co_await Stopped(a, domain == DomainState::kSaved);
        if (stopping_ || a->record().state != State::kRunning) co_return;
        Status s = domain == DomainState::kSaved
                       ? Transition(*a, State::kHibernated, "reconciled", "the VM had been saved")
                       : Transition(*a, State::kStopped, "reconciled",
                                    fmt::format("the VM was not running ({})", hypervisor::DomainStateName(domain)));
        if (!s) co_return;  // logged by Commit
      });
      return;
    case State::kStopping:
      queue([this, a] { return StopOp(a, false, "stopped"); });
      return;
    case State::kHibernating:
      if (domain == DomainState::kSaved) {
        close_usage();
        moved(State::kHibernated, "hibernated", "the save had completed");
      } else if (up) {
        queue([this, a] { return HibernateOp(a, "hibernated"); });
      } else {
        close_usage();
        moved(State::kStopped, "reconciled", "the hibernation was cut short; the next start boots from disk");
      }
      return;
    case State::kHibernated:
      if (domain == DomainState::kSaved) return;
      if (up) {
        if (moved(State::kStarting, "reconciled", "the VM was running; adopting it")) {
          queue([this, a] { return Boot(a, false); });
        }
      } else {
        moved(State::kStopped, "reconciled", "the saved memory image is gone; the next start boots from disk");
      }
      return;
    case State::kStopped:
      if (up && moved(State::kStarting, "reconciled", "the VM was running; adopting it")) {
        queue([this, a] { return Boot(a, false); });
      }
      return;
    case State::kDeleting:
      queue([this, a] { return DeleteOp(a); });
      return;
    case State::kError:
      return;
  }
}

// --- creates cut short ---------------------------------------------------------------------------

void WorkspaceService::DropUnrecordedCreates(const std::vector<Workspace>& records) {
  std::set<std::string> ids;
  for (const auto& ws : records) ids.insert(ws.id);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.data_dir / "workspaces", ec)) {
    std::string id = entry.path().filename().string();
    std::error_code fec;
    if (ids.contains(id) || !id.starts_with("ws_") || !entry.is_directory(fec)) continue;
    // CreateBlocking makes the directory and the hold, then stores the record; the disks are
    // made only after that. A directory with a disk in it was not left by a create: it is
    // kept for an operator (no disk is deleted except by DeleteOp).
    Layout layout = LayoutFor(id);
    bool has_disk = false;
    for (const auto& file : fs::directory_iterator(layout.dir, fec)) {
      std::string name = file.path().filename().string();
      has_disk = has_disk || name.starts_with("root.qcow2") || name.starts_with("data.qcow2") ||
                 Layout::LayerGen(name).has_value();
    }
    if (has_disk) {
      spdlog::warn("workspaces: {} has disks but no record; leaving it for an operator", layout.dir.string());
      continue;
    }
    spdlog::info("workspaces: removing {}, left by a create cut short before its record was stored",
                 layout.dir.string());
    images_.ReleaseEverywhere(id);
    fs::remove_all(layout.dir, fec);
    if (fec) spdlog::warn("workspaces: removing {}: {}", layout.dir.string(), fec.message());
  }
}

// --- image versions -----------------------------------------------------------------------------

void WorkspaceService::HoldImages() {
  for (const auto& a : AllActors()) {
    auto ws = a->Snapshot();
    if (ws.state == State::kDeleting) continue;
    auto image = images_.Get(ws.image, ws.image_version);
    if (!image) {
      spdlog::warn("workspace {} ({}): {}", ws.id, ws.name, image.error().message);
      continue;
    }
    if (auto s = images_.Hold(*image, ws.id, LayoutFor(ws.id).root_disk(0)); !s) {
      spdlog::warn("workspace {} ({}): holding image: {}", ws.id, ws.name, s.error().message);
    }
  }
}

Task<void> WorkspaceService::ImageLoop() {
  if (options_.image_gc_every.count() <= 0) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  // The first collection runs at once: deleting gigabytes of old images must not hold up
  // start-up, and it runs on the blocking pool.
  while (!stopping_) {
    auto collect = [this] { CollectImages(); };
    co_await Blocking(std::move(collect));
    timer.expires_after(options_.image_gc_every);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || stopping_) co_return;
  }
}

void WorkspaceService::CollectImagesForTest() { CollectImages(); }

void WorkspaceService::CollectImages() {
  if (options_.image_gc_every.count() <= 0) return;
  for (const auto& c : images_.CollectUnused()) {
    spdlog::info("images: removed {} version {} ({} MiB): not current, and no workspace uses it",
                 c.name, c.version, c.bytes >> 20);
  }
}

}  // namespace berth::workspace
