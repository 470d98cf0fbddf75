// The agent's eyes and hands on a desktop workspace's screen (docs/api.md, "Desktop"):
// desktop_screenshot (an image content block, with the screen's size so a point on a scaled
// image maps back), desktop_act (computer-use actions, refused while a person holds the
// desktop) and desktop_control (who holds it; wait for a person to hand back).
#include <cmath>

#include <fmt/format.h>

#include "common/protocol/exec.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

// How long desktop_control may wait for a hand-back (berthd's cap is an hour).
constexpr long long kMaxWaitSeconds = 3600;
// The most of the clipboard's text a tool answer shows (berthd's cap is 1 MiB).
constexpr size_t kMaxClipboardShown = 64 * 1024;

Result<ToolResult> Screenshot(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  double scale = args.contains("scale") ? args["scale"].get<double>() : 1.0;
  std::string format = args.value("format", "png");
  auto shot = ctx.backend().DesktopScreenshot(*ws, format, scale, ToolContext::CallDeadline());
  if (!shot) return Fail(shot.error());
  std::string text = fmt::format("The screen of {} is {}x{}.", *ws, shot->screen_width, shot->screen_height);
  if (shot->image_width != shot->screen_width) {
    text += fmt::format(" This image is {}x{}: a point (x, y) on it is (x * {:.4g}, y * {:.4g}) on the screen, "
                        "which is what desktop_act takes.",
                        shot->image_width, shot->image_height,
                        static_cast<double>(shot->screen_width) / shot->image_width,
                        static_cast<double>(shot->screen_height) / shot->image_height);
  } else {
    text += " Its pixels are the coordinates desktop_act takes.";
  }
  json structured = {{"screen", {{"width", shot->screen_width}, {"height", shot->screen_height}}},
                     {"image", {{"width", shot->image_width}, {"height", shot->image_height}}}};
  ToolResult result = ToolResult::Text(std::move(text), std::move(structured));
  result.images.push_back(ToolResult::Image{std::move(shot->bytes), shot->mime});
  return result;
}

Result<ToolResult> Act(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  json request = {{"actions", args["actions"]}};
  auto done = ctx.backend().DesktopActions(*ws, request, ToolContext::CallDeadline());
  if (!done) return Fail(done.error());
  const json& screen = (*done)["screen"];
  return ToolResult::Text(fmt::format("Done: {} action(s) on the {}x{} screen of {}. Take a screenshot to see "
                                      "the result.",
                                      done->value("done", 0), screen.value("width", 0), screen.value("height", 0), *ws),
                          *done);
}

std::string DescribeControl(const std::string& ws, const json& state) {
  if (state.value("holder", "agent") == "agent") {
    return fmt::format("You (the agent) hold the desktop of {}: desktop_act works.", ws);
  }
  std::string text = fmt::format("A person ({}) holds the desktop of {}", state.value("by", "?"), ws);
  if (state.contains("reason") && state["reason"].is_string() && !state["reason"].get<std::string>().empty()) {
    text += fmt::format(" ({})", state["reason"].get<std::string>());
  }
  text += state.value("private", false) ? ", privately: screenshots are refused too" : "";
  text += ". desktop_act is refused until they hand back; call desktop_control with wait_for_release to wait.";
  return text;
}

Result<ToolResult> Control(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  std::optional<std::chrono::seconds> wait;
  if (args.value("wait_for_release", false)) wait = std::chrono::seconds(args.value("timeout_s", 300LL));
  auto deadline = wait ? ToolContext::CallDeadline(*wait + std::chrono::seconds(30)) : ToolContext::CallDeadline();
  auto state = ctx.backend().DesktopControl(*ws, wait, deadline);
  if (!state) return Fail(state.error());
  return ToolResult::Text(DescribeControl(*ws, *state), *state);
}

Result<ToolResult> Clipboard(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  std::optional<std::string> text;
  if (args.contains("text")) text = args["text"].get<std::string>();
  auto out = ctx.backend().DesktopClipboard(*ws, text, ToolContext::CallDeadline());
  if (!out) return Fail(out.error());
  if (text) {
    return ToolResult::Text(fmt::format("Put {} byte(s) on the clipboard of {}: press ctrl+v with desktop_act to "
                                        "paste it where the focus is.",
                                        out->value("bytes", 0), *ws),
                            *out);
  }
  std::string got = out->value("text", "");
  if (got.empty()) return ToolResult::Text(fmt::format("The clipboard of {} holds no text.", *ws), *out);
  size_t all = got.size();
  json structured = {{"bytes", all}, {"truncated", all > kMaxClipboardShown}};
  if (all > kMaxClipboardShown) got.resize(protocol::CompleteUtf8Prefix(std::string_view(got).substr(0, kMaxClipboardShown)));
  std::string shown = fmt::format("The clipboard of {} holds {} byte(s){}:\n{}", *ws, all,
                                  all > got.size() ? fmt::format(" (the first {} shown)", got.size()) : "", got);
  structured["text"] = std::move(got);
  return ToolResult::Text(std::move(shown), std::move(structured));
}

// request_human: the person's link first in the text (the agent passes it on), then what
// happened. The note and the reason are text, never instructions.
Result<ToolResult> RequestHuman(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  std::string reason = args["reason"].get<std::string>();
  std::chrono::seconds timeout(args.value("timeout_s", 600LL));
  auto state = ctx.backend().DesktopRequestHuman(*ws, reason, timeout,
                                                 ToolContext::CallDeadline(timeout + std::chrono::seconds(30)));
  if (!state) return Fail(state.error());
  std::string url = state->value("url", "");
  std::string text = fmt::format("Asked a person to take over the desktop of {} ({}); its page: {}\n", *ws, reason, url);
  if (state->value("answered", false)) {
    const json& back = (*state)["handback"];
    std::string note = back.is_object() ? back.value("note", "") : "";
    text += fmt::format("They took over and handed back ({}). ", back.is_object() ? back.value("cause", "released") : "released");
    text += note.empty() ? "They left no note." : fmt::format("Their note: \"{}\"", note);
    text += " Take a screenshot to see the screen now.";
  } else if (state->value("holder", "agent") == "human") {
    text += fmt::format("A person ({}) holds the desktop now and has not handed back yet: call desktop_control "
                        "with wait_for_release to wait longer.",
                        state->value("by", "?"));
  } else {
    text += fmt::format("Nobody took over within {} s; the request was withdrawn. Give the person the page's "
                        "link and call request_human again.",
                        timeout.count());
  }
  return ToolResult::Text(std::move(text), *state);
}

}  // namespace

std::vector<Tool> DesktopTools() {
  std::vector<Tool> tools;
  json shot = json::object();
  shot["workspace"] = schema::WorkspaceArg();
  shot["scale"] = {{"type", "number"},
                   {"minimum", 0.05},
                   {"maximum", 1},
                   {"description", "Scale the image down (0.05-1, default 1): 0.5 is a quarter of the pixels."}};
  json format = schema::String("png (default, exact) or jpeg (smaller).");
  format["enum"] = json::array({"png", "jpeg"});
  shot["format"] = format;
  tools.push_back(Tool{"desktop_screenshot", "Screenshot the desktop",
                       "See a desktop workspace's screen (its Chrome and whatever else is on it) as an "
                       "image, with the screen's size; coordinates for desktop_act are the screen's.",
                       schema::Object(shot), ReadOnly(), Screenshot});

  json act = json::object();
  act["workspace"] = schema::WorkspaceArg();
  act["actions"] = {
      {"type", "array"},
      {"minItems", 1},
      {"maxItems", 200},
      {"items", {{"type", "object"}}},
      {"description",
       "Actions in order, each {\"type\": ...}: move {x, y}; click {x?, y?, button? (left|middle|right), "
       "count? (2: double, 3: triple)}; mouse_down / mouse_up {x?, y?, button?}; drag {path: [[x, y], ...]} "
       "or {from: [x, y], to: [x, y]}; scroll {x?, y?, dy?, dx?} (wheel notches, dy > 0 down); type {text} "
       "(printable ASCII, newline, tab); key {keys} (\"Return\", \"ctrl+c\", \"ctrl+shift+t\", \"alt+F4\"); "
       "hold_key {keys, ms}; wait {ms}. x and y are screen pixels."}};
  tools.push_back(Tool{"desktop_act", "Use the desktop's mouse and keyboard",
                       "Click, type, press keys, scroll and drag on a desktop workspace's screen. "
                       "Refused while a person has taken over the desktop (desktop_control says who).",
                       schema::Object(act, {"actions"}), Mutating(false, false), Act});

  json control = json::object();
  control["workspace"] = schema::WorkspaceArg();
  control["wait_for_release"] = schema::Boolean(
      "Wait until the person who took over hands the desktop back (or timeout_s passes).");
  control["timeout_s"] = schema::Integer("How long to wait, in seconds (default 300).", 1, kMaxWaitSeconds);
  tools.push_back(Tool{"desktop_control", "Who holds the desktop",
                       "Whether you (the agent) or a person holds a desktop workspace's mouse and "
                       "keyboard, and why; optionally wait for the person to hand back.",
                       schema::Object(control), ReadOnly(), Control});

  json clip = json::object();
  clip["workspace"] = schema::WorkspaceArg();
  clip["text"] = schema::String("Text to put on the clipboard (any Unicode, at most 1 MiB); leave it out to read the "
                                "clipboard instead.");
  tools.push_back(Tool{"desktop_clipboard", "Read or set the desktop's clipboard",
                       "Read the clipboard of a desktop workspace (what was copied in its Chrome), or put text on it "
                       "and then paste it with desktop_act's ctrl+v: the way to enter text that typing cannot "
                       "(non-ASCII, long text). Setting it is refused while a person holds the desktop; reading, "
                       "during a private takeover.",
                       schema::Object(clip), Mutating(false, true), Clipboard});

  json human = json::object();
  human["workspace"] = schema::WorkspaceArg();
  human["reason"] = schema::String("What you need the person to do (a login, a captcha, a payment), shown to them "
                                   "on the desktop page; at most 500 bytes.");
  human["reason"]["minLength"] = 1;
  human["reason"]["maxLength"] = 500;
  human["timeout_s"] = schema::Integer("How long to wait for them to take over and hand back, in seconds "
                                       "(default 600).",
                                       1, kMaxWaitSeconds);
  tools.push_back(Tool{"request_human", "Ask a person to take over the desktop",
                       "When you need a person (a login, a captcha, a payment page): shows your reason on the "
                       "workspace's desktop page and waits until a person has taken over and handed back, "
                       "returning the page's link, their note and whether they came.",
                       schema::Object(human, {"reason"}), Mutating(false, false), RequestHuman});
  return tools;
}

}  // namespace berth::mcp
