// Bounding what goes back to the model: command output and file contents are cut to a size a
// context window can take, on UTF-8 character boundaries, saying what was left out. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace berth::mcp {

// The longest prefix of `data` of at most `max` bytes that does not split a UTF-8 sequence.
std::string_view Utf8Prefix(std::string_view data, size_t max);
// The longest suffix of `data` of at most `max` bytes that does not start inside a UTF-8
// sequence.
std::string_view Utf8Suffix(std::string_view data, size_t max);

// Keeps the first quarter and the last three quarters of `max` bytes of a stream of any
// length, in bounded memory: the start of a command's output says what ran, the end how it
// ended (errors come last).
class HeadTail {
 public:
  explicit HeadTail(size_t max) : head_max_(max / 4), tail_max_(max - max / 4) {}
  void Append(std::string_view data);
  uint64_t total() const { return total_; }
  bool truncated() const { return total_ > head_.size() + TailView().size(); }
  // The kept text; when bytes were left out, a line "[... N bytes left out ...]" marks where.
  std::string Render() const;

 private:
  std::string_view TailView() const;
  size_t head_max_;
  size_t tail_max_;
  uint64_t total_ = 0;
  std::string head_;
  std::string tail_;  // up to 2 * tail_max_, trimmed when it grows past that
};

}  // namespace berth::mcp
