#include "controller/desktop/rfb_parser.h"

#include <bit>

#include <fmt/format.h>

namespace berth::desktop {
namespace {

constexpr std::string_view kVersion38 = "RFB 003.008\n";
constexpr uint8_t kSecurityNone = 1;

// Pseudo-encodings that change how later client messages are framed (see the header).
constexpr int32_t kExtendedMouseButtons = -316;
constexpr int32_t kGii = -305;

uint16_t U16(std::string_view b, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(b[at]) << 8) | static_cast<uint8_t>(b[at + 1]));
}
uint32_t U32(std::string_view b, size_t at) {
  return (static_cast<uint32_t>(U16(b, at)) << 16) | U16(b, at + 2);
}

}  // namespace

std::string_view RfbMessageName(RfbMessageType type) {
  switch (type) {
    case RfbMessageType::kProtocolVersion: return "ProtocolVersion";
    case RfbMessageType::kSecurityType: return "SecurityType";
    case RfbMessageType::kClientInit: return "ClientInit";
    case RfbMessageType::kSetPixelFormat: return "SetPixelFormat";
    case RfbMessageType::kSetEncodings: return "SetEncodings";
    case RfbMessageType::kFramebufferUpdateRequest: return "FramebufferUpdateRequest";
    case RfbMessageType::kKeyEvent: return "KeyEvent";
    case RfbMessageType::kPointerEvent: return "PointerEvent";
    case RfbMessageType::kClientCutText: return "ClientCutText";
    case RfbMessageType::kEnableContinuousUpdates: return "EnableContinuousUpdates";
    case RfbMessageType::kFence: return "Fence";
    case RfbMessageType::kXvp: return "xvp";
    case RfbMessageType::kSetDesktopSize: return "SetDesktopSize";
    case RfbMessageType::kQemuExtendedKeyEvent: return "QEMUExtendedKeyEvent";
  }
  return "?";
}

void RfbClientParser::Feed(std::string_view data) {
  if (phase_ == Phase::kFailed) return;
  // Drop what was consumed before growing: the buffer stays one partial message plus `data`.
  if (start_ > 0) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(data);
}

Result<std::optional<RfbMessage>> RfbClientParser::FailWith(ErrorCode code, std::string message) {
  phase_ = Phase::kFailed;
  error_ = Error(code, "rfb: " + message);
  buffer_.clear();
  start_ = 0;
  return berth::Fail(error_);
}

RfbMessage RfbClientParser::Take(RfbMessageType type, RfbInput input, size_t n) {
  RfbMessage m;
  m.type = type;
  m.input = input;
  m.bytes.assign(buffer_, start_, n);
  m.received = n;
  start_ += n;
  return m;
}

Result<std::optional<RfbMessage>> RfbClientParser::Next() {
  std::string_view b(buffer_);
  b.remove_prefix(start_);
  switch (phase_) {
    case Phase::kFailed:
      return berth::Fail(error_);
    case Phase::kVersion: {
      // Refuse a wrong version as soon as its bytes disagree, not after 12 of them.
      size_t n = std::min(b.size(), kVersion38.size());
      if (b.substr(0, n) != kVersion38.substr(0, n)) {
        return FailWith(ErrorCode::kInvalidArgument, "the viewer must speak RFB 3.8");
      }
      if (b.size() < kVersion38.size()) return std::optional<RfbMessage>();
      phase_ = Phase::kSecurity;
      return std::optional(Take(RfbMessageType::kProtocolVersion, RfbInput::kNone, kVersion38.size()));
    }
    case Phase::kSecurity:
      if (b.empty()) return std::optional<RfbMessage>();
      if (static_cast<uint8_t>(b[0]) != kSecurityNone) {
        return FailWith(ErrorCode::kInvalidArgument,
                        fmt::format("security type {} refused: berthd offers None only",
                                    static_cast<uint8_t>(b[0])));
      }
      phase_ = Phase::kClientInit;
      return std::optional(Take(RfbMessageType::kSecurityType, RfbInput::kNone, 1));
    case Phase::kClientInit: {
      if (b.empty()) return std::optional<RfbMessage>();
      RfbMessage m = Take(RfbMessageType::kClientInit, RfbInput::kNone, 1);
      if (m.bytes[0] != 1) {
        m.bytes[0] = 1;  // shared: nobody disconnects the other viewers
        m.rewritten = true;
      }
      phase_ = Phase::kMessages;
      return std::optional(std::move(m));
    }
    case Phase::kMessages:
      return NextClientMessage();
  }
  return FailWith(ErrorCode::kInternal, "unreachable parser state");
}

Result<std::optional<RfbMessage>> RfbClientParser::NextClientMessage() {
  std::string_view b(buffer_);
  b.remove_prefix(start_);
  if (b.empty()) return std::optional<RfbMessage>();
  const uint8_t type = static_cast<uint8_t>(b[0]);
  auto need = [&](size_t n) { return b.size() >= n; };
  using T = RfbMessageType;
  switch (type) {
    case 0:  // SetPixelFormat: type, 3 padding, 16 pixel format
      if (!need(20)) return std::optional<RfbMessage>();
      return std::optional(Take(T::kSetPixelFormat, RfbInput::kNone, 20));
    case 2: {  // SetEncodings: type, padding, u16 count, s32 each
      if (!need(4)) return std::optional<RfbMessage>();
      size_t count = U16(b, 2);
      if (count > kMaxEncodings) {
        return FailWith(ErrorCode::kInvalidArgument, fmt::format("SetEncodings with {} encodings", count));
      }
      if (!need(4 + 4 * count)) return std::optional<RfbMessage>();
      RfbMessage m = Take(T::kSetEncodings, RfbInput::kNone, 4 + 4 * count);
      std::string kept = m.bytes.substr(0, 4);
      size_t left = 0;
      for (size_t i = 0; i < count; ++i) {
        auto encoding = static_cast<int32_t>(U32(m.bytes, 4 + 4 * i));
        if (encoding == kExtendedMouseButtons || encoding == kGii) continue;
        kept.append(m.bytes, 4 + 4 * i, 4);
        ++left;
      }
      if (left != count) {
        kept[2] = static_cast<char>(left >> 8);
        kept[3] = static_cast<char>(left & 0xff);
        m.bytes = std::move(kept);
        m.rewritten = true;
      }
      return std::optional(std::move(m));
    }
    case 3:  // FramebufferUpdateRequest: type, incremental, x, y, w, h
      if (!need(10)) return std::optional<RfbMessage>();
      return std::optional(Take(T::kFramebufferUpdateRequest, RfbInput::kNone, 10));
    case 4: {  // KeyEvent: type, down, 2 padding, u32 keysym
      if (!need(8)) return std::optional<RfbMessage>();
      RfbMessage m = Take(T::kKeyEvent, RfbInput::kKey, 8);
      m.keys = m.bytes[1] != 0 ? 1 : 0;
      return std::optional(std::move(m));
    }
    case 5: {  // PointerEvent: type, button mask, x, y
      if (!need(6)) return std::optional<RfbMessage>();
      RfbMessage m = Take(T::kPointerEvent, RfbInput::kPointer, 6);
      auto mask = static_cast<uint8_t>(m.bytes[1]);
      m.clicks = std::popcount(static_cast<unsigned>(mask & ~buttons_ & 0xff));
      m.buttons = mask;
      buttons_ = mask;
      return std::optional(std::move(m));
    }
    case 6: {  // ClientCutText: type, 3 padding, s32 length, text
      if (!need(8)) return std::optional<RfbMessage>();
      auto length = static_cast<int32_t>(U32(b, 4));
      // Negative: the extended clipboard's form, |length| bytes of its own framing.
      uint64_t n = length < 0 ? -static_cast<int64_t>(length) : static_cast<int64_t>(length);
      if (n > kMaxCutText) {
        return FailWith(ErrorCode::kTooLarge,
                        fmt::format("ClientCutText of {} bytes (at most {})", n, kMaxCutText));
      }
      if (!need(8 + n)) return std::optional<RfbMessage>();
      return std::optional(Take(T::kClientCutText, RfbInput::kClipboard, 8 + n));
    }
    case 150:  // EnableContinuousUpdates: type, enable, x, y, w, h
      if (!need(10)) return std::optional<RfbMessage>();
      return std::optional(Take(T::kEnableContinuousUpdates, RfbInput::kNone, 10));
    case 248: {  // Fence: type, 3 padding, u32 flags, u8 length, payload
      if (!need(9)) return std::optional<RfbMessage>();
      size_t n = static_cast<uint8_t>(b[8]);
      if (n > 64) return FailWith(ErrorCode::kInvalidArgument, fmt::format("Fence payload of {} bytes", n));
      if (!need(9 + n)) return std::optional<RfbMessage>();
      return std::optional(Take(T::kFence, RfbInput::kNone, 9 + n));
    }
    case 250:  // xvp: type, padding, version, code
      if (!need(4)) return std::optional<RfbMessage>();
      return std::optional(Take(T::kXvp, RfbInput::kPower, 4));
    case 251: {  // SetDesktopSize: type, padding, w, h, u8 screens, padding, 16 per screen
      if (!need(8)) return std::optional<RfbMessage>();
      size_t screens = static_cast<uint8_t>(b[6]);
      if (!need(8 + 16 * screens)) return std::optional<RfbMessage>();
      return std::optional(Take(T::kSetDesktopSize, RfbInput::kDesktopSize, 8 + 16 * screens));
    }
    case 255: {  // QEMU: type, sub-type, ...
      if (!need(2)) return std::optional<RfbMessage>();
      if (static_cast<uint8_t>(b[1]) != 0) {
        return FailWith(ErrorCode::kInvalidArgument,
                        fmt::format("QEMU client message sub-type {} refused", static_cast<uint8_t>(b[1])));
      }
      // Extended key event: type, 0, u16 down, u32 keysym, u32 keycode.
      if (!need(12)) return std::optional<RfbMessage>();
      RfbMessage m = Take(T::kQemuExtendedKeyEvent, RfbInput::kKey, 12);
      m.keys = U16(m.bytes, 2) != 0 ? 1 : 0;
      return std::optional(std::move(m));
    }
    default:
      return FailWith(ErrorCode::kInvalidArgument, fmt::format("unknown client message type {}", type));
  }
}

}  // namespace berth::desktop
