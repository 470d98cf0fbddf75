#include "controller/agent_client/ws_tap.h"

#include <algorithm>

namespace berth::agent_client {

bool WsMessageTap::HeaderComplete() {
  if (header_len_ < 2) return false;
  const bool masked = (header_[1] & 0x80) != 0;
  const uint8_t len7 = header_[1] & 0x7f;
  size_t need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (masked ? 4 : 0);
  if (header_len_ < need) return false;
  size_t at = 2;
  uint64_t length = len7;
  if (len7 == 126) {
    length = (uint64_t{header_[2]} << 8) | header_[3];
    at = 4;
  } else if (len7 == 127) {
    length = 0;
    for (size_t i = 0; i < 8; ++i) length = (length << 8) | header_[2 + i];
    at = 10;
    if (length >> 63) broken_ = true;  // RFC 6455: the most significant bit must be 0
  }
  masked_ = masked;
  if (masked) std::copy_n(header_.begin() + static_cast<std::ptrdiff_t>(at), 4, mask_.begin());
  length_ = length;
  const bool fin = (header_[0] & 0x80) != 0;
  const bool rsv1 = (header_[0] & 0x40) != 0;
  const uint8_t opcode = header_[0] & 0x0f;
  keep_ = fin && !rsv1 && opcode == 0x1 && length <= kMaxMessage;
  return true;
}

void WsMessageTap::Feed(std::string_view bytes) {
  while (!bytes.empty() && !broken_) {
    if (!in_payload_) {
      // One header byte at a time until it is whole (at most 14).
      header_[header_len_++] = static_cast<uint8_t>(bytes.front());
      bytes.remove_prefix(1);
      if (!HeaderComplete()) {
        if (header_len_ == header_.size()) broken_ = true;
        continue;
      }
      header_len_ = 0;
      in_payload_ = true;
      seen_ = 0;
      payload_.clear();
    }
    uint64_t left = length_ - seen_;
    size_t take = static_cast<size_t>(std::min<uint64_t>(left, bytes.size()));
    if (keep_) {
      for (size_t i = 0; i < take; ++i) {
        char c = bytes[i];
        if (masked_) c = static_cast<char>(static_cast<uint8_t>(c) ^ mask_[(seen_ + i) % 4]);
        payload_.push_back(c);
      }
    }
    seen_ += take;
    bytes.remove_prefix(take);
    if (seen_ == length_) {
      in_payload_ = false;
      if (keep_) {
        if (!first_) first_ = payload_;
        last_ = std::move(payload_);
        payload_.clear();
      }
    }
  }
}

}  // namespace berth::agent_client
