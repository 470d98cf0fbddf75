// `berth desktop screenshot|act|control|clipboard WS`: the agent's eyes and hands on a desktop
// workspace's screen from a shell (docs/api.md, "Desktop"): the screen to a file, computer-use
// actions as JSON, who holds the desktop (waiting for a person to hand back), and the guest's
// clipboard.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/context.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/deadline.h"
#include "common/json.h"

namespace berth::cli {
namespace {

struct DesktopOptions {
  std::string workspace;
  std::string output;
  std::string format = "png";
  double scale = 1.0;
  std::string actions;
  int wait = -1;  // seconds; -1: do not wait
  std::optional<std::string> set;  // clipboard: the text to put there ("-": stdin)
};

Result<int> Screenshot(Context& ctx, const DesktopOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto shot = berth->DesktopScreenshot(o.workspace, o.format, o.scale, DeadlineIn(std::chrono::seconds(120)));
  if (!shot) return Fail(shot.error());
  std::string path = o.output.empty() ? fmt::format("screenshot.{}", o.format == "jpeg" ? "jpg" : "png") : o.output;
  if (path == "-") {
    std::fwrite(shot->bytes.data(), 1, shot->bytes.size(), stdout);
    std::fflush(stdout);
    return kExitOk;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(shot->bytes.data(), static_cast<std::streamsize>(shot->bytes.size()));
  out.close();
  if (!out) return Fail(ErrorCode::kInternal, fmt::format("cannot write {}", path));
  if (ctx.json()) {
    ctx.PrintJson({{"file", path},
                   {"screen", {{"width", shot->screen_width}, {"height", shot->screen_height}}},
                   {"image", {{"width", shot->image_width}, {"height", shot->image_height}}}});
  } else {
    ctx.out() << fmt::format("{}: {}x{} of the {}x{} screen\n", path, shot->image_width, shot->image_height,
                             shot->screen_width, shot->screen_height);
  }
  return kExitOk;
}

Result<int> Act(Context& ctx, const DesktopOptions& o) {
  std::string text = o.actions;
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  auto parsed = ParseJson(text);
  if (!parsed) return Fail(ErrorCode::kInvalidArgument, fmt::format("actions: {}", parsed.error().message));
  nlohmann::json request = parsed->is_array() ? nlohmann::json{{"actions", *parsed}} : *parsed;
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto done = berth->DesktopActions(o.workspace, request, DeadlineIn(std::chrono::seconds(120)));
  if (!done) return Fail(done.error());
  if (ctx.json()) {
    ctx.PrintJson(*done);
  } else {
    ctx.out() << fmt::format("done: {} action(s)\n", done->value("done", 0));
  }
  return kExitOk;
}

Result<int> Control(Context& ctx, const DesktopOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  std::optional<std::chrono::seconds> wait;
  if (o.wait >= 0) wait = std::chrono::seconds(o.wait);
  auto state = berth->DesktopControl(o.workspace, wait, DeadlineIn(std::chrono::seconds(std::max(o.wait, 0) + 60)));
  if (!state) return Fail(state.error());
  if (ctx.json()) {
    ctx.PrintJson(*state);
    return kExitOk;
  }
  if (state->value("holder", "agent") == "agent") {
    ctx.out() << "holder: agent\n";
  } else {
    ctx.out() << fmt::format("holder: a person ({}){}{}\n", state->value("by", "?"),
                             state->value("private", false) ? ", private" : "",
                             state->value("reason", std::string()).empty()
                                 ? ""
                                 : fmt::format(": {}", state->value("reason", std::string())));
  }
  return kExitOk;
}

Result<int> Clipboard(Context& ctx, const DesktopOptions& o) {
  std::optional<std::string> text = o.set;
  if (text && *text == "-") text = std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto out = berth->DesktopClipboard(o.workspace, text, DeadlineIn(std::chrono::seconds(60)));
  if (!out) return Fail(out.error());
  if (ctx.json()) {
    ctx.PrintJson(*out);
  } else if (text) {
    ctx.out() << fmt::format("put {} byte(s) on the clipboard\n", out->value("bytes", 0));
  } else {
    // The text as it is, for pipes: nothing added.
    ctx.out() << out->value("text", std::string());
  }
  return kExitOk;
}

}  // namespace

void AddDesktopCommands(Builder& b) {
  auto o = std::make_shared<DesktopOptions>();
  auto* group = b.Group("desktop", "a desktop workspace's screen: screenshot, actions, who holds it, clipboard");
  auto* shot = b.Add("screenshot", "save the screen as PNG or JPEG",
                     [o](Context& ctx) { return Screenshot(ctx, *o); }, group);
  shot->add_option("workspace", o->workspace, "workspace id or name")->required();
  shot->add_option("-o,--output", o->output, "the file (default screenshot.png or .jpg; - for stdout)");
  shot->add_option("--format", o->format, "png or jpeg")->check(CLI::IsMember({"png", "jpeg"}));
  shot->add_option("--scale", o->scale, "scale the image down, 0.05 to 1")->check(CLI::Range(0.05, 1.0));
  b.AddJsonFlag(shot);
  auto* act = b.Add("act", "click, type, press keys, scroll, drag (JSON actions, docs/api.md)",
                    [o](Context& ctx) { return Act(ctx, *o); }, group);
  act->add_option("workspace", o->workspace, "workspace id or name")->required();
  act->add_option("actions", o->actions,
                  "an action or a list of them, as JSON ('[{\"type\":\"click\",\"x\":10,\"y\":20}]'); - reads stdin")
      ->required();
  b.AddJsonFlag(act);
  auto* control = b.Add("control", "who holds the desktop: the agent, or a person who took over",
                        [o](Context& ctx) { return Control(ctx, *o); }, group);
  control->add_option("workspace", o->workspace, "workspace id or name")->required();
  control->add_option("--wait", o->wait, "wait up to this many seconds for a person to hand back")
      ->check(CLI::Range(0, 3600));
  b.AddJsonFlag(control);
  auto* clip = b.Add("clipboard", "print the guest's clipboard, or put text on it (--set)",
                     [o](Context& ctx) { return Clipboard(ctx, *o); }, group);
  clip->add_option("workspace", o->workspace, "workspace id or name")->required();
  clip->add_option("--set", o->set, "put this text on the clipboard (- reads stdin); then paste with "
                                    "`berth desktop act WS '{\"type\":\"key\",\"keys\":\"ctrl+v\"}'`");
  b.AddJsonFlag(clip);
}

}  // namespace berth::cli
