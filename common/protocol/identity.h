// The wire type of the agent's identity call, shared by berth-agent and berthd. Pure.
//
//   POST /v1/identity  IdentityRequest -> 200 {"applied": [...]}
//
// berthd's, once, to a machine resumed from another machine's memory (a fork): until then the
// guest is the parent's in everything memory holds. The agent applies each field that is set,
// then answers, then takes the new token: the request's own (the parent's) token is refused
// from that answer on. Fields left out are not changed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::protocol {

struct IdentityRequest {
  IdentityRequest() = default;
  std::string token;       // required: the agent's token from now on (16 to 512 bytes, no spaces)
  std::string hostname;    // a DNS label, 1-63 of [a-z0-9-], not starting or ending with '-'
  std::string machine_id;  // 32 lowercase hex digits (machine-id(5)), not all zero
  std::string mac;         // the NIC's new address: "52:54:00:xx:xx:xx"-style, unicast
  bool regenerate_ssh_host_keys = false;  // new keys where the guest has any
  // 64 lowercase hex digits (32 random bytes, the host's): mixed into the guest kernel's pool,
  // which is then reseeded, so two forks of one memory never draw the same random bytes (the
  // generation ID device asks the same of a kernel with its driver; this does not depend on it).
  std::string entropy;
};

nlohmann::json ToJson(const IdentityRequest& request);
// Validates every field: a bad one is invalid_argument naming it (nothing is applied).
Result<IdentityRequest> IdentityRequestFromJson(const nlohmann::json& json);

// What one call changed, in order: "hostname", "machine_id", "mac", "ssh_host_keys", "entropy",
// "token".
struct IdentityApplied {
  IdentityApplied() = default;
  std::vector<std::string> applied;
};

nlohmann::json ToJson(const IdentityApplied& applied);
Result<IdentityApplied> IdentityAppliedFromJson(const nlohmann::json& json);

}  // namespace berth::protocol
