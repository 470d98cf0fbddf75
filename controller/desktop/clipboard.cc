#include "controller/desktop/clipboard.h"

#include <fmt/format.h>

#include "common/client/api_client.h"

namespace berth::desktop {
namespace {

protocol::ExecRequest ToolRequest(std::string_view tool, std::string_view verb) {
  protocol::ExecRequest r;
  r.cmd = std::vector<std::string>{std::string(tool), std::string(verb)};
  r.timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(kClipboardDeadline).count() / 2;
  r.max_output_bytes = kMaxClipboard + 1;
  r.tag = "berth-clipboard";
  return r;
}

// The tool's failure as an error: its exit and the end of what it said (bounded, printable).
Status Failed(const protocol::ExecResult& ran) {
  int code = ran.exit.exit_code.value_or(-1);
  if (code == 126 || code == 127) {
    return Fail(ErrorCode::kFailedPrecondition,
                "this workspace has no desktop clipboard (its image is not the desktop image)");
  }
  std::string said = ran.stderr_data.substr(ran.stderr_data.size() > 300 ? ran.stderr_data.size() - 300 : 0);
  // Whole characters only, at both ends of the cut.
  size_t lead = 0;
  while (lead < said.size() && (static_cast<unsigned char>(said[lead]) & 0xc0) == 0x80) ++lead;
  said.erase(0, lead);
  said.resize(protocol::CompleteUtf8Prefix(said));
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  if (code == 3) return Fail(ErrorCode::kUnavailable, "the desktop is not up yet (no X display): try again shortly");
  if (ran.exit.timed_out) return Fail(ErrorCode::kUnavailable, "the guest's clipboard did not answer in time");
  return Fail(ErrorCode::kUnavailable,
              fmt::format("the guest's clipboard tool failed (exit {}){}{}", code, said.empty() ? "" : ": ", said));
}

}  // namespace

protocol::ExecRequest ClipboardGetRequest(std::string_view tool) { return ToolRequest(tool, "get"); }

protocol::ExecRequest ClipboardSetRequest(std::string_view tool, std::string text) {
  auto r = ToolRequest(tool, "set");
  r.stdin_data = std::move(text);
  return r;
}

Result<std::string> ClipboardTextOf(const protocol::ExecResult& ran) {
  if (ran.exit.exit_code != 0) return Fail(Failed(ran).error());
  if (ran.truncated || ran.stdout_data.size() > kMaxClipboard) {
    return Fail(ErrorCode::kTooLarge, fmt::format("the guest's clipboard holds more than {} bytes", kMaxClipboard));
  }
  if (!protocol::IsValidUtf8(ran.stdout_data)) {
    return Fail(ErrorCode::kUnavailable, "the guest's clipboard holds what is not UTF-8 text");
  }
  return ran.stdout_data;
}

Status ClipboardSetOf(const protocol::ExecResult& ran) {
  if (ran.exit.exit_code != 0) return Failed(ran);
  return {};
}

namespace {

Result<protocol::ExecResult> Run(const agent_client::AgentLink& link, const protocol::ExecRequest& request,
                                 Deadline deadline) {
  client::ClientOptions options;
  options.deadline = deadline;
  options.connect_timeout = std::chrono::seconds(5);
  // The answer: the clipboard (at most kMaxClipboard + 1 bytes, up to 6x as JSON escapes) and a
  // few words of stderr; a guest that sends more (stderr is bounded the same) gets an error.
  options.max_response_bytes = 8 * kMaxClipboard;
  client::ApiClient api(link.endpoint, link.token, options);
  auto answer = api.Json(http::bhttp::verb::post, "/v1/exec", request.ToJson());
  if (!answer) return Fail(answer.error());
  auto ran = protocol::ExecResult::FromJson(*answer);
  if (!ran) return Fail(ErrorCode::kUnavailable, "the agent's answer to the clipboard tool was malformed");
  return ran;
}

}  // namespace

Result<std::string> ReadClipboard(const agent_client::AgentLink& link, std::string_view tool, Deadline deadline) {
  auto ran = Run(link, ClipboardGetRequest(tool), deadline);
  if (!ran) return Fail(ran.error());
  return ClipboardTextOf(*ran);
}

Status WriteClipboard(const agent_client::AgentLink& link, std::string_view tool, std::string text,
                      Deadline deadline) {
  if (text.size() > kMaxClipboard) {
    return Fail(ErrorCode::kTooLarge, fmt::format("the clipboard takes at most {} bytes", kMaxClipboard));
  }
  if (!protocol::IsValidUtf8(text)) return Fail(ErrorCode::kInvalidArgument, "the clipboard's text must be UTF-8");
  auto ran = Run(link, ClipboardSetRequest(tool, std::move(text)), deadline);
  if (!ran) return Fail(ran.error());
  return ClipboardSetOf(*ran);
}

Status MayWriteClipboard(const DesktopControl& control, const std::string& workspace_id, const std::string& by) {
  auto state = control.Get(workspace_id);
  if (state.holder == Holder::kHuman && state.by == by) return {};
  return control.CheckAgentInput(workspace_id);
}

Status MayReadClipboard(const DesktopControl& control, const std::string& workspace_id, const std::string& by) {
  auto state = control.Get(workspace_id);
  if (state.holder == Holder::kHuman && state.by == by) return {};
  return control.CheckAgentScreen(workspace_id);
}

Result<std::string> GetGuestClipboard(DesktopService& desk, const agent_client::AgentLink& link,
                                      const std::string& workspace_id, const std::string& by, Deadline deadline) {
  if (auto ok = MayReadClipboard(desk.control(), workspace_id, by); !ok) return Fail(ok.error());
  return ReadClipboard(link, desk.config().clipboard_tool, std::min(deadline, DeadlineIn(kClipboardDeadline)));
}

Result<size_t> SetGuestClipboard(DesktopService& desk, const agent_client::AgentLink& link,
                                 const std::string& workspace_id, const std::string& by, std::string text,
                                 Deadline deadline) {
  auto& control = desk.control();
  if (auto ok = MayWriteClipboard(control, workspace_id, by); !ok) return Fail(ok.error());
  size_t bytes = text.size();
  if (auto done = WriteClipboard(link, desk.config().clipboard_tool, std::move(text),
                                 std::min(deadline, DeadlineIn(kClipboardDeadline)));
      !done) {
    return Fail(done.error());
  }
  auto state = control.Get(workspace_id);
  bool person = state.holder == Holder::kHuman && state.by == by;
  ControlEvent set{workspace_id, "desktop_clipboard_set",
                   fmt::format("{} put {} byte(s) on the clipboard", person ? "the person holding control" : "the agent", bytes)};
  set.data = {{"by", by}, {"bytes", bytes}, {"holder", person ? "human" : "agent"}};
  desk.Record({std::move(set)});
  return bytes;
}

}  // namespace berth::desktop
