// The viewer's half of RFB 3.8 (the RFB community spec, rfbproto), as berthd sees it between a
// viewer's WebSocket and QEMU's VNC socket: it splits the client->server byte stream into whole
// messages, however the stream was cut into reads or frames, and says which of them are input.
// Pure: no I/O, no clock, no threads of its own (fuzzed by tests/fuzz/rfb_fuzz.cc).
//
// What it accepts, in order:
//  1. ProtocolVersion "RFB 003.008\n" only (QEMU offers 3.8; an older version changes the
//     security handshake and is refused).
//  2. The security-type choice: 1 (None) only. QEMU's socket has no auth of its own; berthd
//     has authenticated the viewer before the first byte, so None is the only type a viewer
//     may pick, whatever the server offered.
//  3. ClientInit: its shared flag is rewritten to 1, so that no viewer can make QEMU drop the
//     others (QEMU's default share policy honours an exclusive request).
//  4. Client messages: SetPixelFormat (0), SetEncodings (2), FramebufferUpdateRequest (3),
//     KeyEvent (4), PointerEvent (5), ClientCutText (6, at most kMaxCutText bytes; a negative
//     length is the extended-clipboard form, bounded the same), EnableContinuousUpdates (150),
//     Fence (248, payload at most 64), xvp (250), SetDesktopSize (251), and QEMU's client
//     message (255) with sub-type 0, the extended key event (the only one noVNC 1.5 sends).
//     SetEncodings loses the pseudo-encodings that would change the framing of later client
//     messages beyond what this parser knows (ExtendedMouseButtons -316 makes PointerEvent
//     7 bytes once the server agrees; GII -305 enables message 253), so the server never
//     enables them and every later message stays parseable without reading the server's side.
// Anything else fails closed: an unknown message has no length this parser could skip by, so
// the stream cannot be followed past it, and the viewer is disconnected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace berth::desktop {

// ClientCutText's text: a paste of a long document fits; more is refused (too_large).
inline constexpr size_t kMaxCutText = 1 << 20;
// SetEncodings: noVNC sends about 20; a few hundred would be generous.
inline constexpr size_t kMaxEncodings = 1024;

enum class RfbMessageType {
  kProtocolVersion,
  kSecurityType,
  kClientInit,
  kSetPixelFormat,
  kSetEncodings,
  kFramebufferUpdateRequest,
  kKeyEvent,
  kPointerEvent,
  kClientCutText,
  kEnableContinuousUpdates,
  kFence,
  kXvp,
  kSetDesktopSize,
  kQemuExtendedKeyEvent,
};
std::string_view RfbMessageName(RfbMessageType type);

// What a message does to the guest: input (dropped from a viewer without control) or not.
enum class RfbInput {
  kNone,         // handshake, pixel format, encodings, update requests, fences
  kKey,          // KeyEvent, QEMU extended key event
  kPointer,      // PointerEvent
  kClipboard,    // ClientCutText: it becomes the guest's clipboard
  kDesktopSize,  // SetDesktopSize: resizes the guest's screen
  kPower,        // xvp: shutdown, reboot, reset requests
};

struct RfbMessage {
  RfbMessageType type = RfbMessageType::kProtocolVersion;
  RfbInput input = RfbInput::kNone;
  // The message as it goes to the server: as received, unless `rewritten`.
  std::string bytes;
  // The message was changed on the way (ClientInit's shared flag, SetEncodings' list).
  bool rewritten = false;
  // How many bytes of the viewer's stream it came from.
  size_t received = 0;
  // For the input counts: buttons newly pressed by a PointerEvent since the one before it in
  // the stream (a click each), 1 for a key pressed (key-down).
  int clicks = 0;
  int keys = 0;
  // A PointerEvent's button mask (a bridge that drops some events counts clicks against the
  // last mask it passed).
  uint8_t buttons = 0;
};

class RfbClientParser {
 public:
  // Appends bytes received from the viewer. Bounded by what the caller reads at once: the
  // buffer holds at most one partial message (at most 8 + kMaxCutText) beside it.
  void Feed(std::string_view data);
  // The next whole message, nullopt when more bytes are needed. An error (invalid_argument, or
  // too_large for an oversized ClientCutText) is final: the stream cannot be followed past it,
  // and every later call returns it again.
  Result<std::optional<RfbMessage>> Next();
  // True once ClientInit has gone through: the handshake is over from the viewer's side.
  bool handshake_done() const { return phase_ == Phase::kMessages; }
  // Bytes received and not yet returned as messages.
  size_t buffered() const { return buffer_.size() - start_; }

 private:
  enum class Phase { kVersion, kSecurity, kClientInit, kMessages, kFailed };
  Result<std::optional<RfbMessage>> FailWith(ErrorCode code, std::string message);
  // Takes `n` bytes off the front as a message of `type`.
  RfbMessage Take(RfbMessageType type, RfbInput input, size_t n);
  Result<std::optional<RfbMessage>> NextClientMessage();

  std::string buffer_;
  size_t start_ = 0;  // consumed bytes at the front of buffer_, dropped lazily
  Phase phase_ = Phase::kVersion;
  Error error_;
  uint8_t buttons_ = 0;  // the last PointerEvent's button mask, for counting clicks
};

}  // namespace berth::desktop
