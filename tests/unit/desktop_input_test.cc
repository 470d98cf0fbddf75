// The agent's hands and eyes, the pure parts: computer-use actions compiled to RFB input
// (controller/desktop/rfb_input.h), and screenshots scaled and encoded (screen_image.h).
#include <catch2/catch.hpp>

#include <png.h>

#include "controller/desktop/rfb_input.h"
#include "controller/desktop/screen_image.h"

namespace berth::desktop {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr ScreenSize kScreen{1280, 800};
constexpr uint32_t kShift = 0xffe1;
constexpr uint32_t kControl = 0xffe3;

std::string Down(uint32_t k) { return KeyEventMessage(k, true); }
std::string Up(uint32_t k) { return KeyEventMessage(k, false); }
std::string Tap(uint32_t k) { return Down(k) + Up(k); }
std::string Shifted(uint32_t k) { return Down(kShift) + Tap(k) + Up(kShift); }

// Every step's messages, joined (for batches without pauses).
std::string Bytes(const CompiledInput& in) {
  std::string out;
  for (const auto& s : in.steps) out += s.messages;
  return out;
}

}  // namespace

TEST_CASE("desktop input: the RFB messages are laid out as RFB 3.8 says", "[desktop]") {
  CHECK(KeyEventMessage(0xff0d, true) == std::string("\x04\x01\x00\x00\x00\x00\xff\x0d", 8));
  CHECK(KeyEventMessage(0x61, false) == std::string("\x04\x00\x00\x00\x00\x00\x00\x61", 8));
  CHECK(PointerEventMessage(1, 0x123, 0x456) == std::string("\x05\x01\x01\x23\x04\x56", 6));
}

TEST_CASE("desktop input: a click moves, presses and releases; count makes double and triple clicks",
          "[desktop]") {
  auto one = CompileActions(json{{"type", "click"}, {"x", 10}, {"y", 20}}, kScreen);
  REQUIRE(one);
  CHECK(Bytes(*one) == PointerEventMessage(0, 10, 20) + PointerEventMessage(1, 10, 20) + PointerEventMessage(0, 10, 20));
  CHECK(one->clicks == 1);
  CHECK(one->actions == 1);
  auto right = CompileActions(json{{"type", "click"}, {"x", 1}, {"y", 2}, {"button", "right"}, {"count", 2}}, kScreen);
  REQUIRE(right);
  CHECK(Bytes(*right) == PointerEventMessage(0, 1, 2) + PointerEventMessage(4, 1, 2) + PointerEventMessage(0, 1, 2) +
                             PointerEventMessage(4, 1, 2) + PointerEventMessage(0, 1, 2));
  CHECK(right->clicks == 2);
  // Where the pointer is, when no x and y are given; none yet is an error.
  auto here = CompileActions(json{{"actions", {{{"type", "move"}, {"x", 5}, {"y", 6}}, {{"type", "click"}}}}}, kScreen);
  REQUIRE(here);
  CHECK(Bytes(*here) == PointerEventMessage(0, 5, 6) + PointerEventMessage(1, 5, 6) + PointerEventMessage(0, 5, 6));
  auto nowhere = CompileActions(json{{"type", "click"}}, kScreen);
  REQUIRE_FALSE(nowhere);
  CHECK(nowhere.error().message.find("no position") != std::string::npos);
}

TEST_CASE("desktop input: moves in a row collapse into the last, so a click never waits behind them",
          "[desktop]") {
  json actions = json::array();
  for (int i = 0; i < 150; ++i) actions.push_back({{"type", "move"}, {"x", i}, {"y", i}});
  actions.push_back({{"type", "click"}});
  auto in = CompileActions(json{{"actions", actions}}, kScreen);
  REQUIRE(in);
  CHECK(Bytes(*in) == PointerEventMessage(0, 149, 149) + PointerEventMessage(1, 149, 149) + PointerEventMessage(0, 149, 149));
  CHECK(in->actions == 151);
  // A drag's path is not coalesced: every point is part of the gesture.
  auto drag = CompileActions(json{{"type", "drag"}, {"path", {{0, 0}, {5, 5}, {9, 9}}}}, kScreen);
  REQUIRE(drag);
  CHECK(Bytes(*drag) == PointerEventMessage(0, 0, 0) + PointerEventMessage(1, 0, 0) + PointerEventMessage(1, 5, 5) +
                            PointerEventMessage(1, 9, 9) + PointerEventMessage(0, 9, 9));
}

TEST_CASE("desktop input: text is typed as the en-us keyboard types it, Shift held where a person holds it",
          "[desktop]") {
  auto in = CompileActions(json{{"type", "type"}, {"text", "aZ!\n\t"}}, kScreen);
  REQUIRE(in);
  CHECK(Bytes(*in) == Tap('a') + Shifted('Z') + Shifted('!') + Tap(0xff0d) + Tap(0xff09));
  CHECK(in->keys == 5);
  // What the map does not reach is refused by code point, and nothing of the batch is sent.
  auto accented = CompileActions(json{{"actions", {{{"type", "type"}, {"text", "ok"}}, {{"type", "type"}, {"text", "caf\u00e9"}}}}},
                                 kScreen);
  REQUIRE_FALSE(accented);
  CHECK(accented.error().message.find("action 1") != std::string::npos);
  CHECK(accented.error().message.find("U+00E9") != std::string::npos);
  CHECK_FALSE(CompileActions(json{{"type", "type"}, {"text", std::string(kMaxTypedText + 1, 'x')}}, kScreen));
}

TEST_CASE("desktop input: key combinations press in order and release in reverse", "[desktop]") {
  auto copy = CompileActions(json{{"type", "key"}, {"keys", "ctrl+c"}}, kScreen);
  REQUIRE(copy);
  CHECK(Bytes(*copy) == Down(kControl) + Down('c') + Up('c') + Up(kControl));
  auto tab = CompileActions(json{{"type", "key"}, {"keys", "Ctrl+Shift+T"}}, kScreen);
  REQUIRE(tab);
  CHECK(Bytes(*tab) == Down(kControl) + Down(kShift) + Down('T') + Up('T') + Up(kShift) + Up(kControl));
  auto f4 = CompileActions(json{{"type", "key"}, {"keys", "alt+F4"}}, kScreen);
  REQUIRE(f4);
  CHECK(Bytes(*f4) == Down(0xffe9) + Down(0xffc1) + Up(0xffc1) + Up(0xffe9));
  auto plus = CompileActions(json{{"type", "key"}, {"keys", "ctrl++"}}, kScreen);
  REQUIRE(plus);
  CHECK(Bytes(*plus) == Down(kControl) + Down(kShift) + Down('+') + Up('+') + Up(kShift) + Up(kControl));
  CHECK_FALSE(CompileActions(json{{"type", "key"}, {"keys", "hyper+x"}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "key"}, {"keys", "ctrl+nosuchkey"}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "key"}, {"keys", ""}}, kScreen));
}

TEST_CASE("desktop input: waits and held keys split the batch into timed steps, bounded", "[desktop]") {
  auto in = CompileActions(json{{"actions", {{{"type", "key"}, {"keys", "a"}},
                                             {{"type", "wait"}, {"ms", 250}},
                                             {{"type", "hold_key"}, {"keys", "shift"}, {"ms", 100}}}}},
                           kScreen);
  REQUIRE(in);
  REQUIRE(in->steps.size() == 3);
  CHECK(in->steps[0].messages == Tap('a'));
  CHECK(in->steps[0].then == milliseconds(250));
  CHECK(in->steps[1].messages == Down(kShift));
  CHECK(in->steps[1].then == milliseconds(100));
  CHECK(in->steps[2].messages == Up(kShift));
  CHECK_FALSE(CompileActions(json{{"type", "wait"}, {"ms", 10'001}}, kScreen));
  json waits = json::array();
  for (int i = 0; i < 4; ++i) waits.push_back({{"type", "wait"}, {"ms", 10'000}});
  CHECK_FALSE(CompileActions(json{{"actions", waits}}, kScreen));  // 40 s in all
}

TEST_CASE("desktop input: points off the screen, bad shapes and too many actions are refused by index",
          "[desktop]") {
  auto off = CompileActions(json{{"type", "click"}, {"x", 1280}, {"y", 0}}, kScreen);
  REQUIRE_FALSE(off);
  CHECK(off.error().code == ErrorCode::kInvalidArgument);
  CHECK(off.error().message.find("off the 1280x800 screen") != std::string::npos);
  CHECK_FALSE(CompileActions(json{{"type", "move"}, {"x", -1}, {"y", 0}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "move"}, {"x", 1.5}, {"y", 0}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "move"}, {"x", 1}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "click"}, {"x", 1}, {"y", 1}, {"count", 4}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "click"}, {"x", 1}, {"y", 1}, {"button", "fourth"}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "scroll"}, {"x", 1}, {"y", 1}, {"dy", 51}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "drag"}, {"path", {{0, 0}}}}, kScreen));
  CHECK_FALSE(CompileActions(json{{"type", "teleport"}}, kScreen));
  CHECK_FALSE(CompileActions(json::array(), kScreen));
  json many = json::array();
  for (size_t i = 0; i <= kMaxActions; ++i) many.push_back({{"type", "wait"}, {"ms", 0}});
  CHECK_FALSE(CompileActions(json{{"actions", many}}, kScreen));
  auto scroll = CompileActions(json{{"type", "scroll"}, {"x", 3}, {"y", 4}, {"dy", 2}, {"dx", -1}}, kScreen);
  REQUIRE(scroll);
  CHECK(Bytes(*scroll) == PointerEventMessage(0, 3, 4) + PointerEventMessage(16, 3, 4) + PointerEventMessage(0, 3, 4) +
                              PointerEventMessage(16, 3, 4) + PointerEventMessage(0, 3, 4) +
                              PointerEventMessage(32, 3, 4) + PointerEventMessage(0, 3, 4));
}

TEST_CASE("desktop screenshots: scaling averages what each pixel covers; PNG and JPEG decode to the size",
          "[desktop]") {
  Frame f;
  f.size = {4, 2};
  // Left half black, right half white.
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 4; ++x) f.rgb += std::string(3, x < 2 ? '\x00' : '\xff');
  }
  Frame half = ScaleFrame(f, 0.5);
  CHECK(half.size.width == 2);
  CHECK(half.size.height == 1);
  CHECK(half.rgb == std::string("\x00\x00\x00\xff\xff\xff", 6));
  Frame quarter = ScaleFrame(f, 0.25);
  CHECK(quarter.size.width == 1);
  CHECK(quarter.size.height == 1);
  CHECK(static_cast<uint8_t>(quarter.rgb[0]) == 128);
  CHECK(ScaleFrame(f, 1.0).rgb == f.rgb);

  auto png = EncodeFrame(f, ImageFormat::kPng);
  REQUIRE(png);
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_memory(&image, png->data(), png->size()));
  CHECK(image.width == 4);
  CHECK(image.height == 2);
  image.format = PNG_FORMAT_RGB;
  std::string decoded(PNG_IMAGE_SIZE(image), '\0');
  REQUIRE(png_image_finish_read(&image, nullptr, decoded.data(), 0, nullptr));
  CHECK(decoded == f.rgb);
  auto jpeg = EncodeFrame(f, ImageFormat::kJpeg, 90);
  REQUIRE(jpeg);
  CHECK(jpeg->substr(0, 3) == std::string("\xff\xd8\xff", 3));
  CHECK(ParseImageFormat("jpg").value() == ImageFormat::kJpeg);
  CHECK_FALSE(ParseImageFormat("gif"));
  CHECK_FALSE(EncodeFrame(Frame{}, ImageFormat::kPng));
}

// Decodes a PNG with libpng (the reference decoder): its width, height and RGB bytes.
struct Decoded {
  uint32_t width = 0;
  uint32_t height = 0;
  std::string rgb;
};
Decoded DecodePng(const std::string& png) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_memory(&image, png.data(), png.size()));
  image.format = PNG_FORMAT_RGB;
  Decoded out{image.width, image.height, std::string(PNG_IMAGE_SIZE(image), '\0')};
  REQUIRE(png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr));
  return out;
}

TEST_CASE("desktop screenshots: the hand-written PNG decodes to every byte of the frame, "
          "wrapping differences, odd sizes and one pixel included",
          "[desktop]") {
  for (auto [w, h] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{37, 23}, std::pair{1280, 3}}) {
    Frame f;
    f.size = {w, h};
    uint32_t seed = 12345;
    for (int i = 0; i < w * h * 3; ++i) {
      // Flat runs, steps that wrap below zero, and noise: what the Sub filter must get right.
      seed = seed * 1103515245 + 12345;
      int x = (i / 3) % w;
      f.rgb += static_cast<char>(x < w / 3 ? 200 : x < 2 * w / 3 ? (seed >> 16) & 0xff : 255 - x % 7);
    }
    auto png = EncodeFrame(f, ImageFormat::kPng);
    REQUIRE(png);
    CHECK(png->substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
    Decoded d = DecodePng(*png);
    CHECK(d.width == static_cast<uint32_t>(w));
    CHECK(d.height == static_cast<uint32_t>(h));
    CHECK(d.rgb == f.rgb);
  }
  // A flat screen compresses to almost nothing: the filter and the compressor do their work.
  Frame flat;
  flat.size = {1280, 800};
  flat.rgb.assign(1280 * 800 * 3, '\x40');
  auto png = EncodeFrame(flat, ImageFormat::kPng);
  REQUIRE(png);
  CHECK(png->size() < 20000);
  CHECK(DecodePng(*png).rgb == flat.rgb);
}

}  // namespace berth::desktop
