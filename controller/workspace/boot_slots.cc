#include "controller/workspace/boot_slots.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace berth::workspace {

namespace asio = boost::asio;

asio::awaitable<BootSlots::Slot> BootSlots::Acquire() {
  auto executor = co_await asio::this_coro::executor;
  auto waiter = std::make_shared<Waiter>(executor);
  {
    std::lock_guard lock(mutex_);
    if (closed_) co_return Slot();
    if (free_ > 0 && waiters_.empty()) {
      --free_;
      co_return Slot(this);
    }
    waiter->timer.expires_at(asio::steady_timer::time_point::max());
    waiters_.push_back(waiter);
  }
  for (;;) {
    auto waited = co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)waited;  // cancelled by Release or Close: `done` says which
    std::lock_guard lock(mutex_);
    if (waiter->done) co_return waiter->granted ? Slot(this) : Slot();
  }
}

void BootSlots::Release() {
  std::lock_guard lock(mutex_);
  if (waiters_.empty() || closed_) {
    ++free_;
    return;
  }
  auto next = waiters_.front();
  waiters_.pop_front();
  next->granted = next->done = true;
  asio::post(next->executor, [next] { next->timer.cancel(); });
}

void BootSlots::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  for (auto& w : waiters_) {
    w->done = true;
    asio::post(w->executor, [w] { w->timer.cancel(); });
  }
  waiters_.clear();
}

int BootSlots::waiting() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(waiters_.size());
}

}  // namespace berth::workspace
