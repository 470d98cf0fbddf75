// A counting semaphore for coroutines: at most N cold boots at once (ENVIRONMENT.md: three TCG
// boots on 2 cores took 60–70 s each against ~33 s alone). A waiting boot holds no thread.
// Waiters are served first come, first served. Any thread.
#pragma once

#include <deque>
#include <memory>
#include <mutex>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace berth::workspace {

class BootSlots {
 public:
  // Released when destroyed; empty when the wait ended because the slots were closed.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Slot& operator=(Slot&& other) noexcept {
      if (this != &other) {
        if (owner_ != nullptr) owner_->Release();
        owner_ = std::exchange(other.owner_, nullptr);
      }
      return *this;
    }
    ~Slot() {
      if (owner_ != nullptr) owner_->Release();
    }
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    friend class BootSlots;
    explicit Slot(BootSlots* owner) : owner_(owner) {}
    BootSlots* owner_ = nullptr;
  };

  explicit BootSlots(int count) : free_(count) {}
  BootSlots(const BootSlots&) = delete;
  BootSlots& operator=(const BootSlots&) = delete;

  // Waits for a slot. Call from a coroutine whose executor is a strand.
  boost::asio::awaitable<Slot> Acquire();
  // Ends every wait with an empty Slot, and every later Acquire at once (shutdown).
  void Close();
  int waiting() const;

 private:
  struct Waiter {
    explicit Waiter(boost::asio::any_io_executor executor) : timer(executor), executor(std::move(executor)) {}
    boost::asio::steady_timer timer;
    boost::asio::any_io_executor executor;
    bool granted = false;  // guarded by BootSlots::mutex_
    bool done = false;     // granted, or closed
  };
  void Release();

  mutable std::mutex mutex_;  // a leaf
  int free_;
  bool closed_ = false;
  std::deque<std::shared_ptr<Waiter>> waiters_;
};

}  // namespace berth::workspace
