#include "controller/desktop/rfb_input.h"

#include <cctype>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace berth::desktop {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr uint32_t kShift = 0xffe1;
constexpr uint32_t kControl = 0xffe3;
constexpr uint32_t kAlt = 0xffe9;
constexpr uint32_t kSuper = 0xffeb;
constexpr uint32_t kReturn = 0xff0d;
constexpr uint32_t kTab = 0xff09;
constexpr size_t kMaxDragPoints = 100;
constexpr int kMaxNotches = 50;

// A key on the en-us map: its keysym, and whether Shift must be held for it.
struct Key {
  uint32_t keysym = 0;
  bool shift = false;
};

// A printable ASCII character as the en-us keyboard types it: its keysym (the same number),
// with Shift held for the upper row. QEMU maps a keysym to its key without pressing Shift
// itself, so 'A' is Shift and A, as noVNC sends it when a person types it.
std::optional<Key> CharKey(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u > 0x7e) return std::nullopt;
  static constexpr std::string_view kShifted = "~!@#$%^&*()_+{}|:\"<>?";
  return Key{u, std::isupper(u) != 0 || kShifted.find(c) != std::string_view::npos};
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<uint32_t> ModifierKeysym(const std::string& name) {
  if (name == "ctrl" || name == "control") return kControl;
  if (name == "shift") return kShift;
  if (name == "alt" || name == "option") return kAlt;
  if (name == "meta" || name == "super" || name == "win" || name == "cmd" || name == "command") return kSuper;
  return std::nullopt;
}

std::optional<Key> NamedKey(std::string_view raw) {
  if (raw.size() == 1) return CharKey(raw[0]);
  std::string name = Lower(raw);
  static const std::pair<std::string_view, uint32_t> kNames[] = {
      {"enter", kReturn},      {"return", kReturn},     {"tab", kTab},           {"esc", 0xff1b},
      {"escape", 0xff1b},      {"backspace", 0xff08},   {"delete", 0xffff},      {"del", 0xffff},
      {"insert", 0xff63},      {"home", 0xff50},        {"end", 0xff57},         {"pageup", 0xff55},
      {"page_up", 0xff55},     {"pagedown", 0xff56},    {"page_down", 0xff56},   {"left", 0xff51},
      {"up", 0xff52},          {"right", 0xff53},       {"down", 0xff54},        {"arrowleft", 0xff51},
      {"arrowup", 0xff52},     {"arrowright", 0xff53},  {"arrowdown", 0xff54},   {"space", 0x20},
      {"capslock", 0xffe5},    {"menu", 0xff67},        {"print", 0xff61},       {"printscreen", 0xff61},
  };
  for (const auto& [n, keysym] : kNames) {
    if (name == n) return Key{keysym, false};
  }
  if (name.size() >= 2 && name[0] == 'f') {
    int f = 0;
    for (size_t i = 1; i < name.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(name[i])) || i > 2) return std::nullopt;
      f = f * 10 + (name[i] - '0');
    }
    if (f >= 1 && f <= 12) return Key{0xffbe + static_cast<uint32_t>(f - 1), false};
  }
  if (auto m = ModifierKeysym(name)) return Key{*m, false};
  return std::nullopt;
}

// The keysyms of a combination, in press order ("ctrl+shift+t": Control, Shift, t).
Result<std::vector<uint32_t>> ParseKeys(const std::string& keys) {
  if (keys.empty() || keys.size() > 64) return Fail(ErrorCode::kInvalidArgument, "'keys' is 1 to 64 characters");
  std::vector<std::string> parts;
  std::string rest = keys;
  std::string last;
  if (rest == "+") {
    last = "+";
    rest.clear();
  } else if (rest.size() >= 2 && rest.ends_with("++")) {
    last = "+";
    rest.resize(rest.size() - 2);
  } else {
    auto plus = rest.rfind('+');
    last = plus == std::string::npos ? rest : rest.substr(plus + 1);
    rest = plus == std::string::npos ? "" : rest.substr(0, plus);
  }
  std::vector<uint32_t> out;
  bool shifted = false;
  size_t start = 0;
  while (!rest.empty() && start <= rest.size()) {
    auto plus = rest.find('+', start);
    std::string name = Lower(rest.substr(start, plus == std::string::npos ? std::string::npos : plus - start));
    auto m = ModifierKeysym(name);
    if (!m) return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' in '{}' is not a modifier (ctrl, shift, alt, meta)", name, keys));
    if (*m == kShift) shifted = true;
    out.push_back(*m);
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  auto key = NamedKey(last);
  if (!key) return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown key '{}' in '{}'", last, keys));
  if (key->shift && !shifted) out.push_back(kShift);
  out.push_back(key->keysym);
  return out;
}

Error Bad(size_t index, std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("action {}: {}", index, what));
}

class Compiler {
 public:
  explicit Compiler(ScreenSize screen) : screen_(screen) {}

  Status Add(size_t index, const json& a) {
    if (!a.is_object() || !a.contains("type") || !a["type"].is_string()) {
      return Fail(Bad(index, "an action is an object with a \"type\""));
    }
    std::string type = a["type"];
    auto button = Button(index, a);
    if (!button) return Fail(button.error());
    if (type == "move") {
      auto at = Point(index, a, true);
      if (!at) return Fail(at.error());
      Move(*at, true);
    } else if (type == "click") {
      int count = 1;
      if (a.contains("count")) {
        if (!a["count"].is_number_integer() || a["count"].get<int64_t>() < 1 || a["count"].get<int64_t>() > 3) {
          return Fail(Bad(index, "'count' is 1, 2 or 3"));
        }
        count = a["count"].get<int>();
      }
      if (auto s = MaybeMove(index, a); !s) return s;
      if (auto s = NeedPosition(index); !s) return s;
      for (int i = 0; i < count; ++i) {
        Pointer(static_cast<uint8_t>(buttons_ | *button));
        Pointer(static_cast<uint8_t>(buttons_ & ~*button));
        ++out_.clicks;
      }
    } else if (type == "mouse_down" || type == "mouse_up") {
      if (auto s = MaybeMove(index, a); !s) return s;
      if (auto s = NeedPosition(index); !s) return s;
      buttons_ = type == "mouse_down" ? static_cast<uint8_t>(buttons_ | *button) : static_cast<uint8_t>(buttons_ & ~*button);
      Pointer(buttons_);
      if (type == "mouse_down") ++out_.clicks;
    } else if (type == "drag") {
      std::vector<std::pair<int, int>> path;
      if (a.contains("path")) {
        if (!a["path"].is_array() || a["path"].size() < 2 || a["path"].size() > kMaxDragPoints) {
          return Fail(Bad(index, fmt::format("'path' is 2 to {} points [x, y]", kMaxDragPoints)));
        }
        for (const auto& p : a["path"]) {
          auto pt = PairPoint(index, p);
          if (!pt) return Fail(pt.error());
          path.push_back(*pt);
        }
      } else {
        if (!a.contains("from") || !a.contains("to")) return Fail(Bad(index, "a drag needs 'path', or 'from' and 'to'"));
        auto from = PairPoint(index, a["from"]);
        if (!from) return Fail(from.error());
        auto to = PairPoint(index, a["to"]);
        if (!to) return Fail(to.error());
        path = {*from, *to};
      }
      Move(path.front(), false);
      buttons_ = static_cast<uint8_t>(buttons_ | *button);
      Pointer(buttons_);
      ++out_.clicks;
      for (size_t i = 1; i < path.size(); ++i) Move(path[i], false);
      buttons_ = static_cast<uint8_t>(buttons_ & ~*button);
      Pointer(buttons_);
    } else if (type == "scroll") {
      if (auto s = MaybeMove(index, a); !s) return s;
      if (auto s = NeedPosition(index); !s) return s;
      for (const char* axis : {"dy", "dx"}) {
        if (!a.contains(axis)) continue;
        if (!a[axis].is_number_integer() || std::abs(a[axis].get<int64_t>()) > kMaxNotches) {
          return Fail(Bad(index, fmt::format("'{}' is a whole number of notches, -{} to {}", axis, kMaxNotches, kMaxNotches)));
        }
        int n = a[axis].get<int>();
        // Buttons 4/5 (up/down) and 6/7 (left/right) of the X wheel.
        uint8_t wheel = std::string_view(axis) == "dy" ? (n > 0 ? 16 : 8) : (n > 0 ? 64 : 32);
        for (int i = 0; i < std::abs(n); ++i) {
          Pointer(static_cast<uint8_t>(buttons_ | wheel));
          Pointer(buttons_);
        }
      }
    } else if (type == "type") {
      if (!a.contains("text") || !a["text"].is_string()) return Fail(Bad(index, "'text' is a string"));
      std::string text = a["text"];
      typed_ += text.size();
      if (typed_ > kMaxTypedText) {
        return Fail(Bad(index, fmt::format("at most {} characters are typed per request", kMaxTypedText)));
      }
      for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        std::optional<Key> key = c == '\n' ? Key{kReturn, false} : c == '\t' ? Key{kTab, false} : CharKey(c);
        if (!key) {
          return Fail(Bad(index, fmt::format("character {} (byte {}) is not on the guest's keyboard map (en-us: "
                                             "printable ASCII, newline and tab); put it on the clipboard (PUT …/desktop/clipboard) "
                                             "and press ctrl+v instead",
                                             CodePointAt(text, i), i)));
        }
        std::vector<uint32_t> combo;
        if (key->shift) combo.push_back(kShift);
        combo.push_back(key->keysym);
        Press(combo, milliseconds(0));
      }
    } else if (type == "key" || type == "hold_key") {
      if (!a.contains("keys") || !a["keys"].is_string()) return Fail(Bad(index, "'keys' is a string, e.g. \"ctrl+c\""));
      auto combo = ParseKeys(a["keys"].get<std::string>());
      if (!combo) return Fail(Bad(index, combo.error().message));
      milliseconds hold{0};
      if (type == "hold_key") {
        auto ms = Pause(index, a);
        if (!ms) return Fail(ms.error());
        hold = *ms;
      }
      Press(*combo, hold);
    } else if (type == "wait") {
      auto ms = Pause(index, a);
      if (!ms) return Fail(ms.error());
      Then(*ms);
    } else {
      return Fail(Bad(index, fmt::format("unknown type '{}' (move, click, mouse_down, mouse_up, drag, scroll, "
                                         "type, key, hold_key, wait)", type)));
    }
    ++out_.actions;
    return {};
  }

  CompiledInput Take() {
    if (!out_.steps.empty() && out_.steps.back().messages.empty() && out_.steps.back().then.count() == 0) {
      out_.steps.pop_back();
    }
    return std::move(out_);
  }

 private:
  static std::string CodePointAt(const std::string& s, size_t i) {
    auto b = static_cast<unsigned char>(s[i]);
    int len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    uint32_t cp = len == 1 ? b : b & (0x3f >> (len - 1));
    for (int k = 1; k < len; ++k) {
      if (i + k >= s.size()) return fmt::format("0x{:02X}", b);
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    }
    return fmt::format("U+{:04X}", cp);
  }

  Result<uint8_t> Button(size_t index, const json& a) {
    if (!a.contains("button")) return static_cast<uint8_t>(1);
    if (a["button"] == "left") return static_cast<uint8_t>(1);
    if (a["button"] == "middle") return static_cast<uint8_t>(2);
    if (a["button"] == "right") return static_cast<uint8_t>(4);
    return Fail(Bad(index, "'button' is left, middle or right"));
  }

  Result<std::pair<int, int>> Check(size_t index, const json& x, const json& y) {
    if (!x.is_number_integer() || !y.is_number_integer()) return Fail(Bad(index, "x and y are whole pixels"));
    int64_t px = x.get<int64_t>(), py = y.get<int64_t>();
    if (px < 0 || py < 0 || px >= screen_.width || py >= screen_.height) {
      return Fail(Bad(index, fmt::format("({}, {}) is off the {}x{} screen", px, py, screen_.width, screen_.height)));
    }
    return std::pair{static_cast<int>(px), static_cast<int>(py)};
  }

  Result<std::pair<int, int>> Point(size_t index, const json& a, bool required) {
    if (!a.contains("x") && !a.contains("y") && !required) return std::pair{-1, -1};
    if (!a.contains("x") || !a.contains("y")) return Fail(Bad(index, "needs both x and y"));
    return Check(index, a["x"], a["y"]);
  }

  Result<std::pair<int, int>> PairPoint(size_t index, const json& p) {
    if (!p.is_array() || p.size() != 2) return Fail(Bad(index, "a point is [x, y]"));
    return Check(index, p[0], p[1]);
  }

  Status MaybeMove(size_t index, const json& a) {
    auto at = Point(index, a, false);
    if (!at) return Fail(at.error());
    if (at->first >= 0) Move(*at, true);
    return {};
  }

  Status NeedPosition(size_t index) {
    if (x_ < 0) return Fail(Bad(index, "the pointer has no position yet: give x and y"));
    return {};
  }

  Result<milliseconds> Pause(size_t index, const json& a) {
    if (!a.contains("ms") || !a["ms"].is_number_integer() || a["ms"].get<int64_t>() < 0 ||
        a["ms"].get<int64_t>() > kMaxPause.count()) {
      return Fail(Bad(index, fmt::format("'ms' is 0 to {}", kMaxPause.count())));
    }
    milliseconds ms(a["ms"].get<int64_t>());
    paused_ += ms;
    if (paused_ > kMaxPauses) {
      return Fail(Bad(index, fmt::format("a request pauses at most {} ms in all", kMaxPauses.count())));
    }
    return ms;
  }

  // The current step (a new one after a pause).
  InputStep& Current() {
    if (out_.steps.empty() || out_.steps.back().then.count() > 0) out_.steps.emplace_back();
    return out_.steps.back();
  }

  void Move(std::pair<int, int> at, bool coalesce) {
    auto& step = Current();
    if (coalesce && last_was_move_ && step.messages.size() >= 6) {
      // A move right after a move: only the last one matters.
      step.messages.resize(step.messages.size() - 6);
    }
    x_ = at.first;
    y_ = at.second;
    step.messages += PointerEventMessage(buttons_, x_, y_);
    last_was_move_ = coalesce;
  }

  void Pointer(uint8_t buttons) {
    Current().messages += PointerEventMessage(buttons, x_, y_);
    last_was_move_ = false;
  }

  void Press(const std::vector<uint32_t>& combo, milliseconds hold) {
    for (uint32_t k : combo) Current().messages += KeyEventMessage(k, true);
    ++out_.keys;
    if (hold.count() > 0) Then(hold);
    for (auto it = combo.rbegin(); it != combo.rend(); ++it) Current().messages += KeyEventMessage(*it, false);
    last_was_move_ = false;
  }

  void Then(milliseconds ms) {
    Current().then += ms;
    last_was_move_ = false;
  }

  ScreenSize screen_;
  CompiledInput out_;
  int x_ = -1;
  int y_ = -1;
  uint8_t buttons_ = 0;
  bool last_was_move_ = false;
  size_t typed_ = 0;
  milliseconds paused_{0};
};

}  // namespace

std::string KeyEventMessage(uint32_t keysym, bool down) {
  std::string m(8, '\0');
  m[0] = 4;
  m[1] = down ? 1 : 0;
  m[4] = static_cast<char>(keysym >> 24);
  m[5] = static_cast<char>((keysym >> 16) & 0xff);
  m[6] = static_cast<char>((keysym >> 8) & 0xff);
  m[7] = static_cast<char>(keysym & 0xff);
  return m;
}

std::string PointerEventMessage(uint8_t buttons, int x, int y) {
  std::string m(6, '\0');
  m[0] = 5;
  m[1] = static_cast<char>(buttons);
  m[2] = static_cast<char>((x >> 8) & 0xff);
  m[3] = static_cast<char>(x & 0xff);
  m[4] = static_cast<char>((y >> 8) & 0xff);
  m[5] = static_cast<char>(y & 0xff);
  return m;
}

Result<CompiledInput> CompileActions(const json& request, ScreenSize screen) {
  const json* list = nullptr;
  json single;
  if (request.is_object() && request.contains("actions")) {
    if (!request["actions"].is_array() || request["actions"].empty() || request["actions"].size() > kMaxActions) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("'actions' is a list of 1 to {} actions", kMaxActions));
    }
    list = &request["actions"];
  } else if (request.is_object()) {
    single = json::array({request});
    list = &single;
  } else {
    return Fail(ErrorCode::kInvalidArgument, "the body is an action or {\"actions\": [...]}");
  }
  Compiler compiler(screen);
  for (size_t i = 0; i < list->size(); ++i) {
    if (auto s = compiler.Add(i, (*list)[i]); !s) return Fail(s.error());
  }
  return compiler.Take();
}

}  // namespace berth::desktop
