// What the workspace service publishes: every timeline event it stores and every change of a
// workspace's record (state, settings, deletion), the moment it happens. The API's `wait`,
// events `follow`, wake-on-request, MCP and the web UI's live list subscribe here instead of
// polling SQLite.
//
// Delivery: each subscription has a bounded queue. Publishing never blocks and never waits for
// a subscriber; a subscriber that falls more than kQueue changes behind loses the overflow and
// is told so (TakeLagged), and then re-reads what it needs from the store (events carry their
// store ids, so a follower resumes exactly where it was).
//
// Threads: Publish and Subscribe from any thread. A Subscription belongs to one coroutine:
// call Next on the executor it was made for, one call at a time; that executor must be a
// strand or run by one thread (every HTTP connection's coroutine runs on its own strand).
#pragma once

#include <chrono>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "controller/store/store.h"
#include "controller/workspace/workspace.h"

namespace berth::workspace {

struct Change {
  std::string tenant_id;
  std::string workspace_id;
  // A timeline event, as stored (with its id); unset for a change with no event.
  std::optional<store::Event> event;
  // The record after the change; unset when it is an event only (nothing of the record
  // changed) or the workspace is gone (`deleted`).
  std::optional<Workspace> workspace;
  bool deleted = false;
};

class ChangeFeed;

class Subscription {
 public:
  // A subscriber this far behind loses changes (and is told): one change is a record and an
  // event, ~1 KiB, so a queue costs at most ~256 KiB per subscriber.
  static constexpr size_t kQueue = 256;

  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // The next change, waiting at most until `deadline`; nullopt when the deadline passed or the
  // feed was closed (closed() tells which).
  boost::asio::awaitable<std::optional<Change>> Next(std::chrono::steady_clock::time_point deadline);
  // True (once) when changes were dropped since the last call.
  bool TakeLagged();
  bool closed() const;

 private:
  friend class ChangeFeed;
  // Shared with the wake-ups Publish posts to the executor, which may run after the
  // Subscription is gone.
  struct Queue {
    explicit Queue(boost::asio::any_io_executor executor) : timer(std::move(executor)) {}
    std::mutex mutex;  // a leaf
    std::deque<Change> changes;
    bool lagged = false;
    bool closed = false;
    bool waiting = false;             // Next is suspended: a new change must wake it
    boost::asio::steady_timer timer;  // on the executor only: Next waits on it, a wake cancels it
  };
  Subscription(ChangeFeed& feed, boost::asio::any_io_executor executor, std::string tenant_id,
               std::string workspace_id);
  bool Matches(const Change& change) const;
  void Offer(const Change& change);
  void Close();
  static void Wake(const std::shared_ptr<Queue>& queue, const boost::asio::any_io_executor& executor);

  ChangeFeed& feed_;
  boost::asio::any_io_executor executor_;
  std::string tenant_id_;     // always set: a subscriber sees its own tenant only
  std::string workspace_id_;  // empty: every workspace of the tenant
  std::shared_ptr<Queue> queue_;
  std::list<Subscription*>::iterator position_;
};

class ChangeFeed {
 public:
  ChangeFeed() = default;
  ~ChangeFeed();
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  // Changes of one workspace (`workspace_id` set) or of every workspace of a tenant, delivered
  // on `executor`. The feed must outlive the subscription.
  std::unique_ptr<Subscription> Subscribe(boost::asio::any_io_executor executor,
                                          std::string tenant_id, std::string workspace_id = {});
  // Hands `change` to every matching subscriber. Never blocks.
  void Publish(const Change& change);
  // Ends every subscription (their Next returns nullopt, closed() is true). At shutdown.
  void Close();
  size_t subscribers() const;

 private:
  friend class Subscription;
  void Remove(Subscription* subscription);

  // Guards subscriptions_. Lock order: this, then a subscription's queue mutex.
  mutable std::mutex mutex_;
  std::list<Subscription*> subscriptions_;
  bool closed_ = false;
};

}  // namespace berth::workspace
