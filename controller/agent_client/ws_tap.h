// Watches one direction of a WebSocket that berthd relays byte for byte (RelayUpgrade), for the
// timeline: the first and the last complete text message, each kept when it is at most
// kMaxMessage bytes. Fragmented, compressed (RSV1) and larger messages are skipped, control
// frames ignored. It never changes a byte and its state is bounded whatever the peer sends; a
// stream that stops making sense as frames is no longer watched. Pure; one thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace berth::agent_client {

class WsMessageTap {
 public:
  static constexpr size_t kMaxMessage = 16 * 1024;

  void Feed(std::string_view bytes);

  const std::optional<std::string>& first_text() const { return first_; }
  const std::optional<std::string>& last_text() const { return last_; }
  // The bytes stopped being frames (a reserved length bit, say): nothing more is read.
  bool broken() const { return broken_; }

 private:
  // Whether header_ holds a whole frame header; fills the frame's fields when it does.
  bool HeaderComplete();

  std::array<uint8_t, 14> header_{};
  size_t header_len_ = 0;
  // The frame being read: its payload's length and how much of it went by.
  uint64_t length_ = 0;
  uint64_t seen_ = 0;
  bool in_payload_ = false;
  bool keep_ = false;  // a whole text message small enough to keep
  bool masked_ = false;
  std::array<uint8_t, 4> mask_{};
  std::string payload_;
  std::optional<std::string> first_;
  std::optional<std::string> last_;
  bool broken_ = false;
};

}  // namespace berth::agent_client
