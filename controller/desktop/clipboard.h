// The guest's clipboard for the API (GET/PUT …/desktop/clipboard): the desktop image's own tool
// (/usr/local/lib/berth/clipboard get|set, images/recipes/desktop; DesktopConfig's
// clipboard_tool) run by the agent as its
// default user, the desktop's. berthd speaks no X and needs no channel into the guest beyond
// the agent's exec; what the tool prints is the guest's words: bounded, checked to be UTF-8.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "common/deadline.h"
#include "common/error.h"
#include "common/protocol/exec.h"
#include "controller/agent_client/agent_link.h"
#include "controller/desktop/desktop_service.h"

namespace berth::desktop {

// The most text the clipboard carries either way (a long document's paste).
inline constexpr size_t kMaxClipboard = 1 << 20;
// One call in total: connecting to the agent, the tool, the answer.
inline constexpr std::chrono::seconds kClipboardDeadline{20};

// The agent's exec requests (wait mode, output bounded just past kMaxClipboard).
// `tool`: the guest's path of the tool (DesktopConfig::clipboard_tool).
protocol::ExecRequest ClipboardGetRequest(std::string_view tool);
protocol::ExecRequest ClipboardSetRequest(std::string_view tool, std::string text);

// What the tool's run means. Exit 0: the text (get) or done (set). The tool missing (126,
// 127: not the desktop image) is failed_precondition; exit 3 (no X display yet) and any other
// failure unavailable, with the tool's last words; output past kMaxClipboard too_large; text
// that is not UTF-8 (the guest's bytes) unavailable.
Result<std::string> ClipboardTextOf(const protocol::ExecResult& ran);
Status ClipboardSetOf(const protocol::ExecResult& ran);

// Through the agent at `link`. Blocking: call them off I/O threads.
Result<std::string> ReadClipboard(const agent_client::AgentLink& link, std::string_view tool, Deadline deadline);
// `text` at most kMaxClipboard bytes of UTF-8 (invalid_argument / too_large before anything
// is sent).
Status WriteClipboard(const agent_client::AgentLink& link, std::string_view tool, std::string text,
                      Deadline deadline);

// --- the API's calls (the routes and berthd's /mcp alike), with the person's control applied ---

// Whether `by` (a key id) may set the clipboard now: while a person holds control only they
// may (their key, or a control link made with it); locked (423) for anyone else.
Status MayWriteClipboard(const DesktopControl& control, const std::string& workspace_id, const std::string& by);

// Whether `by` (a key id) may read the clipboard now: anyone with the workspace, except during
// a private takeover (the person may have copied a password), when only its holder may (423
// for anyone else, like screenshots).
Status MayReadClipboard(const DesktopControl& control, const std::string& workspace_id, const std::string& by);

// The clipboard's text for `by` (MayReadClipboard, checked again at the last moment). Blocking.
Result<std::string> GetGuestClipboard(DesktopService& desk, const agent_client::AgentLink& link,
                                      const std::string& workspace_id, const std::string& by, Deadline deadline);
// Puts `text` on it as `by` (MayWriteClipboard, checked again at the last moment) and records
// desktop_clipboard_set: who and how many bytes, never the text (a person's lease is renewed
// by the ctrl+v that follows, as all their input). The bytes written. Blocking.
Result<size_t> SetGuestClipboard(DesktopService& desk, const agent_client::AgentLink& link,
                                 const std::string& workspace_id, const std::string& by, std::string text,
                                 Deadline deadline);

}  // namespace berth::desktop
