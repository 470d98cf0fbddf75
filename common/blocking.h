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
  co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void(T)>(
      [&pool, executor, fn = std::move(fn)](auto handler) mutable {
        boost::asio::post(pool, [executor, fn = std::move(fn),
                                 handler = std::move(handler)]() mutable {
          T result = fn();
          boost::asio::post(executor, [handler = std::move(handler),
                                       result = std::move(result)]() mutable {
            std::move(handler)(std::move(result));
          });
        });
      },
      boost::asio::use_awaitable);
}

}  // namespace berth
