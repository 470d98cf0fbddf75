#include "mcp/text_limits.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/protocol/exec.h"

namespace berth::mcp {

std::string_view Utf8Prefix(std::string_view data, size_t max) {
  if (data.size() <= max) return data;
  data = data.substr(0, max);
  return data.substr(0, protocol::CompleteUtf8Prefix(data));
}

std::string_view Utf8Suffix(std::string_view data, size_t max) {
  if (data.size() <= max) return data;
  data = data.substr(data.size() - max);
  // Skip at most 3 continuation bytes (10xxxxxx) of a character cut at the front.
  for (int i = 0; i < 3 && !data.empty() && (static_cast<unsigned char>(data[0]) & 0xC0) == 0x80; ++i) {
    data.remove_prefix(1);
  }
  return data;
}

void HeadTail::Append(std::string_view data) {
  total_ += data.size();
  if (head_.size() < head_max_) {
    size_t n = std::min(head_max_ - head_.size(), data.size());
    head_.append(data.substr(0, n));
    data.remove_prefix(n);
  }
  if (data.empty()) return;
  tail_.append(data);
  if (tail_.size() > 2 * tail_max_) tail_.erase(0, tail_.size() - tail_max_);
}

std::string_view HeadTail::TailView() const {
  // What the tail may show: no byte the head already has, at most tail_max_.
  uint64_t after_head = total_ - head_.size();
  std::string_view tail = tail_;
  if (tail.size() > after_head) tail = tail.substr(tail.size() - after_head);
  return Utf8Suffix(tail, tail_max_);
}

std::string HeadTail::Render() const {
  std::string_view tail = TailView();
  if (total_ == head_.size() + tail.size()) return head_ + std::string(tail);
  std::string_view head = head_;
  head = head.substr(0, protocol::CompleteUtf8Prefix(head));
  // Whole lines read better: cut at a newline when one is near the cut.
  if (size_t nl = head.rfind('\n'); nl != std::string_view::npos && nl + 1 >= head.size() / 2) {
    head = head.substr(0, nl + 1);
  }
  if (size_t nl = tail.find('\n'); nl != std::string_view::npos && nl < tail.size() / 2) {
    tail = tail.substr(nl + 1);
  }
  uint64_t left_out = total_ - head.size() - tail.size();
  std::string out(head);
  if (!out.empty() && out.back() != '\n') out.push_back('\n');
  out += fmt::format("[... {} bytes left out ...]\n", left_out);
  out.append(tail);
  return out;
}

}  // namespace berth::mcp
