// Private to controller/workspace/: the two ways the service's code changes threads, shared by
// service.cc, transitions.cc, operations.cc, idle.cc, reconcile.cc and the others here.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "common/blocking.h"
#include "controller/workspace/service.h"

namespace berth::workspace {

// Neither is a coroutine, and both take the function by reference: a caller writes
// `auto fn = [...]{...}; co_await Blocking(std::move(fn));`, so no closure is built inside the
// co_await expression (the g++ 12 pitfall in docs/architecture.md).
template <class F>
auto WorkspaceService::Blocking(F&& fn) -> Task<std::invoke_result_t<std::decay_t<F>&>> {
  return RunBlocking(blocking_, std::decay_t<F>(std::forward<F>(fn)));
}

template <class F>
auto WorkspaceService::OnStrand(const ActorPtr& actor, F&& fn) -> Task<std::invoke_result_t<std::decay_t<F>&>> {
  using T = std::invoke_result_t<std::decay_t<F>&>;
  // The closure lives in co_spawn's frame until the step has run.
  auto step = [fn = std::decay_t<F>(std::forward<F>(fn))]() mutable -> Task<T> { co_return fn(); };
  return boost::asio::co_spawn(actor->strand(), std::move(step), boost::asio::use_awaitable);
}

template <typename F>
auto WorkspaceService::OnStrand(const ActorPtr& actor, std::string by, F&& fn)
    -> Task<std::invoke_result_t<std::decay_t<F>&>> {
  using T = std::invoke_result_t<std::decay_t<F>&>;
  auto step = [actor, by = std::move(by), fn = std::decay_t<F>(std::forward<F>(fn))]() mutable -> Task<T> {
    if (by.empty()) co_return fn();
    actor->event_actor = std::move(by);
    struct Reset {
      Actor& a;
      ~Reset() { a.event_actor = std::string(store::kSystemActor); }
    } reset{*actor};
    co_return fn();
  };
  return boost::asio::co_spawn(actor->strand(), std::move(step), boost::asio::use_awaitable);
}

// Queued (service.h): the check on the strand, then the operation behind the queued ones.
template <class T>
Task<Result<T>> WorkspaceService::Queued(ActorPtr actor, std::function<Status()> check,
                                          std::function<Task<Result<T>>()> op) {
  auto executor = co_await boost::asio::this_coro::executor;
  auto initiation = [actor, executor, check = std::move(check), op = std::move(op)](auto handler) mutable {
    // The handler is move-only and the queue holds copyable functions: it waits in a slot.
    using Handler = decltype(handler);
    auto slot = std::make_shared<std::optional<Handler>>(std::move(handler));
    auto finish = [slot, executor](Result<T> result) {
      boost::asio::post(executor, [slot, result = std::move(result)]() mutable {
        if (*slot) std::move(**slot)(std::move(result));
      });
    };
    boost::asio::post(actor->strand(), [actor, finish, check = std::move(check), op = std::move(op)]() mutable {
      if (auto s = check(); !s) {
        finish(Fail(s.error()));
        return;
      }
      actor->Enqueue([finish, op = std::move(op)]() -> Task<void> {
        auto result = co_await op();
        finish(std::move(result));
      });
    });
  };
  co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void(Result<T>)>(
      std::move(initiation), boost::asio::use_awaitable);
}

// A pause in a coroutine on the service's pools.
inline Task<void> Sleep(std::chrono::milliseconds d) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, d);
  auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  (void)ec;  // cancelled only when the pool stops, and then nothing runs after it
}

// Writes `text` to `path` (berthd's, 0600) whole or not at all (operations.cc).
Status WriteSecret(const std::filesystem::path& path, std::string_view text);

inline Error Conflict(const Workspace& ws, std::string_view what) {
  return Error{ErrorCode::kFailedPrecondition,
               fmt::format("cannot {} workspace '{}' while it is {}", what, ws.name, StateName(ws.state))};
}

}  // namespace berth::workspace
