#include "controller/workspace/change_feed.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace berth::workspace {

namespace asio = boost::asio;

Subscription::Subscription(ChangeFeed& feed, asio::any_io_executor executor, std::string tenant_id,
                           std::string workspace_id)
    : feed_(feed),
      executor_(std::move(executor)),
      tenant_id_(std::move(tenant_id)),
      workspace_id_(std::move(workspace_id)),
      queue_(std::make_shared<Queue>(executor_)) {}

Subscription::~Subscription() { feed_.Remove(this); }

bool Subscription::Matches(const Change& change) const {
  if (change.tenant_id != tenant_id_) return false;
  return workspace_id_.empty() || change.workspace_id == workspace_id_;
}

void Subscription::Wake(const std::shared_ptr<Queue>& queue, const asio::any_io_executor& executor) {
  // The timer belongs to the subscriber's executor: cancel it there. Next re-checks the queue
  // under the mutex after every wake-up, so a wake that finds no wait pending loses nothing.
  asio::post(executor, [queue] { queue->timer.cancel(); });
}

void Subscription::Offer(const Change& change) {
  bool wake = false;
  {
    std::lock_guard lock(queue_->mutex);
    if (queue_->closed) return;
    if (queue_->changes.size() >= kQueue) {
      queue_->lagged = true;
    } else {
      queue_->changes.push_back(change);
    }
    wake = std::exchange(queue_->waiting, false);
  }
  if (wake) Wake(queue_, executor_);
}

void Subscription::Close() {
  bool wake = false;
  {
    std::lock_guard lock(queue_->mutex);
    queue_->closed = true;
    wake = std::exchange(queue_->waiting, false);
  }
  if (wake) Wake(queue_, executor_);
}

bool Subscription::TakeLagged() {
  std::lock_guard lock(queue_->mutex);
  return std::exchange(queue_->lagged, false);
}

bool Subscription::closed() const {
  std::lock_guard lock(queue_->mutex);
  return queue_->closed;
}

asio::awaitable<std::optional<Change>> Subscription::Next(std::chrono::steady_clock::time_point deadline) {
  auto queue = queue_;
  for (;;) {
    {
      std::lock_guard lock(queue->mutex);
      if (!queue->changes.empty()) {
        Change next = std::move(queue->changes.front());
        queue->changes.pop_front();
        co_return next;
      }
      if (queue->closed || std::chrono::steady_clock::now() >= deadline) co_return std::nullopt;
      queue->waiting = true;
    }
    // Here, between the unlock and the wait, a change may already have posted its wake-up: it
    // runs after this coroutine suspends (the executor is a strand), so it is not lost.
    queue->timer.expires_at(deadline);
    auto waited = co_await queue->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)waited;  // expiry or a wake-up: the loop looks at the queue either way
    std::lock_guard lock(queue->mutex);
    queue->waiting = false;
  }
}

ChangeFeed::~ChangeFeed() { Close(); }

std::unique_ptr<Subscription> ChangeFeed::Subscribe(asio::any_io_executor executor,
                                                    std::string tenant_id, std::string workspace_id) {
  std::unique_ptr<Subscription> sub(
      new Subscription(*this, std::move(executor), std::move(tenant_id), std::move(workspace_id)));
  std::lock_guard lock(mutex_);
  sub->position_ = subscriptions_.insert(subscriptions_.end(), sub.get());
  if (closed_) sub->Close();
  return sub;
}

void ChangeFeed::Publish(const Change& change) {
  std::lock_guard lock(mutex_);
  for (auto* sub : subscriptions_) {
    if (sub->Matches(change)) sub->Offer(change);
  }
}

void ChangeFeed::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  for (auto* sub : subscriptions_) sub->Close();
}

size_t ChangeFeed::subscribers() const {
  std::lock_guard lock(mutex_);
  return subscriptions_.size();
}

void ChangeFeed::Remove(Subscription* subscription) {
  std::lock_guard lock(mutex_);
  subscriptions_.erase(subscription->position_);
}

}  // namespace berth::workspace
