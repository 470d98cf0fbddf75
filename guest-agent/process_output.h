// The bounded record of a process's output: chunks in arrival order (so replay keeps the
// interleaving of stdout and stderr), each with its absolute byte offset in its stream, the
// oldest dropped once the total passes the capacity. Single-threaded (the agent's I/O thread).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace berth::agent {

enum class OutputStream { kStdout = 0, kStderr = 1 };

struct OutputChunk {
  OutputStream stream;
  uint64_t seq;     // position of the chunk in the ring's history, from 0
  uint64_t offset;  // absolute offset of data[0] in its stream
  uint64_t before;  // bytes of both streams appended before this chunk
  std::string data;
};

class OutputRing {
 public:
  explicit OutputRing(size_t capacity) : capacity_(capacity) {}

  void Append(OutputStream stream, std::string_view data) {
    if (data.empty()) return;
    uint64_t& end = stream_end_[static_cast<int>(stream)];
    chunks_.push_back(OutputChunk{stream, end_seq_++, end, total_, std::string(data)});
    end += data.size();
    total_ += data.size();
    held_ += Cost(chunks_.back());
    // Keep at least the newest chunk, whatever its size.
    while (held_ > capacity_ && chunks_.size() > 1) {
      held_ -= Cost(chunks_.front());
      chunks_.pop_front();
    }
  }

  // The chunk at `seq`, or the oldest one still held if `seq` was dropped; null when `seq` is
  // at the end (nothing new yet).
  const OutputChunk* At(uint64_t seq) const {
    if (chunks_.empty() || seq >= end_seq_) return nullptr;
    uint64_t first = chunks_.front().seq;
    if (seq < first) return &chunks_.front();
    return &chunks_[seq - first];
  }

  // Bytes of both streams appended before `seq` (everything when `seq` is at the end).
  uint64_t BytesBefore(uint64_t seq) const {
    const OutputChunk* c = At(seq);
    return c != nullptr ? c->before : total_;
  }

  uint64_t end_seq() const { return end_seq_; }
  uint64_t total() const { return total_; }
  uint64_t stream_end(OutputStream s) const { return stream_end_[static_cast<int>(s)]; }

 private:
  // Bookkeeping per chunk counts against the capacity too, so a flood of one-byte writes
  // cannot grow the ring without bound.
  static size_t Cost(const OutputChunk& c) { return c.data.size() + 64; }

  size_t capacity_;
  std::deque<OutputChunk> chunks_;
  uint64_t end_seq_ = 0;
  uint64_t total_ = 0;
  uint64_t stream_end_[2] = {0, 0};
  size_t held_ = 0;
};

}  // namespace berth::agent
