// The agent's request target for one of berthd's workspace routes (DESIGN.md, "The path of a
// request"): "/v1/workspaces/{ws}/<tail>" becomes "/v1/<tail>".
//
// Built from what the router matched, never cut from the raw target: routing and the scope
// check work on the decoded path, so the agent must be sent that same path. (Cut from the raw
// target, "GET /v1/workspaces/demo%2Ffiles/exec/ws" passed a read key's check as a file read
// and reached the agent as /v1/exec/ws.) The router already refuses encoded '/' and '\' in
// `{ws}` and in literal segments (common/http/router.h), so the decoded tail has the segments
// berthd routed on; it is re-encoded here, '/' kept as the separator.
#pragma once

#include <string>
#include <string_view>

#include "common/error.h"

namespace berth::agent_client {

// `decoded_path`: the request's decoded path (http::Exchange::path()); `ws`: the matched,
// decoded {ws} parameter; `raw_query`: the query as the client sent it, without '?'. The query
// is passed through untouched: it selects neither a route nor a scope, http::Exchange::Prepare
// has parsed it, and the agent parses it the same way (so '+' and repeated keys keep their
// meaning). An internal error when `decoded_path` is not under "/v1/workspaces/{ws}/". Pure.
Result<std::string> AgentTarget(std::string_view decoded_path, std::string_view ws,
                                std::string_view raw_query);

}  // namespace berth::agent_client
