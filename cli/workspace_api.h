// berthd's workspace routes as the commands use them: get, list (all pages), wait for a state,
// and "make sure it runs" before a stream opens. Blocking, on the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/context.h"

namespace berth::cli {

// How long `--wait` waits unless told otherwise: a cold boot under TCG takes a minute or two.
inline constexpr int64_t kDefaultWaitSeconds = 300;

Result<nlohmann::json> GetWorkspace(Context& ctx, std::string_view ws);

struct ListFilter {
  std::string state;                // "" for any
  std::vector<std::string> labels;  // "K=V", all must match
};
// Every workspace (following `next` through the pages), in creation order.
Result<std::vector<nlohmann::json>> ListWorkspaces(Context& ctx, const ListFilter& filter);

// POST …/wait: returns the workspace once it is in `state`. failed_precondition when it lands
// in error or a state it cannot leave by itself, deadline_exceeded after `timeout_s`.
Result<nlohmann::json> WaitForState(Context& ctx, std::string_view ws, std::string_view state,
                                    int64_t timeout_s);

// Before an exec, a session, a copy or a tunnel: a booting workspace is waited for, a stopped
// or hibernated one started (unless its auto_start is off: failed_precondition), with a note
// on stderr. Returns the running workspace.
Result<nlohmann::json> EnsureRunning(Context& ctx, std::string_view ws);

// A short human line for an action's result: "api-server (ws_…): stopping".
std::string StateLine(const nlohmann::json& ws);

}  // namespace berth::cli
