// The service's change feed and boot slots on their own: delivery by tenant and workspace, a
// subscriber that falls behind is told, close ends every wait, and waiting boots are served in
// order without holding a thread.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/workspace/boot_slots.h"
#include "controller/workspace/change_feed.h"
#include "tests/support/wait.h"

namespace berth::workspace {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

Change Event(const std::string& tenant, const std::string& ws, int64_t id) {
  Change c;
  c.tenant_id = tenant;
  c.workspace_id = ws;
  store::Event e;
  e.id = id;
  e.workspace_id = ws;
  e.type = "e" + std::to_string(id);
  c.event = e;
  return c;
}

struct Loop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  ~Loop() {
    guard.reset();
    io.stop();
    thread.join();
  }
  template <class T>
  T Sync(asio::awaitable<T> task) {
    return asio::co_spawn(io, std::move(task), asio::use_future).get();
  }
};

asio::awaitable<std::vector<int64_t>> Collect(Subscription& sub, size_t n, milliseconds each) {
  std::vector<int64_t> ids;
  while (ids.size() < n) {
    auto c = co_await sub.Next(steady_clock::now() + each);
    if (!c) break;
    ids.push_back(c->event ? c->event->id : -1);
  }
  co_return ids;
}

TEST_CASE("change feed: a subscriber gets its workspace's changes in order, and no one else's", "[feed]") {
  Loop loop;
  ChangeFeed feed;
  auto mine = feed.Subscribe(loop.io.get_executor(), "t1", "ws_a");
  auto tenant = feed.Subscribe(loop.io.get_executor(), "t1");
  auto other = feed.Subscribe(loop.io.get_executor(), "t2");
  feed.Publish(Event("t1", "ws_a", 1));
  feed.Publish(Event("t1", "ws_b", 2));
  feed.Publish(Event("t2", "ws_c", 3));  // another tenant's
  feed.Publish(Event("t1", "ws_a", 4));
  CHECK(loop.Sync(Collect(*mine, 3, milliseconds(200))) == std::vector<int64_t>{1, 4});
  CHECK(loop.Sync(Collect(*tenant, 3, milliseconds(200))) == std::vector<int64_t>{1, 2, 4});
  CHECK(loop.Sync(Collect(*other, 3, milliseconds(200))) == std::vector<int64_t>{3});
  CHECK(feed.subscribers() == 3);
  mine.reset();
  CHECK(feed.subscribers() == 2);
}

TEST_CASE("change feed: a waiting subscriber wakes on a change published from another thread", "[feed]") {
  Loop loop;
  ChangeFeed feed;
  auto sub = feed.Subscribe(loop.io.get_executor(), "t1", "ws_a");
  auto waiting = asio::co_spawn(loop.io, sub->Next(steady_clock::now() + std::chrono::seconds(30)),
                                asio::use_future);
  CHECK(waiting.wait_for(milliseconds(50)) == std::future_status::timeout);
  std::thread([&] { feed.Publish(Event("t1", "ws_a", 7)); }).join();
  auto got = waiting.get();
  REQUIRE(got.has_value());
  CHECK(got->event->id == 7);
}

TEST_CASE("change feed: a subscriber that falls behind is told, and loses only the overflow", "[feed]") {
  Loop loop;
  ChangeFeed feed;
  auto sub = feed.Subscribe(loop.io.get_executor(), "t1", "ws_a");
  for (int64_t i = 1; i <= static_cast<int64_t>(Subscription::kQueue) + 10; ++i) {
    feed.Publish(Event("t1", "ws_a", i));
  }
  CHECK(sub->TakeLagged());
  CHECK_FALSE(sub->TakeLagged());  // once
  auto ids = loop.Sync(Collect(*sub, Subscription::kQueue + 10, milliseconds(100)));
  REQUIRE(ids.size() == Subscription::kQueue);
  CHECK(ids.front() == 1);
  CHECK(ids.back() == static_cast<int64_t>(Subscription::kQueue));
}

TEST_CASE("change feed: Next returns at its deadline, and at once once the feed is closed", "[feed]") {
  Loop loop;
  ChangeFeed feed;
  auto sub = feed.Subscribe(loop.io.get_executor(), "t1");
  auto none = loop.Sync(sub->Next(steady_clock::now() + milliseconds(20)));
  CHECK_FALSE(none.has_value());
  CHECK_FALSE(sub->closed());
  auto waiting = asio::co_spawn(loop.io, sub->Next(steady_clock::now() + std::chrono::hours(1)),
                                asio::use_future);
  CHECK(waiting.wait_for(milliseconds(50)) == std::future_status::timeout);
  feed.Close();
  CHECK_FALSE(waiting.get().has_value());
  CHECK(sub->closed());
}

TEST_CASE("boot slots: at most N at once, served in order, and close ends every wait", "[feed][slots]") {
  asio::thread_pool pool(2);
  BootSlots slots(1);
  auto strand = asio::make_strand(pool.get_executor());
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::vector<int> order;
  std::mutex order_mutex;
  std::promise<void> release_first;
  auto first_released = release_first.get_future().share();
  auto worker = [&](int n) -> asio::awaitable<bool> {
    auto slot = co_await slots.Acquire();
    if (!slot) co_return false;
    int now = ++running;
    most = std::max(most.load(), now);
    {
      std::lock_guard lock(order_mutex);
      order.push_back(n);
    }
    if (n == 0) first_released.wait();  // holds the only slot (and this thread) a while
    --running;
    co_return true;
  };
  auto a = asio::co_spawn(asio::make_strand(pool.get_executor()), worker(0), asio::use_future);
  REQUIRE(testing::WaitFor([&] { return running == 1; }));
  auto b = asio::co_spawn(strand, worker(1), asio::use_future);
  auto c = asio::co_spawn(strand, worker(2), asio::use_future);
  REQUIRE(testing::WaitFor([&] { return slots.waiting() == 2; }));
  release_first.set_value();
  CHECK(a.get());
  CHECK(b.get());
  CHECK(c.get());
  CHECK(most == 1);
  CHECK(order == std::vector<int>{0, 1, 2});

  // Closed: a waiter gets an empty slot, and so does every later Acquire.
  std::promise<void> hold;
  auto held = hold.get_future().share();
  // Released however the test ends: a failed REQUIRE below must not leave the holder blocking
  // the pool's join for ever.
  struct Release {
    std::promise<void>& p;
    bool done = false;
    void operator()() {
      if (!std::exchange(done, true)) p.set_value();
    }
    ~Release() { (*this)(); }
  } release{hold};
  std::atomic<bool> holding{false};
  auto holder = [&]() -> asio::awaitable<bool> {
    auto slot = co_await slots.Acquire();
    holding = true;
    held.wait();
    co_return static_cast<bool>(slot);
  };
  auto h = asio::co_spawn(asio::make_strand(pool.get_executor()), holder(), asio::use_future);
  // The holder has the slot (not merely nobody waiting yet: worker 3 could take it first).
  REQUIRE(testing::WaitFor([&] { return holding.load(); }));
  auto w = asio::co_spawn(strand, worker(3), asio::use_future);
  REQUIRE(testing::WaitFor([&] { return slots.waiting() == 1; }));
  slots.Close();
  CHECK_FALSE(w.get());
  release();
  CHECK(h.get());
  auto late = asio::co_spawn(strand, worker(4), asio::use_future);
  CHECK_FALSE(late.get());
}

}  // namespace
}  // namespace berth::workspace
