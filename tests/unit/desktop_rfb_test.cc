// The viewer-side RFB parser (controller/desktop/rfb_parser.h): whole messages out of any split
// of the stream, input told apart from the rest, the shared flag forced, and everything it
// does not know refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "controller/desktop/rfb_parser.h"

namespace berth::desktop {
namespace {

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}
std::string U16(int v) { return Bytes({(v >> 8) & 0xff, v & 0xff}); }
std::string U32(int64_t v) {
  auto u = static_cast<uint32_t>(v);
  return Bytes({static_cast<int>(u >> 24), static_cast<int>((u >> 16) & 0xff), static_cast<int>((u >> 8) & 0xff),
                static_cast<int>(u & 0xff)});
}

std::string Handshake(int shared = 1) { return "RFB 003.008\n" + Bytes({1, shared}); }

// One of every client message the parser accepts, as noVNC would send them.
struct Sample {
  RfbMessageType type;
  RfbInput input;
  std::string bytes;
};
std::vector<Sample> Samples() {
  return {
      {RfbMessageType::kSetPixelFormat, RfbInput::kNone,
       Bytes({0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 0, 8, 16, 0, 0, 0})},
      {RfbMessageType::kSetEncodings, RfbInput::kNone, Bytes({2, 0}) + U16(3) + U32(0) + U32(7) + U32(-223)},
      {RfbMessageType::kFramebufferUpdateRequest, RfbInput::kNone, Bytes({3, 1}) + U16(0) + U16(0) + U16(640) + U16(480)},
      {RfbMessageType::kKeyEvent, RfbInput::kKey, Bytes({4, 1, 0, 0}) + U32(0x61)},
      {RfbMessageType::kPointerEvent, RfbInput::kPointer, Bytes({5, 1}) + U16(10) + U16(20)},
      {RfbMessageType::kClientCutText, RfbInput::kClipboard, Bytes({6, 0, 0, 0}) + U32(5) + "hello"},
      {RfbMessageType::kEnableContinuousUpdates, RfbInput::kNone, Bytes({150, 1}) + U16(0) + U16(0) + U16(8) + U16(8)},
      {RfbMessageType::kFence, RfbInput::kNone, Bytes({248, 0, 0, 0}) + U32(0x80000003) + Bytes({3, 'a', 'b', 'c'})},
      {RfbMessageType::kXvp, RfbInput::kPower, Bytes({250, 0, 1, 4})},
      {RfbMessageType::kSetDesktopSize, RfbInput::kDesktopSize,
       Bytes({251, 0}) + U16(1024) + U16(768) + Bytes({1, 0}) + U32(0) + U16(0) + U16(0) + U16(1024) + U16(768) + U32(0)},
      {RfbMessageType::kQemuExtendedKeyEvent, RfbInput::kKey, Bytes({255, 0}) + U16(1) + U32(0x61) + U32(30)},
  };
}

// Feeds `chunks` one after the other, collecting every message; the error, if one came.
struct Parsed {
  std::vector<RfbMessage> messages;
  std::optional<Error> error;
};
Parsed ParseChunks(const std::vector<std::string>& chunks) {
  RfbClientParser p;
  Parsed out;
  for (const auto& c : chunks) {
    p.Feed(c);
    for (;;) {
      auto m = p.Next();
      if (!m) {
        out.error = m.error();
        return out;
      }
      if (!*m) break;
      out.messages.push_back(std::move(**m));
    }
  }
  return out;
}

TEST_CASE("every client message comes out whole however the stream is split") {
  std::string stream = Handshake();
  for (const auto& s : Samples()) stream += s.bytes;
  auto whole = ParseChunks({stream});
  REQUIRE_FALSE(whole.error);
  REQUIRE(whole.messages.size() == 3 + Samples().size());
  for (size_t i = 0; i < Samples().size(); ++i) {
    CHECK(whole.messages[3 + i].type == Samples()[i].type);
    CHECK(whole.messages[3 + i].input == Samples()[i].input);
    CHECK(whole.messages[3 + i].bytes == Samples()[i].bytes);
  }
  // Two reads, cut at every byte boundary of the stream (so inside every message type).
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    auto split = ParseChunks({stream.substr(0, cut), stream.substr(cut)});
    REQUIRE_FALSE(split.error);
    REQUIRE(split.messages.size() == whole.messages.size());
    for (size_t i = 0; i < split.messages.size(); ++i) CHECK(split.messages[i].bytes == whole.messages[i].bytes);
  }
  // One byte per read.
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  auto trickled = ParseChunks(bytes);
  REQUIRE_FALSE(trickled.error);
  CHECK(trickled.messages.size() == whole.messages.size());
}

TEST_CASE("a message is held back until its last byte arrives") {
  RfbClientParser p;
  p.Feed(Handshake());
  for (int i = 0; i < 3; ++i) REQUIRE(p.Next().value().has_value());
  CHECK(p.handshake_done());
  std::string key = Bytes({4, 1, 0, 0}) + U32(0x61);
  p.Feed(key.substr(0, 7));
  CHECK_FALSE(p.Next().value().has_value());
  CHECK(p.buffered() == 7);
  p.Feed(key.substr(7));
  auto m = p.Next().value();
  REQUIRE(m.has_value());
  CHECK(m->bytes == key);
  CHECK(p.buffered() == 0);
}

TEST_CASE("an unknown message type fails closed, and stays failed") {
  for (int type : {1, 7, 8, 127, 149, 249, 252, 253, 254}) {
    auto parsed = ParseChunks({Handshake() + Bytes({type, 0, 0, 0, 0, 0, 0, 0})});
    INFO("type " << type);
    REQUIRE(parsed.error);
    CHECK(parsed.error->code == ErrorCode::kInvalidArgument);
  }
  RfbClientParser p;
  p.Feed(Handshake() + Bytes({7}));
  for (int i = 0; i < 3; ++i) REQUIRE(p.Next());
  CHECK_FALSE(p.Next());
  // Valid bytes after the failure change nothing: the stream cannot be followed any more.
  p.Feed(Bytes({3, 1}) + U16(0) + U16(0) + U16(1) + U16(1));
  CHECK_FALSE(p.Next());
}

TEST_CASE("QEMU's client message passes only its extended key event") {
  auto audio = ParseChunks({Handshake() + Bytes({255, 1}) + U16(0)});
  REQUIRE(audio.error);
  auto key = ParseChunks({Handshake() + Bytes({255, 0}) + U16(0) + U32(0x61) + U32(30)});
  REQUIRE_FALSE(key.error);
  CHECK(key.messages.back().keys == 0);  // a key release is no key press
}

TEST_CASE("ClientCutText over 1 MiB is refused before it is buffered") {
  auto big = ParseChunks({Handshake() + Bytes({6, 0, 0, 0}) + U32(kMaxCutText + 1)});
  REQUIRE(big.error);
  CHECK(big.error->code == ErrorCode::kTooLarge);
  // The extended-clipboard form (a negative length) is bounded the same.
  auto extended = ParseChunks({Handshake() + Bytes({6, 0, 0, 0}) + U32(-static_cast<int64_t>(kMaxCutText) - 1)});
  REQUIRE(extended.error);
  CHECK(extended.error->code == ErrorCode::kTooLarge);
  auto at_limit = ParseChunks({Handshake() + Bytes({6, 0, 0, 0}) + U32(kMaxCutText) + std::string(kMaxCutText, 'x')});
  REQUIRE_FALSE(at_limit.error);
  CHECK(at_limit.messages.back().bytes.size() == 8 + kMaxCutText);
}

TEST_CASE("the shared flag is forced to 1 towards the server") {
  auto exclusive = ParseChunks({Handshake(0)});
  REQUIRE(exclusive.messages.size() == 3);
  CHECK(exclusive.messages[2].type == RfbMessageType::kClientInit);
  CHECK(exclusive.messages[2].bytes == Bytes({1}));
  CHECK(exclusive.messages[2].rewritten);
  auto shared = ParseChunks({Handshake(1)});
  CHECK(shared.messages[2].bytes == Bytes({1}));
  CHECK_FALSE(shared.messages[2].rewritten);
}

TEST_CASE("the handshake accepts RFB 3.8 and security None only") {
  CHECK(ParseChunks({"RFB 003.003\n"}).error);
  CHECK(ParseChunks({"RFB 003.007\n"}).error);
  CHECK(ParseChunks({"GET / HTTP/1.1\r\n"}).error);
  CHECK(ParseChunks({"RFB 003.008\n" + Bytes({2})}).error);   // VNC authentication
  CHECK(ParseChunks({"RFB 003.008\n" + Bytes({19})}).error);  // VeNCrypt
  // A wrong version is refused at its first wrong byte, not after twelve.
  CHECK(ParseChunks({"X"}).error);
}

TEST_CASE("SetEncodings loses the pseudo-encodings that change the client's framing") {
  std::string msg = Bytes({2, 0}) + U16(4) + U32(7) + U32(-316) + U32(-258) + U32(-305);
  auto parsed = ParseChunks({Handshake() + msg});
  REQUIRE_FALSE(parsed.error);
  const auto& m = parsed.messages.back();
  CHECK(m.rewritten);
  CHECK(m.bytes == Bytes({2, 0}) + U16(2) + U32(7) + U32(-258));
  auto huge = ParseChunks({Handshake() + Bytes({2, 0}) + U16(kMaxEncodings + 1)});
  CHECK(huge.error);
}

TEST_CASE("input is classified, with clicks and key presses counted") {
  std::string stream = Handshake();
  stream += Bytes({5, 0}) + U16(1) + U16(1);  // move
  stream += Bytes({5, 1}) + U16(1) + U16(1);  // left down: a click
  stream += Bytes({5, 1}) + U16(2) + U16(2);  // drag: no new click
  stream += Bytes({5, 5}) + U16(2) + U16(2);  // right down too: a click
  stream += Bytes({5, 0}) + U16(2) + U16(2);  // all up
  stream += Bytes({4, 1, 0, 0}) + U32(0x61);  // key down
  stream += Bytes({4, 0, 0, 0}) + U32(0x61);  // key up
  auto parsed = ParseChunks({stream});
  REQUIRE_FALSE(parsed.error);
  std::vector<int> clicks;
  std::vector<int> keys;
  for (size_t i = 3; i < parsed.messages.size(); ++i) {
    clicks.push_back(parsed.messages[i].clicks);
    keys.push_back(parsed.messages[i].keys);
  }
  CHECK(clicks == std::vector<int>{0, 1, 0, 1, 0, 0, 0});
  CHECK(keys == std::vector<int>{0, 0, 0, 0, 0, 1, 0});
  for (size_t i = 0; i < 3; ++i) CHECK(parsed.messages[i].input == RfbInput::kNone);
}

TEST_CASE("a Fence payload over 64 bytes and SetDesktopSize's screens are bounded by their fields") {
  CHECK(ParseChunks({Handshake() + Bytes({248, 0, 0, 0}) + U32(0) + Bytes({65})}).error);
  // 255 screens is 4 KiB: held until it is whole, then passed whole.
  std::string resize = Bytes({251, 0}) + U16(10) + U16(10) + Bytes({255, 0});
  auto partial = ParseChunks({Handshake() + resize});
  REQUIRE_FALSE(partial.error);
  CHECK(partial.messages.size() == 3);
  auto whole = ParseChunks({Handshake() + resize + std::string(255 * 16, '\0')});
  REQUIRE_FALSE(whole.error);
  CHECK(whole.messages.back().bytes.size() == 8 + 255 * 16);
}

}  // namespace
}  // namespace berth::desktop
