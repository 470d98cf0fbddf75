#include "controller/workspace/actor.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace berth::workspace {

namespace asio = boost::asio;

Workspace Actor::Snapshot() const {
  std::lock_guard lock(view_mutex_);
  return record_;
}

State Actor::state() const {
  std::lock_guard lock(view_mutex_);
  return record_.state;
}

AwakeInfo Actor::Awake() const {
  std::lock_guard lock(view_mutex_);
  AwakeInfo info;
  for (const auto& [kind, n] : streams_) {
    info.reasons.push_back(n > 1 ? fmt::format("{} streams open ({})", kind, n)
                                 : fmt::format("{} stream open", kind));
  }
  for (const auto& r : guest_reasons_) info.reasons.push_back(r);
  info.idle_at = idle_at_;
  return info;
}

std::optional<agent_client::AgentLink> Actor::link() const {
  std::lock_guard lock(view_mutex_);
  return link_;
}

void Actor::NoteActivity(int64_t now) {
  std::lock_guard lock(view_mutex_);
  last_activity_ = std::max(last_activity_, now);
}

void Actor::StreamOpened(const std::string& kind, int64_t now) {
  std::lock_guard lock(view_mutex_);
  last_activity_ = std::max(last_activity_, now);
  ++streams_[kind];
}

void Actor::StreamClosed(const std::string& kind, int64_t now) {
  std::lock_guard lock(view_mutex_);
  last_activity_ = std::max(last_activity_, now);
  auto it = streams_.find(kind);
  if (it != streams_.end() && --it->second <= 0) streams_.erase(it);
}

bool Actor::streams_open() const {
  std::lock_guard lock(view_mutex_);
  return !streams_.empty();
}

int64_t Actor::last_activity() const {
  std::lock_guard lock(view_mutex_);
  return last_activity_;
}

bool Actor::busy() const {
  std::lock_guard lock(view_mutex_);
  return busy_ > 0;
}

void Actor::SetRecord(Workspace record) {
  std::lock_guard lock(view_mutex_);
  record_ = std::move(record);
}

void Actor::SetLink(std::optional<agent_client::AgentLink> link) {
  std::lock_guard lock(view_mutex_);
  link_ = std::move(link);
}

void Actor::SetGuestReasons(std::vector<std::string> reasons) {
  std::lock_guard lock(view_mutex_);
  guest_reasons_ = std::move(reasons);
}

void Actor::SetIdleAt(std::optional<int64_t> at) {
  std::lock_guard lock(view_mutex_);
  idle_at_ = at;
}

void Actor::Enqueue(Op op) {
  ops_.push_back(std::move(op));
  {
    std::lock_guard lock(view_mutex_);
    ++busy_;
  }
  if (op_running_) return;
  op_running_ = true;
  auto drain = [self = shared_from_this()]() { return self->Drain(); };
  asio::co_spawn(strand_, std::move(drain), asio::detached);
}

void Actor::DropQueued() {
  ops_.clear();
  op_running_ = false;
  std::lock_guard lock(view_mutex_);
  busy_ = 0;
}

asio::awaitable<void> Actor::Drain() {
  while (!ops_.empty()) {
    Op op = std::move(ops_.front());
    ops_.pop_front();
    try {
      co_await op();
    } catch (const std::exception& e) {
      // Operations report failures as states and events; an exception is a bug, logged so it
      // is seen, and the queue goes on.
      spdlog::error("workspace {}: operation threw: {}", id_, e.what());
    }
    std::lock_guard lock(view_mutex_);
    --busy_;
  }
  op_running_ = false;
}

}  // namespace berth::workspace
