// Computer-use actions (POST /v1/workspaces/{ws}/desktop/actions) as RFB input: what the agent
// asks for, checked against the screen, compiled into the KeyEvent and PointerEvent messages a
// viewer would send (rfb_client.h writes them). Pure; any thread.
//
// A request is one action object or {"actions": [...]} (at most kMaxActions). Each action has a
// "type":
//   move {x, y}                      the pointer to (x, y)
//   click {x?, y?, button?, count?}  button "left" (default) | "middle" | "right"; count 1-3
//                                    (double, triple click); at (x, y) when given
//   mouse_down / mouse_up {x?, y?, button?}
//   drag {path: [[x, y], ...], button?}  down at the first point, through the rest, up at the
//                                    last (2-100 points); or {from: [x, y], to: [x, y]}
//   scroll {x?, y?, dx?, dy?}        wheel notches, dy > 0 down, dx > 0 right (each -50..50)
//   type {text}                      text as keystrokes on the guest's keyboard map (en-us):
//                                    printable ASCII, newline (Return) and tab; anything else
//                                    is refused by code point (the clipboard carries it)
//   key {keys}                       "Return", "ctrl+c", "ctrl+shift+t", "alt+F4": modifiers
//                                    (ctrl, shift, alt, meta) and one key, pressed in order and
//                                    released in reverse
//   hold_key {keys, ms}              the same, held for ms (at most 10 s)
//   wait {ms}                        a pause (at most 10 s)
// Coordinates are the screen's pixels, 0 <= x < width, 0 <= y < height (a scaled screenshot's
// coordinates divided by its scale). Moves in a row are coalesced into the last one, so a
// click never queues behind a flood of moves. Everything is checked before anything is sent:
// a bad action anywhere in a batch sends nothing.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/desktop/rfb_client.h"

namespace berth::desktop {

inline constexpr size_t kMaxActions = 200;
inline constexpr size_t kMaxTypedText = 10'000;  // characters per batch
inline constexpr std::chrono::milliseconds kMaxPause{10'000};  // one wait or hold
inline constexpr std::chrono::milliseconds kMaxPauses{30'000};  // all of a batch's

// What to write, then how long to wait before the next step.
struct InputStep {
  std::string messages;
  std::chrono::milliseconds then{0};
};

struct CompiledInput {
  std::vector<InputStep> steps;
  size_t actions = 0;
  int clicks = 0;  // button presses
  int keys = 0;    // key presses
};

// invalid_argument, naming the action by its index, for anything out of bounds.
Result<CompiledInput> CompileActions(const nlohmann::json& request, ScreenSize screen);

// The RFB messages themselves (RFB 3.8, 7.5.4 and 7.5.5).
std::string KeyEventMessage(uint32_t keysym, bool down);
std::string PointerEventMessage(uint8_t buttons, int x, int y);

}  // namespace berth::desktop
