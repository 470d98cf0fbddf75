// A fork's identity, applied inside the guest (POST /v1/identity, identity_routes.cc): a
// machine resumed from another's memory holds the parent's hostname, machine-id, MAC and SSH
// host keys until it is told otherwise.
#pragma once

#include <string>

#include "common/error.h"
#include "common/protocol/identity.h"

namespace berth::agent {

// Applies every field of `request` but the token (the caller swaps it once this succeeds),
// under `root`: "/" in a guest, where the hostname is also set in the kernel and the MAC on
// the NIC; any other directory (an agent on a host) gets the files only. Returns what it
// changed, in order. Blocks (it may run ssh-keygen): off the I/O thread.
Result<protocol::IdentityApplied> ApplyIdentity(const protocol::IdentityRequest& request, const std::string& root);

}  // namespace berth::agent
