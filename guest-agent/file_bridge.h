// A bounded queue of byte chunks between one blocking thread (libarchive on the blocking pool)
// and one coroutine on the agent's I/O thread, so that a tar stream flows between a socket and
// libarchive with backpressure and without either side holding the whole stream.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/error.h"
#include "common/http/types.h"

namespace berth::agent {

class ChunkBridge : public std::enable_shared_from_this<ChunkBridge> {
 public:
  // `executor` is the I/O thread's; at most `max_bytes` wait in the queue (one chunk more may
  // be accepted when the queue is empty); each side gives up after `timeout` without progress.
  static std::shared_ptr<ChunkBridge> Create(boost::asio::any_io_executor executor,
                                             size_t max_bytes, std::chrono::milliseconds timeout);

  // --- blocking side: any thread but the I/O thread ------------------------------------------
  // Queues a non-empty chunk, waiting for room. Fails when aborted or after the timeout.
  Status Push(std::string chunk);
  // The next chunk; "" once finished and drained. Fails when aborted or after the timeout.
  Result<std::string> Pop();

  // --- coroutine side: the I/O thread only ---------------------------------------------------
  // Takes `chunk` (moved from) once there is room. (A reference, not a by-value parameter:
  // g++ 12 mishandles temporaries built inside co_await expressions.)
  http::Task<Status> AsyncPush(std::string& chunk);
  http::Task<Result<std::string>> AsyncPop();

  // --- either side, any thread ----------------------------------------------------------------
  // No more chunks will be pushed; Pop returns "" after the queued ones.
  void Finish();
  // Both sides fail from now on with `why` (the first abort wins).
  void Abort(Error why);
  bool aborted() const;

 private:
  ChunkBridge(boost::asio::any_io_executor executor, size_t max_bytes,
              std::chrono::milliseconds timeout);
  bool HasRoomLocked() const { return queue_.empty() || queued_bytes_ < max_bytes_; }
  // Wakes the coroutine side, if it waits (posted to the I/O thread).
  void WakeCoroutine();
  // Wakes every waiter on both sides.
  void WakeAll();

  boost::asio::any_io_executor executor_;
  boost::asio::steady_timer wake_;  // I/O thread only: the coroutine side waits on it
  const size_t max_bytes_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool finished_ = false;
  std::optional<Error> abort_;
};

}  // namespace berth::agent
