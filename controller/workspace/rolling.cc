// Rolling checkpoints (Workspace::checkpoints, `checkpoints: {every, keep}`): a disk checkpoint
// ("rolling", named auto-<time>) of a running workspace once `every` seconds have passed since
// the last and it was active since, taken from its idle check; then the rolling ones past the
// newest `keep` are deleted. A running VM has every layer under its disks open, so those wait
// until it stops (Stopped prunes again) or until a restore leaves them off its chain; one a fork
// or template stands on waits for it to go. Only DeleteCheckpoint's own checks decide.
#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace asio = boost::asio;

Task<void> WorkspaceService::MaybeRollCheckpoint(ActorPtr a, int64_t now, int64_t last_active) {
  if (!a->record().checkpoints || a->rolling_busy) co_return;
  if (a->last_rolling_at < 0) {
    // After a restart: the newest rolling checkpoint there is (none: from the start).
    auto newest = [this, id = a->id()]() -> int64_t {
      int64_t at = 0;
      if (auto rows = store_.ListCheckpoints(id)) {
        for (const auto& c : *rows) {
          if (c.kind == "rolling" && c.state == "ready") at = std::max(at, c.created_at);
        }
      }
      return at;
    };
    a->last_rolling_at = co_await Blocking(std::move(newest));
    if (a->last_rolling_at == 0) a->last_rolling_at = a->record().started_at.value_or(now);
  }
  // A PATCH may have turned the policy off during the read.
  const Workspace& ws = a->record();
  if (!ws.checkpoints || ws.state != State::kRunning) co_return;
  if (now < a->last_rolling_at + ws.checkpoints->every_s || last_active <= a->last_rolling_at) co_return;
  a->last_rolling_at = now;  // one attempt per period, whatever comes of it
  a->rolling_busy = true;
  // Behind the workspace's queued operations, not inside this check.
  asio::co_spawn(loops_, TakeRolling(a), asio::detached);
}

Task<void> WorkspaceService::TakeRolling(ActorPtr a) {
  struct Done {
    Actor& actor;
    ~Done() { actor.rolling_busy = false; }
  } done{*a};
  Workspace ws = a->Snapshot();
  CheckpointRequest take;
  take.kind = "rolling";
  take.memory = false;
  take.name = fmt::format("auto-{}", Now());
  std::string by_berthd;
  auto taken = co_await TakeCheckpoint(ws.tenant_id, ws.id, take, by_berthd);
  if (!taken) {
    // Busy or asleep by now: the next period tries again.
    spdlog::info("workspace {}: rolling checkpoint: {}", ws.id, taken.error().message);
    co_return;
  }
  co_await PruneRolling(a);
}

Task<void> WorkspaceService::PruneRolling(ActorPtr a) {
  Workspace ws = a->Snapshot();
  if (!ws.checkpoints || stopping_) co_return;
  auto list = [this, id = ws.id] { return store_.ListCheckpoints(id); };
  auto rows = co_await Blocking(std::move(list));
  if (!rows) co_return;
  std::vector<store::Checkpoint> rolling;
  for (const auto& c : *rows) {
    if (c.kind == "rolling" && c.state == "ready") rolling.push_back(c);
  }
  const auto keep = static_cast<size_t>(ws.checkpoints->keep);
  if (rolling.size() <= keep) co_return;
  std::sort(rolling.begin(), rolling.end(), [](const store::Checkpoint& x, const store::Checkpoint& y) {
    return std::tie(x.created_at, x.id) < std::tie(y.created_at, y.id);
  });
  std::string by_berthd;
  for (size_t i = 0; i + keep < rolling.size() && !stopping_; ++i) {
    std::string id = rolling[i].id;
    auto gone = co_await DeleteCheckpoint(ws.tenant_id, ws.id, id, by_berthd);
    if (!gone) spdlog::debug("workspace {}: rolling checkpoint {} stays: {}", ws.id, id, gone.error().message);
  }
}

}  // namespace berth::workspace
