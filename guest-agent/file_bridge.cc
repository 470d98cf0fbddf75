#include "guest-agent/file_bridge.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace berth::agent {
namespace {
constexpr auto kTuple = boost::asio::as_tuple(boost::asio::use_awaitable);
}

std::shared_ptr<ChunkBridge> ChunkBridge::Create(boost::asio::any_io_executor executor,
                                                 size_t max_bytes,
                                                 std::chrono::milliseconds timeout) {
  return std::shared_ptr<ChunkBridge>(new ChunkBridge(std::move(executor), max_bytes, timeout));
}

ChunkBridge::ChunkBridge(boost::asio::any_io_executor executor, size_t max_bytes,
                         std::chrono::milliseconds timeout)
    : executor_(executor), wake_(executor), max_bytes_(max_bytes), timeout_(timeout) {}

void ChunkBridge::WakeCoroutine() {
  boost::asio::post(executor_, [self = shared_from_this()] { self->wake_.cancel(); });
}

void ChunkBridge::WakeAll() {
  changed_.notify_all();
  WakeCoroutine();
}

Status ChunkBridge::Push(std::string chunk) {
  {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout_, [&] { return abort_ || HasRoomLocked(); })) {
      return Fail(ErrorCode::kDeadlineExceeded, "the stream's reader stopped taking data");
    }
    if (abort_) return Fail(*abort_);
    queued_bytes_ += chunk.size();
    queue_.push_back(std::move(chunk));
  }
  WakeCoroutine();
  return {};
}

Result<std::string> ChunkBridge::Pop() {
  std::string chunk;
  {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout_,
                           [&] { return abort_ || !queue_.empty() || finished_; })) {
      return Fail(ErrorCode::kDeadlineExceeded, "no data arrived in time");
    }
    if (abort_) return Fail(*abort_);
    if (queue_.empty()) return std::string();  // finished
    chunk = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= chunk.size();
  }
  WakeCoroutine();
  return chunk;
}

http::Task<Status> ChunkBridge::AsyncPush(std::string& chunk) {
  auto self = shared_from_this();
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (abort_) co_return Fail(*abort_);
      if (HasRoomLocked()) {
        queued_bytes_ += chunk.size();
        queue_.push_back(std::move(chunk));
        break;
      }
    }
    wake_.expires_after(timeout_);
    auto [ec] = co_await wake_.async_wait(kTuple);
    if (!ec) {
      Abort(Error{ErrorCode::kDeadlineExceeded, "the archive reader stopped taking data"});
    }
  }
  changed_.notify_all();
  co_return Status{};
}

http::Task<Result<std::string>> ChunkBridge::AsyncPop() {
  auto self = shared_from_this();
  std::string chunk;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (abort_) co_return Fail(*abort_);
      if (!queue_.empty()) {
        chunk = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= chunk.size();
        break;
      }
      if (finished_) co_return std::string();
    }
    wake_.expires_after(timeout_);
    auto [ec] = co_await wake_.async_wait(kTuple);
    if (!ec) Abort(Error{ErrorCode::kDeadlineExceeded, "the archive writer produced no data in time"});
  }
  changed_.notify_all();
  co_return chunk;
}

void ChunkBridge::Finish() {
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  WakeAll();
}

void ChunkBridge::Abort(Error why) {
  {
    std::lock_guard lock(mutex_);
    if (!abort_) abort_ = std::move(why);
  }
  WakeAll();
}

bool ChunkBridge::aborted() const {
  std::lock_guard lock(mutex_);
  return abort_.has_value();
}

}  // namespace berth::agent
