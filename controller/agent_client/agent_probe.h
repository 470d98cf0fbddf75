// The questions berthd asks an agent by itself, with the boot's token: GET /v1/activity proves
// the agent is up and holds this boot's token (a stale agent from an earlier boot answers 401)
// and says what keeps the guest awake; POST /v1/sync has the guest write what it holds in its
// page cache to its disks, before berthd checkpoints them. Asynchronous, with ONE deadline for the
// whole exchange (connect, request, header, body): a guest that drips its answer a byte at a
// time costs its own workspace the deadline and nothing more. The guest is not trusted: the
// answer is bounded (kMaxAnswer, a header limit) and must be a JSON object.
#pragma once

#include <chrono>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/protocol/diff.h"
#include "common/protocol/exec.h"
#include "common/protocol/identity.h"
#include "controller/agent_client/agent_link.h"

namespace berth::agent_client {

// An activity answer is a few hundred bytes; leases are capped by the agent. Anything past this
// is a hostile or broken guest.
inline constexpr size_t kMaxActivityAnswer = 256 * 1024;

// Runs on the calling coroutine's executor. unavailable when the agent cannot be reached or
// answers with an error, deadline_exceeded when `deadline` passed first.
boost::asio::awaitable<Result<nlohmann::json>> ProbeActivity(const AgentLink& link,
                                                             std::chrono::milliseconds deadline);

// The same for POST /v1/sync: answers {"synced": true, "took_ms": N} once the guest's sync(2)
// returned. An agent older than the call answers 404 (unavailable here).
boost::asio::awaitable<Result<nlohmann::json>> SyncGuest(const AgentLink& link, std::chrono::milliseconds deadline);

// POST /v1/identity with the guest's current token (a fork's, its parent's): answers
// {"applied": [...]} once the guest has taken `request`'s identity; from then on only
// request.token is accepted. An agent older than the call answers 404 (unavailable here).
boost::asio::awaitable<Result<nlohmann::json>> GiveIdentity(const AgentLink& link, protocol::IdentityRequest request,
                                                            std::chrono::milliseconds deadline);

// POST /v1/exec in wait mode (a template's build, templates.cc): answers the ExecResult's JSON
// once the command ended (or its timeout_ms killed it). Keep request.max_output_bytes small
// enough for both streams to fit in kMaxActivityAnswer.
boost::asio::awaitable<Result<nlohmann::json>> RunInGuest(const AgentLink& link, protocol::ExecRequest request,
                                                          std::chrono::milliseconds deadline);

// POST /v1/diff while berthd has a checkpoint's disks plugged in (controller/workspace/diff.cc):
// answers the DiffResult's JSON (unchecked: DiffResultFromJson checks it) of at most
// kMaxDiffAnswer bytes.
inline constexpr size_t kMaxDiffAnswer = 16 * 1024 * 1024;
boost::asio::awaitable<Result<nlohmann::json>> DiffInGuest(const AgentLink& link, protocol::DiffRequest request,
                                                           std::chrono::milliseconds deadline);

}  // namespace berth::agent_client
