// Private to controller/workspace/: the two ways the service's code changes threads, shared by
// service.cc, transitions.cc, operations.cc, idle.cc, reconcile.cc and the others here.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
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

// A pause in a coroutine on the service's pools.
inline Task<void> Sleep(std::chrono::milliseconds d) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, d);
  auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  (void)ec;  // cancelled only when the pool stops, and then nothing runs after it
}

inline Error Conflict(const Workspace& ws, std::string_view what) {
  return Error{ErrorCode::kFailedPrecondition,
               fmt::format("cannot {} workspace '{}' while it is {}", what, ws.name, StateName(ws.state))};
}

}  // namespace berth::workspace
