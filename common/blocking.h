// Runs a blocking function on a thread pool and resumes the calling coroutine on its own
// executor with the result. For syscalls that can take long (fsync, directory walks, tar,
// libvirt, SQLite) so they never stall an I/O thread.
#pragma once

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace berth {

template <class F>
auto RunBlocking(boost::asio::thread_pool& pool, F fn)
    -> boost::asio::awaitable<std::invoke_result_t<F>> {
  using T = std::invoke_result_t<F>;
  auto executor = co_await boost::asio::this_coro::executor;
  // A named local, not a temporary in the co_await expression: g++ 12 destroys such a
  // temporary twice, and with it the copy of `executor` (a strand's reference count drops
  // once too often per call until the strand is freed under a live connection).
  if constexpr (std::is_void_v<T>) {
    auto initiation = [&pool, executor, fn = std::move(fn)](auto handler) mutable {
      boost::asio::post(pool, [executor, fn = std::move(fn), handler = std::move(handler)]() mutable {
        fn();
        boost::asio::post(executor, [handler = std::move(handler)]() mutable { std::move(handler)(); });
      });
    };
    co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void()>(
        std::move(initiation), boost::asio::use_awaitable);
  } else {
    auto initiation = [&pool, executor, fn = std::move(fn)](auto handler) mutable {
      boost::asio::post(pool, [executor, fn = std::move(fn),
                               handler = std::move(handler)]() mutable {
        T result = fn();
        boost::asio::post(executor, [handler = std::move(handler),
                                     result = std::move(result)]() mutable {
          std::move(handler)(std::move(result));
        });
      });
    };
    co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void(T)>(
        std::move(initiation), boost::asio::use_awaitable);
  }
}

}  // namespace berth
