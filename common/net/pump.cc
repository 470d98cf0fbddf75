#include "common/net/pump.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "common/unique.h"

namespace berth::net {
namespace {

namespace asio = boost::asio;
using http::Task;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// One pipe per direction. 1 MiB (the default /proc/sys/fs/pipe-max-size) lets one splice call
// move a whole socket buffer's worth on loopback; the default 64 KiB pipe costs ~15% more
// syscalls and wake-ups at full speed.
constexpr int kPipeBytes = 1 << 20;
// A spliced direction that never has to wait yields to the executor after this many bytes, so
// other work on the same thread (the agent serves everything on one) is not starved. The copy
// path needs no such rule: every completion goes through the scheduler's queue.
constexpr uint64_t kYieldBytes = 16u << 20;

struct Pipe {
  UniqueFd read;
  UniqueFd write;
  size_t capacity = 0;
};

Result<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Fail(ErrnoError(errno, "pipe2"));
  Pipe pipe;
  pipe.read.reset(fds[0]);
  pipe.write.reset(fds[1]);
  // Over the per-user pipe quota (fs.pipe-user-pages-soft) this fails: the default size works,
  // only slower.
  int size = fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes);
  if (size < 0) size = fcntl(fds[1], F_GETPIPE_SZ);
  pipe.capacity = size > 0 ? static_cast<size_t>(size) : 64 * 1024;
  return pipe;
}

// How one direction ended.
enum class End {
  kEof,          // the source ended and everything was delivered; `to` was half-closed
  kError,        // a socket failed; both were shut down
  kUnsupported,  // the kernel cannot splice these sockets; nothing was moved yet
};

struct Direction {
  uint64_t moved = 0;
  bool spliced = false;
};

// from -> to through a pipe (see PumpOptions::splice).
Task<End> SpliceDirection(Socket& from, Socket& to, Direction& dir) {
  auto pipe = MakePipe();
  if (!pipe) co_return End::kUnsupported;
  auto executor = co_await asio::this_coro::executor;
  const int in = from.native_handle();
  const int out = to.native_handle();
  size_t in_pipe = 0;
  bool eof = false;
  uint64_t since_yield = 0;
  for (;;) {
    if (!eof && in_pipe < pipe->capacity) {
      ssize_t n = splice(in, nullptr, pipe->write.get(), nullptr, pipe->capacity - in_pipe,
                         SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        in_pipe += static_cast<size_t>(n);
        since_yield += static_cast<uint64_t>(n);
        dir.spliced = true;
      } else if (n == 0) {
        eof = true;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN) {
        // Nothing to read (or the pipe's slots are full of partial pages: then drain first).
        if (in_pipe == 0) {
          auto [ec] = co_await from.async_wait(Socket::wait_read, kTuple);
          if (ec) {
            ShutdownBoth(from, to);
            co_return End::kError;
          }
          since_yield = 0;
          continue;
        }
      } else if ((errno == EINVAL || errno == ENOSYS) && !dir.spliced) {
        co_return End::kUnsupported;
      } else {
        ShutdownBoth(from, to);
        co_return End::kError;
      }
    }
    if (in_pipe > 0) {
      ssize_t n = splice(pipe->read.get(), nullptr, out, nullptr, in_pipe,
                         SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        in_pipe -= static_cast<size_t>(n);
        dir.moved += static_cast<uint64_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        auto [ec] = co_await to.async_wait(Socket::wait_write, kTuple);
        if (ec) {
          ShutdownBoth(from, to);
          co_return End::kError;
        }
        since_yield = 0;
        continue;
      } else {
        // EPIPE, ECONNRESET: the receiving side is gone; nothing more can be delivered.
        ShutdownBoth(from, to);
        co_return End::kError;
      }
    }
    if (eof && in_pipe == 0) {
      HalfClose(to);
      co_return End::kEof;
    }
    if (since_yield >= kYieldBytes) {
      since_yield = 0;
      co_await asio::post(executor, asio::use_awaitable);
    }
  }
}

// from -> to through a buffer that grows while reads fill it.
Task<End> CopyDirection(Socket& from, Socket& to, size_t max_chunk, Direction& dir,
                        const std::function<void(std::string_view)>& tap) {
  std::vector<char> buf(std::min(kMinChunk, max_chunk));
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), kTuple);
    if (n > 0) {
      auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), kTuple);
      if (wec) {
        ShutdownBoth(from, to);
        co_return End::kError;
      }
      dir.moved += n;
      if (tap) tap(std::string_view(buf.data(), n));
      if (n == buf.size() && buf.size() < max_chunk) {
        buf.resize(std::min(buf.size() * 2, max_chunk));
      }
    }
    if (ec == asio::error::eof) {
      HalfClose(to);
      co_return End::kEof;
    }
    if (ec) {
      ShutdownBoth(from, to);
      co_return End::kError;
    }
  }
}

Task<bool> OneWay(Socket& from, Socket& to, std::string_view initial, const PumpOptions& options,
                  Direction& dir, const std::function<void(std::string_view)>& tap) {
  if (!initial.empty()) {
    auto [ec, n] =
        co_await asio::async_write(to, asio::buffer(initial.data(), initial.size()), kTuple);
    if (ec) {
      ShutdownBoth(from, to);
      co_return false;
    }
    dir.moved += n;
    if (tap) tap(initial);
  }
  End end = End::kUnsupported;
  if (options.splice && !tap) end = co_await SpliceDirection(from, to, dir);
  if (end == End::kUnsupported) end = co_await CopyDirection(from, to, options.max_chunk, dir, tap);
  co_return end == End::kEof;
}

}  // namespace

Task<PumpStats> Pump(Socket& a, Socket& b, PumpOptions options) {
  using namespace asio::experimental::awaitable_operators;
  boost::system::error_code ignored;
  a.non_blocking(true, ignored);
  b.non_blocking(true, ignored);
  if (options.max_chunk == 0) options.max_chunk = kMaxChunk;
  Direction forward;
  Direction backward;
  auto [forward_eof, backward_eof] =
      co_await (OneWay(a, b, options.a_initial, options, forward, options.a_to_b_tap) &&
                OneWay(b, a, options.b_initial, options, backward, options.b_to_a_tap));
  PumpStats stats;
  stats.a_to_b = forward.moved;
  stats.b_to_a = backward.moved;
  stats.a_to_b_eof = forward_eof;
  stats.b_to_a_eof = backward_eof;
  stats.spliced = forward.spliced || backward.spliced;
  co_return stats;
}

}  // namespace berth::net
